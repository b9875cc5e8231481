// matmul (NumPy semantics), linear, conv2d, max/avg/global pooling at tier 0 against the
// reference, on every floating dtype (max_pool2d also on integers), with 1-D promotion, batch
// broadcasting, zero-size dims, odd sizes, strided views and symbolic batches.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "reference.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace {

using kiln::DType;
using kiln::Pair;
using kiln::Shape;
using kiln::Tensor;
using kiln::Var;
using ref::RTensor;

void check_matmul(const Tensor& a, const Tensor& b) {
    DType dt = a.dtype();
    INFO("dt = ", ref::dname(dt));
    INFO("a ", ref::shape_str(a.shape()), " b ", ref::shape_str(b.shape()));
    kiln::Graph g = kiln::trace("matmul", {ref::arg_like("a", a), ref::arg_like("b", b)},
                                [](const std::vector<Var>& in) -> Var { return kiln::matmul(in[0], in[1]); });
    auto out = ref::run_graph(g, {a, b});
    REQUIRE(out.size() == 1);
    double k = static_cast<double>(a.shape().back());
    ref::check_close(out[0], ref::matmul(ref::from_kiln(a), ref::from_kiln(b)), dt,
                     ref::tol_for(dt, std::max(1.0, std::sqrt(k))), "matmul");
}

}  // namespace

TEST_CASE("ops.linalg: matmul with 1-D promotion, batch broadcasting and odd/zero sizes") {
    const std::vector<std::pair<Shape, Shape>> cases{
        {{3, 4}, {4, 5}},       {{4}, {4, 5}},          {{3, 4}, {4}},        {{4}, {4}},
        {{2, 3, 4}, {4, 5}},    {{3, 4}, {2, 4, 5}},    {{2, 1, 3, 4}, {5, 4, 6}}, {{7}, {3, 7, 2}},
        {{2, 3, 7}, {7}},       {{0, 4}, {4, 3}},       {{3, 0}, {0, 5}},     {{1, 1}, {1, 1}},
        {{17, 33}, {33, 7}},    {{0, 3, 4}, {4, 2}},    {{1, 65}, {65, 1}},   {{4, 1, 2, 3}, {1, 3, 3, 2}},
    };
    std::uint64_t seed = 40000;
    for (DType dt : ref::float_dtypes())
        for (const auto& [sa, sb] : cases) {
            ++seed;
            CAPTURE(seed);
            check_matmul(ref::random_input(sa, seed, dt, -2, 2), ref::random_input(sb, seed + 1, dt, -2, 2));
        }
}

TEST_CASE("ops.linalg: matmul on transposed and sliced views, and a larger product") {
    Tensor a = Tensor::randn({8, 5}, 41).transpose(0, 1);            // [5,8]
    Tensor b = Tensor::randn({8, 12}, 42).slice(1, 0, 12, 2);         // [8,6]
    REQUIRE_FALSE(a.is_contiguous());
    check_matmul(a, b);
    check_matmul(Tensor::randn({3, 6}, 43).broadcast_to({2, 3, 6}), Tensor::randn({2, 6, 4}, 44).permute({0, 1, 2}));
    check_matmul(Tensor::randn({64, 129}, 45, DType::f64), Tensor::randn({129, 31}, 46, DType::f64));
    check_matmul(Tensor::randn({33, 257}, 47), Tensor::randn({257, 17}, 48));
}

TEST_CASE("ops.linalg: linear is x @ w^T + b with w [out, in], bias optional") {
    std::uint64_t seed = 41000;
    for (DType dt : ref::float_dtypes())
        for (Shape xs : {Shape{3, 5}, Shape{2, 4, 5}, Shape{5}, Shape{0, 5}, Shape{1, 5}}) {
            ++seed;
            CAPTURE(seed);
            INFO("dt = ", ref::dname(dt));
            INFO("x ", ref::shape_str(xs));
            Tensor x = ref::random_input(xs, seed, dt, -2, 2), w = ref::random_input({7, 5}, seed + 1, dt, -1, 1);
            Tensor b = ref::random_input({7}, seed + 2, dt, -1, 1);
            kiln::Graph g = kiln::trace("linear", {ref::arg_like("x", x), ref::arg_like("w", w), ref::arg_like("b", b)},
                                        [](const std::vector<Var>& in) {
                                            return std::vector<Var>{kiln::linear(in[0], in[1], in[2]), kiln::linear(in[0], in[1])};
                                        });
            auto out = ref::run_graph(g, {x, w, b});
            REQUIRE(out.size() == 2);
            RTensor rx = ref::from_kiln(x), rw = ref::from_kiln(w), rb = ref::from_kiln(b);
            ref::check_close(out[0], ref::linear(rx, rw, rb), dt, ref::tol_for(dt, 3), "linear with bias");
            ref::check_close(out[1], ref::linear(rx, rw, std::nullopt), dt, ref::tol_for(dt, 3), "linear without bias");
        }
    // Constant weights captured in the trace, symbolic batch.
    Tensor w = Tensor::randn({4, 9}, 49), b = Tensor::randn({4}, 50);
    kiln::Graph g = kiln::trace("linear_const", {kiln::arg("x", DType::f32, {kiln::dyn("B"), 9})},
                                [&](const std::vector<Var>& in) -> Var { return kiln::linear(in[0], w, b); });
    kiln::Function f = ref::interp_engine().load(g);
    for (std::int64_t n : {2, 0, 7}) {
        CAPTURE(n);
        Tensor x = Tensor::randn({n, 9}, 51 + static_cast<std::uint64_t>(n));
        ref::check_close(f({x})[0], ref::linear(ref::from_kiln(x), ref::from_kiln(w), ref::from_kiln(b)), DType::f32,
                         ref::tol_for(DType::f32, 3), "linear const");
    }
}

