// Reductions at tier 0 against the reference: sum, mean, max, min, prod over axis sets (empty =
// all, negative, keepdim), argmax/argmin (first index, NaN is the extreme, i64 output), every
// dtype each accepts, zero-size dims, odd sizes, views and symbolic dims.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "reference.h"

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
using kiln::Var;
using ref::RTensor;
using Axes = std::vector<std::int64_t>;

enum class R { sum, mean, max, min, prod };

const char* rname(R r) {
    switch (r) {
    case R::sum: return "sum";
    case R::mean: return "mean";
    case R::max: return "max";
    case R::min: return "min";
    case R::prod: return "prod";
    }
    return "?";
}

Var kreduce(R r, const Var& x, const Axes& axes, bool keep) {
    switch (r) {
    case R::sum: return kiln::sum(x, axes, keep);
    case R::mean: return kiln::mean(x, axes, keep);
    case R::max: return kiln::max(x, axes, keep);
    case R::min: return kiln::min(x, axes, keep);
    case R::prod: return kiln::prod(x, axes, keep);
    }
    return {};
}

RTensor rreduce(R r, const RTensor& x, const Axes& axes, bool keep, DType dt) {
    switch (r) {
    case R::sum: return ref::sum(x, axes, keep, dt);
    case R::mean: return ref::mean(x, axes, keep);
    case R::max: return ref::max(x, axes, keep);
    case R::min: return ref::min(x, axes, keep);
    case R::prod: return ref::prod(x, axes, keep, dt);
    }
    return {};
}

std::int64_t reduced_count(const Shape& s, const Axes& axes) {
    if (axes.empty()) return ref::numel_of(s);
    std::int64_t n = 1;
    for (auto a : axes) n *= s[ref::norm_axis(a, static_cast<std::int64_t>(s.size()))];
    return n;
}

// Random axis sets valid for `rank`: sorted by normalised axis, unique, sometimes negative.
Axes random_axes(std::mt19937_64& rng, std::int64_t rank) {
    Axes axes;
    if (rng() % 5 == 0) return axes;  // all axes
    for (std::int64_t a = 0; a < rank; ++a)
        if (rng() % 2 == 0) axes.push_back(rng() % 2 ? a - rank : a);
    if (axes.empty()) axes.push_back(static_cast<std::int64_t>(rng() % rank) - (rng() % 2 ? rank : 0));
    return axes;
}

std::string axes_str(const Axes& a) { return ref::shape_str(a); }

// Input for a reduction that keeps products and integer sums exact in double.
Tensor reduce_input(R r, const Shape& s, std::uint64_t seed, DType dt) {
    if (r == R::prod) {
        if (kiln::is_floating(dt)) return ref::random_input(s, seed, dt, 0.6, 1.5);
        // Integer factors in {-2,-1,1,2} (u8: {1,2}): products stay exact and may wrap.
        RTensor v = ref::from_kiln(Tensor::rand(s, seed, DType::i32, 0, 4));
        for (double& d : v.v) d = dt == DType::u8 ? d / 2 + 1 : (d < 2 ? d - 2 : d - 1);
        for (double& d : v.v) d = std::floor(d);
        return ref::to_kiln(v, dt);
    }
    if (kiln::is_integer(dt)) return ref::random_input(s, seed, dt, -60, 60);  // i8 sums wrap
    return ref::random_input(s, seed, dt, -3, 3);
}

void check_reduce(R r, DType dt, const Tensor& x, const Axes& axes, bool keep) {
    CAPTURE(rname(r));
    INFO("dt = ", ref::dname(dt));
    INFO("x ", ref::shape_str(x.shape()), " axes ", axes_str(axes), " keepdim ", keep);
    kiln::Graph g = kiln::trace(rname(r), {ref::arg_like("x", x)},
                                [&](const std::vector<Var>& in) -> Var { return kreduce(r, in[0], axes, keep); });
    auto out = ref::run_graph(g, {x});
    REQUIRE(out.size() == 1);
    double n = static_cast<double>(std::max<std::int64_t>(1, reduced_count(x.shape(), axes)));
    double scale = (r == R::sum || r == R::mean) ? std::sqrt(n) : (r == R::prod ? 2.0 : 1.0);
    ref::check_close(out[0], rreduce(r, ref::from_kiln(x), axes, keep, dt), dt, ref::tol_for(dt, scale), rname(r));
}

}  // namespace

