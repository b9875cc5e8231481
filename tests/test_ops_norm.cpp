// Normalisation ops at tier 0 against the reference: softmax and log_softmax on any axis,
// layer_norm (biased variance), rms_norm and batch_norm (inference form), on every floating
// dtype, with odd sizes, views, constants and symbolic dims.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "reference.h"

#include <random>
#include <string>
#include <vector>

namespace {

using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
using kiln::Var;
using ref::RTensor;

}  // namespace

TEST_CASE("ops.norm: softmax and log_softmax on every axis (negative too) and floating dtype") {
    std::mt19937_64 rng(31);
    std::uint64_t seed = 30000;
    for (DType dt : ref::float_dtypes())
        for (int rep = 0; rep < 8; ++rep) {
            ++seed;
            CAPTURE(seed);
            INFO("dt = ", ref::dname(dt));
            int rank = 1 + static_cast<int>(rng() % 4);
            Shape s = ref::random_shape(rng, rank, rank > 2 ? std::vector<std::int64_t>{1, 2, 3, 7}
                                                            : std::vector<std::int64_t>{1, 3, 7, 17, 33});
            std::int64_t axis = static_cast<std::int64_t>(rng() % rank) - (rep % 2 ? rank : 0);
            INFO("x ", ref::shape_str(s), " axis ", axis);
            // A wide range checks that the max is subtracted (exp(40) overflows f16).
            Tensor x = ref::random_input(s, seed, dt, rep < 4 ? -4 : -40, rep < 4 ? 4 : 40);
            kiln::Graph g = kiln::trace("softmax", {ref::arg_like("x", x)}, [&](const std::vector<Var>& in) {
                return std::vector<Var>{kiln::softmax(in[0], axis), kiln::log_softmax(in[0], axis)};
            });
            auto out = ref::run_graph(g, {x});
            REQUIRE(out.size() == 2);
            RTensor rx = ref::from_kiln(x);
            ref::check_close(out[0], ref::softmax(rx, axis), dt, ref::tol_for(dt, 4), "softmax");
            // log_softmax values reach -80: relative tolerance covers them.
            ref::check_close(out[1], ref::log_softmax(rx, axis), dt, ref::tol_for(dt, 8), "log_softmax");
        }
}

TEST_CASE("ops.norm: softmax default axis, long rows and a zero-size batch") {
    for (DType dt : {DType::f32, DType::f64}) {
        INFO("dt = ", ref::dname(dt));
        for (Shape s : {Shape{2, 1000}, Shape{0, 9}, Shape{3, 1}}) {
            Tensor x = ref::random_input(s, 31337, dt, -5, 5);
            kiln::Graph g = kiln::trace("softmax_default", {ref::arg_like("x", x)}, [](const std::vector<Var>& in) {
                return std::vector<Var>{kiln::softmax(in[0]), kiln::log_softmax(in[0])};
            });
            auto out = ref::run_graph(g, {x});
            ref::check_close(out[0], ref::softmax(ref::from_kiln(x), -1), dt, ref::tol_for(dt, 4), "softmax");
            ref::check_close(out[1], ref::log_softmax(ref::from_kiln(x), -1), dt, ref::tol_for(dt, 8), "log_softmax");
        }
    }
}

TEST_CASE("ops.norm: layer_norm and rms_norm over the last axis, every floating dtype") {
    std::mt19937_64 rng(32);
    std::uint64_t seed = 31000;
    for (DType dt : ref::float_dtypes())
        for (int rep = 0; rep < 6; ++rep) {
            ++seed;
            CAPTURE(seed);
            INFO("dt = ", ref::dname(dt));
            int rank = 1 + static_cast<int>(rng() % 3);
            Shape s = ref::random_shape(rng, rank, {1, 3, 7, 17, 33});
            std::int64_t d = s.back();
            double eps = rep % 2 ? 1e-5 : 1e-3;
            INFO("x ", ref::shape_str(s), " eps ", eps);
            // An offset mean checks that the variance is centred.
            Tensor x = ref::random_input(s, seed, dt, 1, 4);
            Tensor gamma = ref::random_input({d}, seed + 1, dt, 0.5, 2), beta = ref::random_input({d}, seed + 2, dt, -1, 1);
            kiln::Graph g = kiln::trace("norms", {ref::arg_like("x", x), ref::arg_like("g", gamma), ref::arg_like("b", beta)},
                                        [&](const std::vector<Var>& in) {
                                            return std::vector<Var>{kiln::layer_norm(in[0], in[1], in[2], eps),
                                                                    kiln::rms_norm(in[0], in[1], eps)};
                                        });
            auto out = ref::run_graph(g, {x, gamma, beta});
            REQUIRE(out.size() == 2);
            RTensor rx = ref::from_kiln(x), rg = ref::from_kiln(gamma), rb = ref::from_kiln(beta);
            // layer_norm of a row of length 1 is exactly beta (x - mean = 0).
            ref::check_close(out[0], ref::layer_norm(rx, rg, rb, eps), dt, ref::tol_for(dt, 8), "layer_norm");
            ref::check_close(out[1], ref::rms_norm(rx, rg, eps), dt, ref::tol_for(dt, 4), "rms_norm");
        }
}

