// matmul (NumPy semantics), linear, conv2d, max/avg/global pooling at tier 0 against the
// reference, on every floating dtype (max_pool2d also on integers), with 1-D promotion, batch
// broadcasting, zero-size dims, odd sizes, strided views and symbolic batches; sizes at the
// edges of the interpreter's GEMM tiles, each conv2d path (depthwise direct kernel, 1x1 on
// the input planes, im2col + GEMM) and NaN propagation through matmul and conv2d.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "reference.h"

#include <cmath>
#include <optional>
#include <random>
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

struct ConvCase {
    Shape x, w;
    Pair stride, padding, dilation;
    std::int64_t groups;
    bool bias;
};

// conv2d at tier 0 against the reference; with nan_at, that element of the input (in
// row-major order) is NaN first, and NaN must reach exactly the outputs whose window holds it.
void check_conv(const ConvCase& c, DType dt, std::uint64_t seed, std::optional<std::int64_t> nan_at = std::nullopt) {
    CAPTURE(seed);
    INFO("dt = ", ref::dname(dt));
    INFO("x ", ref::shape_str(c.x), " w ", ref::shape_str(c.w), " stride ", c.stride[0], ",", c.stride[1],
         " padding ", c.padding[0], ",", c.padding[1], " dilation ", c.dilation[0], ",", c.dilation[1], " groups ",
         c.groups, " bias ", c.bias);
    Tensor x = ref::random_input(c.x, seed, dt, -2, 2), w = ref::random_input(c.w, seed + 1, dt, -1, 1);
    if (nan_at) {
        RTensor rx = ref::from_kiln(x);
        rx.v[static_cast<std::size_t>(*nan_at)] = std::nan("");
        x = ref::to_kiln(rx, dt);
    }
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
    ref::check_close(out[0], ref::conv2d(ref::from_kiln(x), ref::from_kiln(w), rb, c.stride, c.padding, c.dilation, c.groups),
                     dt, ref::tol_for(dt, std::max(2.0, std::sqrt(k))), "conv2d");
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
        for (const auto& c : cases) check_conv(c, dt, ++seed);
}

TEST_CASE("ops.linalg: matmul at the edges of the GEMM tiles (odd m, n, k in 1..40) and with batch broadcasting") {
    // Sizes on both sides of every register tile (4x8, 6x16, 12x32 and their f64 halves) and
    // of the streamed path for at most 4 rows.
    const std::vector<std::int64_t> sizes{1, 2, 3, 4, 5, 6, 7, 9, 11, 12, 13, 15, 17, 23, 25, 31, 33, 37, 40};
    std::mt19937_64 rng(4242);
    auto pick = [&] { return sizes[rng() % sizes.size()]; };
    std::uint64_t seed = 45000;
    for (DType dt : ref::float_dtypes())
        for (int t = 0; t < 24; ++t) {
            const std::int64_t m = pick(), n = pick(), k = pick();
            ++seed;
            CAPTURE(seed);
            check_matmul(ref::random_input({m, k}, seed, dt, -2, 2), ref::random_input({k, n}, seed + 1, dt, -2, 2));
        }
    for (DType dt : {DType::f32, DType::f64, DType::f16}) {
        ++seed;
        CAPTURE(seed);
        // Batch dims broadcast on either side, with matrices across the tiles.
        check_matmul(ref::random_input({2, 1, 13, 37}, seed, dt, -2, 2), ref::random_input({3, 37, 33}, seed + 1, dt, -2, 2));
        check_matmul(ref::random_input({3, 40, 9}, seed + 2, dt, -2, 2), ref::random_input({9, 17}, seed + 3, dt, -2, 2));
        check_matmul(ref::random_input({1, 4, 31}, seed + 4, dt, -2, 2), ref::random_input({5, 1, 31, 25}, seed + 5, dt, -2, 2));
        check_matmul(ref::random_input({2, 3, 1, 300}, seed + 6, dt, -1, 1), ref::random_input({300, 70}, seed + 7, dt, -1, 1));
    }
    // Larger than the cache blocks (k > 256, m > 144), f32 and f64.
    check_matmul(Tensor::randn({150, 300}, 46), Tensor::randn({300, 45}, 47));
    check_matmul(Tensor::randn({2, 97, 261}, 48, DType::f64), Tensor::randn({261, 130}, 49, DType::f64));
}

TEST_CASE("ops.linalg: matmul propagates a NaN to its row (A) or column (B) of the result") {
    for (DType dt : {DType::f32, DType::f64, DType::f16})
        for (std::int64_t m : {1, 3, 8, 19}) {
            INFO("dt = ", ref::dname(dt));
            CAPTURE(m);
            RTensor ra = ref::from_kiln(ref::random_input({m, 21}, 46000 + static_cast<std::uint64_t>(m), dt, -2, 2));
            RTensor rb = ref::from_kiln(ref::random_input({21, 35}, 46100, dt, -2, 2));
            ra.v[static_cast<std::size_t>((m / 2) * 21 + 5)] = std::nan("");
            rb.v[static_cast<std::size_t>(7 * 35 + 34)] = std::nan("");
            check_matmul(ref::to_kiln(ra, dt), ref::to_kiln(rb, dt));  // the reference has NaN in the same places
        }
}