TEST_CASE("ops.reduce: sum, mean, max, min, prod over random axes, keepdim, every accepted dtype") {
    std::mt19937_64 rng(12345);
    std::uint64_t seed = 20000;
    for (R r : {R::sum, R::mean, R::max, R::min, R::prod})
        for (DType dt : ref::all_dtypes()) {
            if (dt == DType::boolean) continue;                      // reductions take numbers
            if (r == R::mean && !kiln::is_floating(dt)) continue;    // mean is floating only
            for (int rep = 0; rep < 6; ++rep) {
                ++seed;
                CAPTURE(seed);
                int rank = 1 + static_cast<int>(rng() % 4);
                std::vector<std::int64_t> sizes =
                    r == R::prod ? std::vector<std::int64_t>{1, 2, 3} : std::vector<std::int64_t>{1, 3, 7, 17, 33};
                if (rank >= 3) sizes = r == R::prod ? std::vector<std::int64_t>{1, 2} : std::vector<std::int64_t>{1, 2, 3, 7};
                Shape s = ref::random_shape(rng, rank, sizes);
                Axes axes = random_axes(rng, rank);
                check_reduce(r, dt, reduce_input(r, s, seed, dt), axes, rep % 2 == 1);
            }
        }
}

TEST_CASE("ops.reduce: the single-axis overloads and negative axes") {
    Tensor x = Tensor::randn({3, 5, 7}, 21);
    kiln::Graph g = kiln::trace("single_axis", {ref::arg_like("x", x)}, [](const std::vector<Var>& in) {
        return std::vector<Var>{kiln::sum(in[0], -1), kiln::mean(in[0], 1, true), kiln::max(in[0], -3),
                                kiln::min(in[0], 2, true), kiln::prod(in[0], -2)};
    });
    auto out = ref::run_graph(g, {x});
    REQUIRE(out.size() == 5);
    RTensor rx = ref::from_kiln(x);
    const DType f = DType::f32;
    ref::check_close(out[0], ref::sum(rx, {-1}, false, f), f, ref::tol_for(f, 3), "sum -1");
    ref::check_close(out[1], ref::mean(rx, {1}, true), f, ref::tol_for(f, 3), "mean 1 keep");
    ref::check_close(out[2], ref::max(rx, {0}, false), f, ref::tol_for(f), "max -3");
    ref::check_close(out[3], ref::min(rx, {2}, true), f, ref::tol_for(f), "min 2 keep");
    ref::check_close(out[4], ref::prod(rx, {1}, false, f), f, ref::tol_for(f, 4), "prod -2");
}

TEST_CASE("ops.reduce: long reductions in f32, f16 and bf16 stay accurate") {
    std::uint64_t seed = 21000;
    for (DType dt : ref::float_dtypes()) {
        ++seed;
        CAPTURE(seed);
        Tensor x = ref::random_input({3, 4099}, seed, dt, -1, 1);
        check_reduce(R::sum, dt, x, {-1}, false);
        check_reduce(R::mean, dt, x, {1}, true);
        check_reduce(R::max, dt, x, {}, false);
        Tensor y = ref::random_input({1025, 5}, seed + 1, dt, 0, 2);
        check_reduce(R::sum, dt, y, {0}, false);
        check_reduce(R::mean, dt, y, {}, true);
    }
}

TEST_CASE("ops.reduce: zero-size dims (empty outputs, sum of nothing is 0, prod of nothing is 1)") {
    for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64}) {
        INFO("dt = ", ref::dname(dt));
        Tensor x = Tensor::zeros({0, 5}, dt);
        check_reduce(R::sum, dt, x, {1}, false);   // -> [0]
        check_reduce(R::sum, dt, x, {0}, false);   // -> [5] of zeros
        check_reduce(R::sum, dt, x, {0}, true);    // -> [1,5]
        check_reduce(R::prod, dt, x, {0}, false);  // -> [5] of ones
        check_reduce(R::max, dt, x, {1}, true);    // -> [0,1]
        check_reduce(R::min, dt, x, {-1}, false);  // -> [0]
        if (kiln::is_floating(dt)) check_reduce(R::mean, dt, x, {1}, false);  // -> [0]
        check_reduce(R::sum, dt, x, {}, false);    // -> [] of 0
    }
}

TEST_CASE("ops.reduce: non-contiguous input") {
    Tensor x = Tensor::randn({6, 4, 5}, 22).permute({2, 0, 1}).slice(1, 1, 6, 2);  // [5,3,4]
    REQUIRE_FALSE(x.is_contiguous());
    check_reduce(R::sum, DType::f32, x, {0, 2}, false);
    check_reduce(R::max, DType::f32, x, {-2}, true);
    Tensor b = Tensor::rand({7}, 23, DType::i32, -9, 9).broadcast_to({4, 7});
    check_reduce(R::sum, DType::i32, b, {0}, false);
    check_reduce(R::min, DType::i32, b, {1}, true);
}