TEST_CASE("ops.linalg: conv2d with stride, padding, dilation, groups and optional bias") {
    struct ConvCase {
        Shape x, w;
        Pair stride, padding, dilation;
        std::int64_t groups;
        bool bias;
    };
    const std::vector<ConvCase> cases{
        {{1, 1, 5, 5}, {1, 1, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, true},
        {{2, 3, 7, 7}, {4, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, true},
        {{2, 4, 9, 8}, {6, 2, 3, 2}, {1, 2}, {1, 0}, {2, 1}, 2, false},
        {{1, 6, 5, 5}, {6, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 6, true},   // depthwise
        {{3, 2, 4, 4}, {5, 2, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},   // 1x1
        {{0, 3, 5, 5}, {2, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, true},   // empty batch
        {{1, 3, 17, 3}, {2, 3, 3, 3}, {3, 1}, {2, 2}, {1, 1}, 1, false},  // odd, big padding
        {{2, 4, 6, 6}, {4, 1, 2, 2}, {2, 2}, {0, 1}, {2, 2}, 4, true},
        {{1, 1, 1, 1}, {3, 1, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},
    };
    std::uint64_t seed = 42000;
    for (DType dt : ref::float_dtypes())
        for (const auto& c : cases) {
            ++seed;
            CAPTURE(seed);
            INFO("dt = ", ref::dname(dt));
            INFO("x ", ref::shape_str(c.x), " w ", ref::shape_str(c.w), " stride ", c.stride[0], ",", c.stride[1],
                 " padding ", c.padding[0], ",", c.padding[1], " dilation ", c.dilation[0], ",", c.dilation[1],
                 " groups ", c.groups, " bias ", c.bias);
            Tensor x = ref::random_input(c.x, seed, dt, -2, 2), w = ref::random_input(c.w, seed + 1, dt, -1, 1);
            Tensor b = ref::random_input({c.w[0]}, seed + 2, dt, -1, 1);
            std::vector<kiln::ArgSpec> args{ref::arg_like("x", x), ref::arg_like("w", w)};
            if (c.bias) args.push_back(ref::arg_like("b", b));
            kiln::Graph g = kiln::trace("conv", args, [&](const std::vector<Var>& in) -> Var {
                return kiln::conv2d(in[0], in[1], c.bias ? in[2] : Var(), c.stride, c.padding, c.dilation, c.groups);
            });
            auto out = c.bias ? ref::run_graph(g, {x, w, b}) : ref::run_graph(g, {x, w});
            REQUIRE(out.size() == 1);
            std::optional<RTensor> rb;
            if (c.bias) rb = ref::from_kiln(b);
            double k = static_cast<double>(c.w[1] * c.w[2] * c.w[3]);
            ref::check_close(out[0],
                             ref::conv2d(ref::from_kiln(x), ref::from_kiln(w), rb, c.stride, c.padding, c.dilation, c.groups),
                             dt, ref::tol_for(dt, std::max(2.0, std::sqrt(k))), "conv2d");
        }
}

TEST_CASE("ops.linalg: conv2d with default arguments, a strided input and a symbolic batch") {
    Tensor w = Tensor::randn({4, 3, 3, 3}, 61), b = Tensor::randn({4}, 62);
    kiln::Graph g = kiln::trace("conv_dyn", {kiln::arg("x", DType::f32, {kiln::dyn("N"), 3, 8, 8})},
                                [&](const std::vector<Var>& in) {
                                    return std::vector<Var>{kiln::conv2d(in[0], w), kiln::conv2d(in[0], w, b, {2, 2}, {1, 1})};
                                });
    kiln::Function f = ref::interp_engine().load(g);
    for (std::int64_t n : {1, 0, 3}) {
        CAPTURE(n);
        Tensor x = Tensor::randn({n, 8, 8, 3}, 63 + static_cast<std::uint64_t>(n)).permute({0, 3, 1, 2});  // NHWC storage
        auto out = f({x});
        REQUIRE(out.size() == 2);
        RTensor rx = ref::from_kiln(x), rw = ref::from_kiln(w);
        ref::check_close(out[0], ref::conv2d(rx, rw, std::nullopt, {1, 1}, {0, 0}, {1, 1}, 1), DType::f32,
                         ref::tol_for(DType::f32, 6), "conv2d default");
        ref::check_close(out[1], ref::conv2d(rx, rw, ref::from_kiln(b), {2, 2}, {1, 1}, {1, 1}, 1), DType::f32,
                         ref::tol_for(DType::f32, 6), "conv2d s2 p1");
    }
}

TEST_CASE("ops.linalg: max_pool2d (floats and integers) and avg_pool2d (padding not counted)") {
    struct PoolCase {
        Shape x;
        Pair kernel, stride, padding;
    };
    const std::vector<PoolCase> cases{
        {{1, 1, 4, 4}, {2, 2}, {2, 2}, {0, 0}}, {{2, 3, 5, 5}, {3, 3}, {1, 1}, {1, 1}},
        {{1, 2, 6, 5}, {3, 2}, {2, 1}, {1, 1}}, {{2, 1, 7, 7}, {3, 3}, {2, 2}, {1, 1}},
        {{1, 1, 1, 1}, {1, 1}, {1, 1}, {0, 0}}, {{0, 2, 4, 4}, {2, 2}, {2, 2}, {0, 0}},
        {{1, 3, 17, 9}, {4, 2}, {3, 3}, {2, 1}},
    };
    std::uint64_t seed = 43000;
    for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i32, DType::i64})
        for (const auto& c : cases) {
            ++seed;
            CAPTURE(seed);
            INFO("dt = ", ref::dname(dt));
            INFO("x ", ref::shape_str(c.x), " kernel ", c.kernel[0], ",", c.kernel[1], " stride ", c.stride[0], ",",
                 c.stride[1], " padding ", c.padding[0], ",", c.padding[1]);
            // All-negative inputs check that padding never wins the max.
            Tensor x = ref::random_input(c.x, seed, dt, dt == DType::u8 ? 0 : -9, dt == DType::u8 ? 9 : -1);
            bool is_float = kiln::is_floating(dt);
            kiln::Graph g = kiln::trace("pool", {ref::arg_like("x", x)}, [&](const std::vector<Var>& in) {
                std::vector<Var> outs{kiln::max_pool2d(in[0], c.kernel, c.stride, c.padding)};
                if (is_float) outs.push_back(kiln::avg_pool2d(in[0], c.kernel, c.stride, c.padding));
                return outs;
            });
            auto out = ref::run_graph(g, {x});
            RTensor rx = ref::from_kiln(x);
            ref::check_close(out[0], ref::max_pool2d(rx, c.kernel, c.stride, c.padding), dt, ref::tol_for(dt), "max_pool2d");
            if (is_float)
                ref::check_close(out[1], ref::avg_pool2d(rx, c.kernel, c.stride, c.padding), dt, ref::tol_for(dt, 2),
                                 "avg_pool2d");
        }
}

TEST_CASE("ops.linalg: global_avg_pool2d keeps [N,C,1,1]") {
    std::uint64_t seed = 44000;
    for (DType dt : ref::float_dtypes())
        for (Shape s : {Shape{2, 3, 5, 7}, Shape{1, 1, 1, 1}, Shape{0, 4, 3, 3}, Shape{1, 2, 33, 17}}) {
            ++seed;
            CAPTURE(seed);
            INFO("dt = ", ref::dname(dt));
            Tensor x = ref::random_input(s, seed, dt, -2, 2);
            kiln::Graph g = kiln::trace("gap", {ref::arg_like("x", x)},
                                        [](const std::vector<Var>& in) -> Var { return kiln::global_avg_pool2d(in[0]); });
            ref::check_close(ref::run_graph(g, {x})[0], ref::global_avg_pool2d(ref::from_kiln(x)), dt,
                             ref::tol_for(dt, std::sqrt(static_cast<double>(s[2] * s[3]))), "global_avg_pool2d");
        }
    // A strided view input.
    Tensor v = Tensor::randn({4, 6, 2, 3}, 45).permute({2, 3, 0, 1});  // [2,3,4,6]
    kiln::Graph g = kiln::trace("gap_view", {ref::arg_like("x", v)},
                                [](const std::vector<Var>& in) -> Var { return kiln::global_avg_pool2d(in[0]); });
    ref::check_close(ref::run_graph(g, {v})[0], ref::global_avg_pool2d(ref::from_kiln(v)), DType::f32,
                     ref::tol_for(DType::f32, 5), "global_avg_pool2d view");
}