TEST_CASE("ops.norm: default eps, constant parameters and a non-contiguous input") {
    Tensor gamma = Tensor::rand({6}, 41, DType::f32, 0.5, 2), beta = Tensor::randn({6}, 42);
    Tensor x = Tensor::randn({6, 4}, 43).transpose(0, 1);  // [4,6], strided
    REQUIRE_FALSE(x.is_contiguous());
    kiln::Graph g = kiln::trace("norm_consts", {ref::arg_like("x", x)}, [&](const std::vector<Var>& in) {
        return std::vector<Var>{kiln::layer_norm(in[0], gamma, beta), kiln::rms_norm(in[0], gamma)};
    });
    auto out = ref::run_graph(g, {x});
    RTensor rx = ref::from_kiln(x), rg = ref::from_kiln(gamma), rb = ref::from_kiln(beta);
    ref::check_close(out[0], ref::layer_norm(rx, rg, rb, 1e-5), DType::f32, ref::tol_for(DType::f32, 8), "layer_norm");
    ref::check_close(out[1], ref::rms_norm(rx, rg, 1e-6), DType::f32, ref::tol_for(DType::f32, 4), "rms_norm");
}

TEST_CASE("ops.norm: batch_norm per channel of axis 1, ranks 2 to 4, every floating dtype") {
    std::uint64_t seed = 32000;
    for (DType dt : ref::float_dtypes())
        for (Shape s : {Shape{2, 3}, Shape{4, 5, 7}, Shape{2, 3, 5, 5}, Shape{1, 17, 1, 3}, Shape{0, 4, 2, 2}}) {
            ++seed;
            CAPTURE(seed);
            INFO("dt = ", ref::dname(dt));
            INFO("x ", ref::shape_str(s));
            std::int64_t c = s[1];
            Tensor x = ref::random_input(s, seed, dt, -3, 3);
            Tensor mean = ref::random_input({c}, seed + 1, dt, -1, 1), var = ref::random_input({c}, seed + 2, dt, 0.2, 2);
            Tensor gamma = ref::random_input({c}, seed + 3, dt, 0.5, 2), beta = ref::random_input({c}, seed + 4, dt, -1, 1);
            kiln::Graph g = kiln::trace("bn",
                                        {ref::arg_like("x", x), ref::arg_like("m", mean), ref::arg_like("v", var),
                                         ref::arg_like("g", gamma), ref::arg_like("b", beta)},
                                        [](const std::vector<Var>& in) -> Var {
                                            return kiln::batch_norm(in[0], in[1], in[2], in[3], in[4], 1e-3);
                                        });
            auto out = ref::run_graph(g, {x, mean, var, gamma, beta});
            ref::check_close(out[0],
                             ref::batch_norm(ref::from_kiln(x), ref::from_kiln(mean), ref::from_kiln(var),
                                             ref::from_kiln(gamma), ref::from_kiln(beta), 1e-3),
                             dt, ref::tol_for(dt, 4), "batch_norm");
        }
}

TEST_CASE("ops.norm: symbolic batch with softmax and layer_norm, sizes including 0") {
    Tensor gamma = Tensor::rand({17}, 51, DType::f32, 0.5, 2), beta = Tensor::randn({17}, 52);
    kiln::Graph g = kiln::trace("dyn_norm", {kiln::arg("x", DType::f32, {kiln::dyn("B"), 17})},
                                [&](const std::vector<Var>& in) {
                                    return std::vector<Var>{kiln::softmax(in[0], 1), kiln::layer_norm(in[0], gamma, beta),
                                                            kiln::softmax(in[0], 0)};
                                });
    kiln::Function f = ref::interp_engine().load(g);
    for (std::int64_t b : {5, 0, 1, 33, 0, 2}) {
        CAPTURE(b);
        Tensor x = Tensor::randn({b, 17}, 600 + static_cast<std::uint64_t>(b));
        auto out = f({x});
        REQUIRE(out.size() == 3);
        RTensor rx = ref::from_kiln(x);
        ref::check_close(out[0], ref::softmax(rx, 1), DType::f32, ref::tol_for(DType::f32, 4), "softmax 1");
        ref::check_close(out[1], ref::layer_norm(rx, ref::from_kiln(gamma), ref::from_kiln(beta), 1e-5), DType::f32,
                         ref::tol_for(DType::f32, 8), "layer_norm");
        ref::check_close(out[2], ref::softmax(rx, 0), DType::f32, ref::tol_for(DType::f32, 4), "softmax over B");
    }
}