TEST_CASE("ops.reduce: argmax and argmin (first index, i64 output, ties, keepdim, every numeric dtype)") {
    std::mt19937_64 rng(777);
    std::uint64_t seed = 23000;
    for (DType dt : ref::all_dtypes()) {
        if (dt == DType::boolean) continue;
        for (int rep = 0; rep < 6; ++rep) {
            ++seed;
            CAPTURE(seed);
            INFO("dt = ", ref::dname(dt));
            int rank = 1 + static_cast<int>(rng() % 3);
            Shape s = ref::random_shape(rng, rank, {1, 3, 7, 17});
            std::int64_t axis = static_cast<std::int64_t>(rng() % rank) - (rng() % 2 ? rank : 0);
            bool keep = rep % 2 == 0;
            INFO("x ", ref::shape_str(s), " axis ", axis, " keepdim ", keep);
            // Few distinct values so that ties are common: the first index must win.
            Tensor x = ref::to_kiln(ref::from_kiln(Tensor::rand(s, seed, DType::i32, 0, 4)), dt);
            kiln::Graph g = kiln::trace("arg", {ref::arg_like("x", x)}, [&](const std::vector<Var>& in) {
                return std::vector<Var>{kiln::argmax(in[0], axis, keep), kiln::argmin(in[0], axis, keep)};
            });
            auto out = ref::run_graph(g, {x});
            REQUIRE(out.size() == 2);
            ref::check_close(out[0], ref::argmax(ref::from_kiln(x), axis, keep), DType::i64, {}, "argmax");
            ref::check_close(out[1], ref::argmin(ref::from_kiln(x), axis, keep), DType::i64, {}, "argmin");
        }
    }
}

TEST_CASE("ops.reduce: argmax and argmin treat NaN as the extreme") {
    const double nan = std::nan("");
    for (DType dt : ref::float_dtypes()) {
        INFO("dt = ", ref::dname(dt));
        RTensor v = ref::make({4, 5}, {1, 3, nan, 3, nan,    //
                                       nan, 0, 0, 9, -9,     //
                                       2, 2, 2, 2, 2,        //
                                       -1, 5, -7, nan, 5});
        Tensor x = ref::to_kiln(v, dt);
        kiln::Graph g = kiln::trace("arg_nan", {ref::arg_like("x", x)}, [](const std::vector<Var>& in) {
            return std::vector<Var>{kiln::argmax(in[0], 1), kiln::argmin(in[0], -1), kiln::argmax(in[0], 0, true),
                                    kiln::argmin(in[0], 0)};
        });
        auto out = ref::run_graph(g, {x});
        REQUIRE(out.size() == 4);
        RTensor rx = ref::from_kiln(x);
        ref::check_close(out[0], ref::argmax(rx, 1, false), DType::i64, {}, "argmax axis 1");
        ref::check_close(out[1], ref::argmin(rx, -1, false), DType::i64, {}, "argmin axis -1");
        ref::check_close(out[2], ref::argmax(rx, 0, true), DType::i64, {}, "argmax axis 0 keepdim");
        ref::check_close(out[3], ref::argmin(rx, 0, false), DType::i64, {}, "argmin axis 0");
    }
}

TEST_CASE("ops.reduce: symbolic batch, sizes including 0") {
    kiln::Graph g = kiln::trace("dyn_reduce", {kiln::arg("x", DType::f32, {kiln::dyn("B"), 7})},
                                [](const std::vector<Var>& in) {
                                    Axes last{-1}, first{0};
                                    return std::vector<Var>{kiln::sum(in[0], last), kiln::max(in[0], last, true),
                                                            kiln::sum(in[0], first), kiln::argmax(in[0], 1)};
                                });
    kiln::Function f = ref::interp_engine().load(g);
    for (std::int64_t b : {3, 0, 1, 17, 0, 64}) {
        CAPTURE(b);
        Tensor x = Tensor::randn({b, 7}, 500 + static_cast<std::uint64_t>(b));
        auto out = f({x});
        REQUIRE(out.size() == 4);
        RTensor rx = ref::from_kiln(x);
        const DType f32 = DType::f32;
        ref::check_close(out[0], ref::sum(rx, {-1}, false, f32), f32, ref::tol_for(f32, 3), "sum -1");
        ref::check_close(out[1], ref::max(rx, {-1}, true), f32, ref::tol_for(f32), "max -1 keep");
        ref::check_close(out[2], ref::sum(rx, {0}, false, f32), f32, ref::tol_for(f32, 8), "sum over B");
        ref::check_close(out[3], ref::argmax(rx, 1, false), DType::i64, {}, "argmax");
    }
}