TEST_CASE("ops.linalg: depthwise conv2d (direct kernel): strides 1, 2, 3, padding, dilation, multipliers") {
    // Rows wide enough for the vector loops of every instruction set (16 floats a vector on
    // AVX-512) on both sides of the padded edges.
    const std::vector<ConvCase> cases{
        {{2, 5, 21, 45}, {5, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 5, true},   // mobilenet's stride 2
        {{1, 4, 19, 50}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 4, true},   // mobilenet's stride 1
        {{1, 3, 17, 41}, {3, 1, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 3, false},  // dilation 2
        {{1, 3, 16, 38}, {3, 1, 5, 5}, {1, 1}, {2, 2}, {1, 1}, 3, true},   // 5x5
        {{1, 3, 16, 39}, {3, 1, 5, 5}, {2, 2}, {2, 2}, {1, 1}, 3, true},   // 5x5 stride 2
        {{1, 2, 12, 37}, {2, 1, 3, 5}, {1, 2}, {0, 2}, {2, 1}, 2, true},   // asymmetric
        {{1, 2, 11, 40}, {2, 1, 3, 3}, {3, 3}, {1, 1}, {1, 1}, 2, true},   // stride 3 (scalar rows)
        {{1, 3, 9, 33}, {6, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 3, true},    // multiplier 2
        {{2, 1, 7, 20}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},   // one input channel
        {{1, 2, 5, 3}, {2, 1, 3, 3}, {2, 2}, {3, 3}, {1, 1}, 2, true},     // padding wider than the input
        {{1, 2, 7, 4}, {2, 1, 3, 3}, {1, 1}, {0, 0}, {3, 1}, 2, true},     // dilated to the input: 1 x 2
    };
    std::uint64_t seed = 47000;
    for (DType dt : ref::float_dtypes())
        for (const auto& c : cases) check_conv(c, dt, ++seed);
}

TEST_CASE("ops.linalg: 1x1 conv2d (GEMM on the input planes) and im2col convolutions across the GEMM tiles") {
    const std::vector<ConvCase> cases{
        {{2, 8, 13, 29}, {12, 8, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},  // 1x1, read in place
        {{1, 8, 9, 11}, {6, 4, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 2, false},   // 1x1 grouped
        {{1, 3, 5, 7}, {37, 3, 1, 1}, {1, 1}, {0, 0}, {2, 2}, 1, true},    // 1x1, dilation is moot
        {{1, 6, 9, 10}, {5, 6, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1, true},    // 1x1 stride 2: im2col
        {{1, 6, 5, 6}, {5, 6, 1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, true},     // 1x1 padded: im2col
        {{1, 20, 15, 17}, {33, 20, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},  // resnet-like
        {{2, 6, 14, 9}, {10, 3, 3, 3}, {2, 1}, {1, 0}, {1, 2}, 2, false},
    };
    std::uint64_t seed = 48000;
    for (DType dt : ref::float_dtypes())
        for (const auto& c : cases) check_conv(c, dt, ++seed);
}

TEST_CASE("ops.linalg: conv2d propagates a NaN input to the outputs whose window holds it, on every path") {
    std::uint64_t seed = 49000;
    for (DType dt : {DType::f32, DType::f64, DType::f16}) {
        // Depthwise, 1x1 in place, and im2col; the NaN sits inside and at the border.
        for (std::int64_t at : {0, 7 * 23 + 11, 2 * 9 * 23 - 1}) {
            check_conv({{1, 2, 9, 23}, {2, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, true}, dt, ++seed, at);
            check_conv({{1, 2, 9, 23}, {2, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 2, true}, dt, ++seed, at);
            check_conv({{1, 2, 9, 23}, {5, 2, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true}, dt, ++seed, at);
            check_conv({{1, 2, 9, 23}, {5, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true}, dt, ++seed, at);
        }
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

TEST_CASE("ops.linalg: max_pool2d of floats, random windows over wide planes, NaN propagating") {
    // The vector kernel's paths: strides 1, 2 (vectors) and 3 (lanes one by one), tails of
    // every length, windows over the padding, NaN in some windows.
    std::mt19937_64 rng(45000);
    auto pick = [&](std::int64_t lo, std::int64_t hi) {
        return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
    };
    for (int r = 0; r < 80; ++r) {
        const std::int64_t kh = pick(1, 4), kw = pick(1, 4), sh = pick(1, 3), sw = pick(1, 3);
        const std::int64_t ph = pick(0, kh / 2), pw = pick(0, kw / 2);
        const Shape xs{pick(1, 2), pick(1, 3), pick(kh, 40), pick(kw, 70)};
        const DType dt = r % 2 ? DType::f64 : DType::f32;
        CAPTURE(r);
        INFO("x ", ref::shape_str(xs), " kernel ", kh, ",", kw, " stride ", sh, ",", sw, " padding ", ph, ",", pw);
        Tensor x = ref::random_input(xs, 45100 + static_cast<std::uint64_t>(r), dt, -9, -1);
        if (r % 3 == 0) {  // a few NaNs
            std::vector<double> v = x.to_doubles();
            for (int i = 0; i < 3; ++i) v[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(v.size()) - 1))] = std::nan("");
            x = Tensor::from_vector(v, xs).astype(dt);
        }
        kiln::Graph g = kiln::trace("pool", {ref::arg_like("x", x)}, [&](const std::vector<Var>& in) -> Var {
            return kiln::max_pool2d(in[0], {kh, kw}, {sh, sw}, {ph, pw});
        });
        ref::check_close(ref::run_graph(g, {x})[0], ref::max_pool2d(ref::from_kiln(x), {kh, kw}, {sh, sw}, {ph, pw}), dt,
                         ref::tol_for(dt), "max_pool2d");
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
