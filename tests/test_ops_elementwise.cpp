// Elementwise ops at tier 0 against the double-precision reference (tests/reference.h):
// arithmetic, comparisons, where, clamp, cast, unary math, with broadcasting, every dtype
// each op accepts, zero-size and odd shapes, non-contiguous inputs and symbolic dims; and the
// scalar formulas every tier shares (src/core/scalar_ops.h) on edge values.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "reference.h"
#include "src/core/scalar_ops.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
using kiln::Var;
using ref::RTensor;

using KBin = std::function<Var(const Var&, const Var&)>;
using RBin = std::function<RTensor(const RTensor&, const RTensor&, DType)>;
using KUn = std::function<Var(const Var&)>;
using RUn = std::function<RTensor(const RTensor&, DType)>;

// Runs one binary op on a and b (any views) and compares with the reference.
void check_binary_on(const std::string& name, const KBin& kf, const RBin& rf, const Tensor& a, const Tensor& b,
                     DType out_dtype, ref::Tol tol) {
    CAPTURE(name);
    INFO("a: ", ref::dname(a.dtype()), ref::shape_str(a.shape()), " b: ", ref::shape_str(b.shape()));
    kiln::Graph g = kiln::trace(name, {ref::arg_like("a", a), ref::arg_like("b", b)},
                                [&](const std::vector<Var>& in) -> Var { return kf(in[0], in[1]); });
    auto out = ref::run_graph(g, {a, b});
    REQUIRE(out.size() == 1);
    ref::check_close(out[0], rf(ref::from_kiln(a), ref::from_kiln(b), a.dtype()), out_dtype, tol, name);
}

// Shape pairs covering equal shapes, rank-differing operands, size-1 dims, zero-size dims,
// rank 0 and odd sizes.
const std::vector<std::pair<Shape, Shape>>& shape_pairs() {
    static const std::vector<std::pair<Shape, Shape>> v{
        {{3, 4}, {3, 4}},       {{2, 3, 4}, {4}},    {{2, 1, 4}, {3, 1}}, {{1}, {5, 1, 3}},
        {{0, 3}, {3}},          {{7, 17}, {7, 1}},   {{33}, {33}},        {{1, 1}, {1, 1}},
        {{2, 0, 5}, {1, 0, 1}}, {{4, 1, 3}, {1, 5, 1}},
    };
    return v;
}

struct BinCase {
    const char* name;
    KBin kf;
    RBin rf;
    bool float_only;
};

const std::vector<BinCase>& arith_cases() {
    static const std::vector<BinCase> v{
        {"add", [](const Var& a, const Var& b) { return a + b; }, ref::add, false},
        {"sub", [](const Var& a, const Var& b) { return a - b; }, ref::sub, false},
        {"mul", [](const Var& a, const Var& b) { return a * b; }, ref::mul, false},
        {"maximum", [](const Var& a, const Var& b) { return kiln::maximum(a, b); },
         [](const RTensor& a, const RTensor& b, DType) { return ref::maximum(a, b); }, false},
        {"minimum", [](const Var& a, const Var& b) { return kiln::minimum(a, b); },
         [](const RTensor& a, const RTensor& b, DType) { return ref::minimum(a, b); }, false},
    };
    return v;
}

}  // namespace

TEST_CASE("ops.elementwise: add, sub, mul, maximum, minimum broadcast over every numeric dtype") {
    std::vector<DType> dts = ref::float_dtypes();
    for (DType d : ref::int_dtypes()) dts.push_back(d);
    std::uint64_t seed = 1000;
    for (const auto& c : arith_cases())
        for (DType dt : dts)
            for (const auto& [sa, sb] : shape_pairs()) {
                ++seed;
                CAPTURE(seed);
                // Integer ranges are small but i8/u8 products overflow on purpose: results wrap.
                double lo = kiln::is_integer(dt) ? -20 : -3, hi = kiln::is_integer(dt) ? 20 : 3;
                Tensor a = ref::random_input(sa, seed, dt, lo, hi), b = ref::random_input(sb, seed * 7, dt, lo, hi);
                check_binary_on(c.name, c.kf, c.rf, a, b, dt, ref::tol_for(dt));
            }
}

TEST_CASE("ops.elementwise: division, float and integer (truncation, division by zero gives 0)") {
    std::uint64_t seed = 2000;
    KBin kdiv = [](const Var& a, const Var& b) { return a / b; };
    for (DType dt : ref::float_dtypes())
        for (const auto& [sa, sb] : shape_pairs()) {
            ++seed;
            CAPTURE(seed);
            Tensor a = ref::random_input(sa, seed, dt, -3, 3), b = ref::random_input(sb, seed * 3, dt, 0.5, 3);
            check_binary_on("div", kdiv, ref::div, a, b, dt, ref::tol_for(dt));
        }
    for (DType dt : ref::int_dtypes())
        for (const auto& [sa, sb] : shape_pairs()) {
            ++seed;
            CAPTURE(seed);
            // Divisors include 0 and negative values (u8: 0..6).
            Tensor a = ref::random_input(sa, seed, dt, -50, 50), b = ref::random_input(sb, seed * 3, dt, -6, 7);
            check_binary_on("div", kdiv, ref::div, a, b, dt, ref::tol_for(dt));
        }
    // Explicit signs: -7/2 = -3, 7/-2 = -3, -7/-2 = 3, x/0 = 0.
    for (DType dt : {DType::i8, DType::i32, DType::i64}) {
        Tensor a = ref::to_kiln(ref::make({6}, {-7, 7, -7, 7, 0, -128}), dt);
        Tensor b = ref::to_kiln(ref::make({6}, {2, -2, -2, 0, 0, 3}), dt);
        check_binary_on("div", kdiv, ref::div, a, b, dt, ref::tol_for(dt));
    }
}

TEST_CASE("ops.elementwise: pow on floating dtypes") {
    std::uint64_t seed = 3000;
    for (DType dt : ref::float_dtypes())
        for (const auto& [sa, sb] : shape_pairs()) {
            ++seed;
            CAPTURE(seed);
            Tensor a = ref::random_input(sa, seed, dt, 0.1, 3), b = ref::random_input(sb, seed * 5, dt, -2, 2);
            check_binary_on(
                "pow", [](const Var& x, const Var& y) { return kiln::pow(x, y); },
                [](const RTensor& x, const RTensor& y, DType) { return ref::pow(x, y); }, a, b, dt,
                ref::tol_for(dt, 4));
        }
}

TEST_CASE("ops.elementwise: comparisons give boolean on every dtype, ties included") {
    struct Cmp {
        const char* name;
        KBin kf;
        std::function<RTensor(const RTensor&, const RTensor&)> rf;
    };
    const std::vector<Cmp> cmps{
        {"lt", [](const Var& a, const Var& b) { return a < b; }, ref::lt},
        {"le", [](const Var& a, const Var& b) { return a <= b; }, ref::le},
        {"gt", [](const Var& a, const Var& b) { return a > b; }, ref::gt},
        {"ge", [](const Var& a, const Var& b) { return a >= b; }, ref::ge},
        {"eq", [](const Var& a, const Var& b) { return a == b; }, ref::eq},
        {"ne", [](const Var& a, const Var& b) { return a != b; }, ref::ne},
    };
    std::uint64_t seed = 4000;
    for (const auto& c : cmps)
        for (DType dt : ref::all_dtypes())
            for (const auto& [sa, sb] : shape_pairs()) {
                ++seed;
                CAPTURE(seed);
                // Small integer values so that ties are frequent; booleans are 0/1.
                double lo = dt == DType::boolean ? 0 : -2, hi = dt == DType::boolean ? 2 : 3;
                if (dt == DType::u8) lo = 0;
                RTensor ra = ref::from_kiln(kiln::Tensor::rand(sa, seed, DType::i32, lo, hi));
                RTensor rb = ref::from_kiln(kiln::Tensor::rand(sb, seed * 11, DType::i32, lo, hi));
                Tensor a = ref::to_kiln(ra, dt), b = ref::to_kiln(rb, dt);
                check_binary_on(
                    c.name, c.kf, [&](const RTensor& x, const RTensor& y, DType) { return c.rf(x, y); }, a, b,
                    DType::boolean, ref::tol_for(DType::boolean));
            }
}

TEST_CASE("ops.elementwise: scalar operands adopt the tensor's dtype") {
    std::uint64_t seed = 5000;
    for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::i8}) {
        ++seed;
        CAPTURE(seed);
        INFO("dt = ", ref::dname(dt));
        Tensor x = ref::random_input({3, 5}, seed, dt, -10, 10);
        kiln::Graph g = kiln::trace("scalars", {ref::arg_like("x", x)}, [](const std::vector<Var>& in) {
            Var y = in[0] * 3 + 1;
            Var z = 2.0 - in[0];
            Var m = kiln::maximum(in[0], 0.0);
            return std::vector<Var>{y, z, m, in[0] > 1.0};
        });
        auto out = ref::run_graph(g, {x});
        REQUIRE(out.size() == 4);
        RTensor rx = ref::from_kiln(x);
        RTensor three = ref::full({}, 3), one = ref::full({}, 1), two = ref::full({}, 2), zero = ref::full({}, 0);
        ref::check_close(out[0], ref::add(ref::mul(rx, three, dt), one, dt), dt, ref::tol_for(dt, 2), "x*3+1");
        ref::check_close(out[1], ref::sub(two, rx, dt), dt, ref::tol_for(dt), "2-x");
        ref::check_close(out[2], ref::maximum(rx, zero), dt, ref::tol_for(dt), "maximum(x,0)");
        ref::check_close(out[3], ref::gt(rx, one), DType::boolean, {}, "x>1");
    }
}

TEST_CASE("ops.elementwise: where on every dtype with broadcasting") {
    std::uint64_t seed = 6000;
    const std::vector<std::array<Shape, 3>> shapes{
        {Shape{3, 4}, Shape{3, 4}, Shape{3, 4}}, {Shape{3, 1}, Shape{1, 4}, Shape{4}},
        {Shape{2, 1, 5}, Shape{5}, Shape{3, 1}}, {Shape{0, 4}, Shape{4}, Shape{1}},
        {Shape{7}, Shape{1}, Shape{7}}};
    for (DType dt : ref::all_dtypes())
        for (const auto& s : shapes) {
            ++seed;
            CAPTURE(seed);
            INFO("dt = ", ref::dname(dt));
            Tensor c = ref::random_input(s[0], seed, DType::boolean);
            Tensor a = ref::random_input(s[1], seed + 1, dt, -5, 5), b = ref::random_input(s[2], seed + 2, dt, -5, 5);
            kiln::Graph g = kiln::trace("where", {ref::arg_like("c", c), ref::arg_like("a", a), ref::arg_like("b", b)},
                                        [](const std::vector<Var>& in) -> Var { return kiln::where(in[0], in[1], in[2]); });
            auto out = ref::run_graph(g, {c, a, b});
            REQUIRE(out.size() == 1);
            ref::check_close(out[0], ref::where(ref::from_kiln(c), ref::from_kiln(a), ref::from_kiln(b)), dt,
                             ref::tol_for(dt), "where");
        }
    // A scalar branch: relu written with where.
    Tensor x = Tensor::randn({4, 6}, 61);
    kiln::Graph g = kiln::trace("where_scalar", {ref::arg_like("x", x)},
                                [](const std::vector<Var>& in) -> Var { return kiln::where(in[0] > 0.0, in[0], 0.0); });
    ref::check_close(ref::run_graph(g, {x})[0], ref::relu(ref::from_kiln(x)), DType::f32, ref::tol_for(DType::f32));
}

TEST_CASE("ops.elementwise: clamp on floating and integer dtypes") {
    std::uint64_t seed = 7000;
    for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i32, DType::i64}) {
        ++seed;
        CAPTURE(seed);
        INFO("dt = ", ref::dname(dt));
        double lo = kiln::is_floating(dt) ? -0.75 : -3, hi = kiln::is_floating(dt) ? 1.25 : 4;
        if (dt == DType::u8) lo = 2, hi = 9;
        Tensor x = ref::random_input({5, 7}, seed, dt, -12, 12);
        kiln::Graph g = kiln::trace("clamp", {ref::arg_like("x", x)},
                                    [&](const std::vector<Var>& in) -> Var { return kiln::clamp(in[0], lo, hi); });
        ref::check_close(ref::run_graph(g, {x})[0], ref::clamp(ref::from_kiln(x), lo, hi), dt, ref::tol_for(dt));
    }
}

TEST_CASE("ops.elementwise: cast between every pair of dtypes (truncation, saturation, wrap, NaN)") {
    const double nan = std::nan(""), inf = INFINITY;
    RTensor float_src = ref::make({24}, {0, 0.5, -0.5, 1.7, -1.7, 2.5, -2.99, 100.25, -100.75, 127.9, 128.5, -129.5,
                                         255.5, 256.0, 300.7, -300.2, 40000, -40000, 3e9, -3e9, nan, inf, -inf, 1e-3});
    RTensor int_src = ref::make({17}, {0, 1, -1, 5, -7, 100, 127, -128, 200, 255, 256, 1000, -1000, 70000, -70000,
                                       3e9, -3e9});
    RTensor bool_src = ref::make({5}, {0, 1, 1, 0, 1});
    for (DType from : ref::all_dtypes())
        for (DType to : ref::all_dtypes()) {
            INFO("from = ", ref::dname(from));
            INFO("to = ", ref::dname(to));
            RTensor src = kiln::is_floating(from) ? float_src : (from == DType::boolean ? bool_src : int_src);
            Tensor x = ref::to_kiln(ref::wrap_all(src, from), from);
            kiln::Graph g = kiln::trace("cast", {ref::arg_like("x", x)},
                                        [&](const std::vector<Var>& in) -> Var { return kiln::cast(in[0], to); });
            auto out = ref::run_graph(g, {x});
            REQUIRE(out.size() == 1);
            ref::check_close(out[0], ref::cast(ref::from_kiln(x), from, to), to, ref::tol_for(to), "cast");
        }
    // A random non-contiguous input.
    Tensor base = Tensor::randn({6, 5}, 77, DType::f64);
    Tensor view = base.permute({1, 0});
    kiln::Graph g = kiln::trace("cast_view", {ref::arg_like("x", view)},
                                [](const std::vector<Var>& in) -> Var { return kiln::cast(in[0] * 40.0, DType::i8); });
    ref::check_close(ref::run_graph(g, {view})[0],
                     ref::cast(ref::mul(ref::from_kiln(view), ref::full({}, 40), DType::f64), DType::f64, DType::i8),
                     DType::i8, {});
}

TEST_CASE("ops.elementwise: unary float ops on f32, f64, f16, bf16") {
    struct Un {
        const char* name;
        KUn kf;
        std::function<RTensor(const RTensor&)> rf;
        double lo, hi, tol_scale;
    };
    const std::vector<Un> ops{
        {"exp", [](const Var& x) { return kiln::exp(x); }, ref::exp, -4, 4, 4},
        {"log", [](const Var& x) { return kiln::log(x); }, ref::log, 0.05, 6, 4},
        {"sqrt", [](const Var& x) { return kiln::sqrt(x); }, ref::sqrt, 0, 6, 1},
        {"rsqrt", [](const Var& x) { return kiln::rsqrt(x); }, ref::rsqrt, 0.05, 6, 2},
        {"reciprocal", [](const Var& x) { return kiln::reciprocal(x); }, ref::reciprocal, 0.2, 6, 1},
        {"sin", [](const Var& x) { return kiln::sin(x); }, ref::sin, -6, 6, 4},
        {"cos", [](const Var& x) { return kiln::cos(x); }, ref::cos, -6, 6, 4},
        {"tanh", [](const Var& x) { return kiln::tanh(x); }, ref::tanh, -4, 4, 4},
        {"sigmoid", [](const Var& x) { return kiln::sigmoid(x); }, ref::sigmoid, -8, 8, 4},
        {"relu", [](const Var& x) { return kiln::relu(x); }, ref::relu, -3, 3, 1},
        {"gelu", [](const Var& x) { return kiln::gelu(x); }, [](const RTensor& r) { return ref::gelu(r, false); }, -4, 4, 4},
        {"gelu_tanh", [](const Var& x) { return kiln::gelu(x, true); }, [](const RTensor& r) { return ref::gelu(r, true); },
         -4, 4, 4},
        {"silu", [](const Var& x) { return kiln::silu(x); }, ref::silu, -6, 6, 4},
        {"erf", [](const Var& x) { return kiln::erf(x); }, ref::erf, -3, 3, 4},
        {"floor", [](const Var& x) { return kiln::floor(x); }, ref::floor, -5, 5, 1},
        {"ceil", [](const Var& x) { return kiln::ceil(x); }, ref::ceil, -5, 5, 1},
        {"round", [](const Var& x) { return kiln::round(x); }, ref::round, -5, 5, 1},
        {"sign", [](const Var& x) { return kiln::sign(x); }, ref::sign, -3, 3, 1},
        {"abs", [](const Var& x) { return kiln::abs(x); }, [](const RTensor& r) { return ref::abs(r, DType::f64); }, -3, 3, 1},
        {"neg", [](const Var& x) { return kiln::neg(x); }, [](const RTensor& r) { return ref::neg(r, DType::f64); }, -3, 3, 1},
        {"unary_minus", [](const Var& x) { return -x; }, [](const RTensor& r) { return ref::neg(r, DType::f64); }, -3, 3, 1},
    };
    std::mt19937_64 rng(8000);
    std::uint64_t seed = 8000;
    for (const auto& op : ops)
        for (DType dt : ref::float_dtypes())
            for (int rep = 0; rep < 2; ++rep) {
                ++seed;
                CAPTURE(seed);
                CAPTURE(op.name);
                INFO("dt = ", ref::dname(dt));
                Shape s = ref::random_shape(rng, 1 + static_cast<int>(rng() % 3), {1, 3, 7, 17, 33});
                Tensor x = ref::random_input(s, seed, dt, op.lo, op.hi);
                kiln::Graph g = kiln::trace(op.name, {ref::arg_like("x", x)},
                                            [&](const std::vector<Var>& in) -> Var { return op.kf(in[0]); });
                ref::check_close(ref::run_graph(g, {x})[0], op.rf(ref::from_kiln(x)), dt, ref::tol_for(dt, op.tol_scale),
                                 op.name);
            }
    // Exact halves for round (half to even), zero and signed zero for sign.
    for (DType dt : ref::float_dtypes()) {
        Tensor x = ref::to_kiln(ref::make({10}, {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -0.0, 0.0, 4.5}), dt);
        kiln::Graph g = kiln::trace("round_sign", {ref::arg_like("x", x)}, [](const std::vector<Var>& in) {
            return std::vector<Var>{kiln::round(in[0]), kiln::sign(in[0])};
        });
        auto out = ref::run_graph(g, {x});
        ref::check_close(out[0], ref::round(ref::from_kiln(x)), dt, {}, "round halves");
        ref::check_close(out[1], ref::sign(ref::from_kiln(x)), dt, {}, "sign");
    }
}

TEST_CASE("ops.elementwise: integer unary ops abs, neg, relu, sign wrap to the width") {
    std::uint64_t seed = 9000;
    const std::vector<std::pair<const char*, std::pair<KUn, RUn>>> ops{
        {"abs", {[](const Var& x) { return kiln::abs(x); }, ref::abs}},
        {"neg", {[](const Var& x) { return kiln::neg(x); }, ref::neg}},
        {"relu", {[](const Var& x) { return kiln::relu(x); }, [](const RTensor& r, DType) { return ref::relu(r); }}},
        {"sign", {[](const Var& x) { return kiln::sign(x); }, [](const RTensor& r, DType) { return ref::sign(r); }}},
    };
    for (const auto& [name, fns] : ops)
        for (DType dt : ref::int_dtypes()) {
            ++seed;
            CAPTURE(seed);
            CAPTURE(name);
            INFO("dt = ", ref::dname(dt));
            Tensor x = ref::random_input({4, 9}, seed, dt, -100, 100);
            kiln::Graph g = kiln::trace(name, {ref::arg_like("x", x)},
                                        [&](const std::vector<Var>& in) -> Var { return fns.first(in[0]); });
            ref::check_close(ref::run_graph(g, {x})[0], fns.second(ref::from_kiln(x), dt), dt, {}, name);
            // The extremes: abs(-128) and neg(-128) wrap to -128 in i8; neg of u8 wraps.
            RTensor edge = ref::wrap_all(ref::make({5}, {-128, 127, 0, 255, -1}), dt);
            Tensor e = ref::to_kiln(edge, dt);
            kiln::Graph g2 = kiln::trace(name, {ref::arg_like("x", e)},
                                         [&](const std::vector<Var>& in) -> Var { return fns.first(in[0]); });
            ref::check_close(ref::run_graph(g2, {e})[0], fns.second(ref::from_kiln(e), dt), dt, {}, name);
        }
}

TEST_CASE("ops.elementwise: logical_not on boolean") {
    Tensor b = ref::random_input({3, 7}, 91, DType::boolean);
    kiln::Graph g = kiln::trace("not", {ref::arg_like("b", b)},
                                [](const std::vector<Var>& in) -> Var { return kiln::logical_not(in[0]); });
    ref::check_close(ref::run_graph(g, {b})[0], ref::logical_not(ref::from_kiln(b)), DType::boolean, {});
    // A comparison chain: !(x < 0) == (x >= 0) for all x.
    Tensor x = Tensor::randn({5, 5}, 92);
    kiln::Graph g2 = kiln::trace("not_lt", {ref::arg_like("x", x)},
                                 [](const std::vector<Var>& in) -> Var { return kiln::logical_not(in[0] < 0.0); });
    ref::check_close(ref::run_graph(g2, {x})[0], ref::ge(ref::from_kiln(x), ref::full({}, 0)), DType::boolean, {});
}

TEST_CASE("ops.elementwise: non-contiguous inputs (permute, slice, broadcast_to views)") {
    Tensor base_a = Tensor::randn({4, 5}, 101), base_b = Tensor::randn({5, 8}, 102), base_c = Tensor::randn({4}, 103);
    Tensor a = base_a.permute({1, 0});               // [5,4], transposed strides
    Tensor b = base_b.slice(1, 1, 8, 2);             // [5,4], step 2 with an offset
    Tensor c = base_c.broadcast_to({5, 4});          // [5,4], stride 0
    REQUIRE_FALSE(a.is_contiguous());
    REQUIRE_FALSE(b.is_contiguous());
    kiln::Graph g = kiln::trace("views", {ref::arg_like("a", a), ref::arg_like("b", b), ref::arg_like("c", c)},
                                [](const std::vector<Var>& in) {
                                    return std::vector<Var>{in[0] + in[1], in[1] * in[2], kiln::exp(in[0]) - in[2]};
                                });
    auto out = ref::run_graph(g, {a, b, c});
    REQUIRE(out.size() == 3);
    RTensor ra = ref::from_kiln(a), rb = ref::from_kiln(b), rc = ref::from_kiln(c);
    const DType f = DType::f32;
    ref::check_close(out[0], ref::add(ra, rb, f), f, ref::tol_for(f), "a+b");
    ref::check_close(out[1], ref::mul(rb, rc, f), f, ref::tol_for(f), "b*c");
    ref::check_close(out[2], ref::sub(ref::exp(ra), rc, f), f, ref::tol_for(f, 4), "exp(a)-c");
    // An integer view too.
    Tensor ib = Tensor::rand({6, 6}, 104, DType::i32, -50, 50).slice(0, 1, 4, 2).slice(1, 0, 6, 3);  // [2,2]
    Tensor ia = Tensor::rand({2, 4}, 105, DType::i32, -50, 50).slice(1, 1, 3);                      // [2,2]
    kiln::Graph g2 = kiln::trace("int_views", {ref::arg_like("a", ia), ref::arg_like("b", ib)},
                                 [](const std::vector<Var>& in) -> Var { return in[0] - in[1]; });
    ref::check_close(ref::run_graph(g2, {ia, ib})[0], ref::sub(ref::from_kiln(ia), ref::from_kiln(ib), DType::i32),
                     DType::i32, {});
}

TEST_CASE("ops.elementwise: symbolic batch dim, one Function called with several sizes including 0") {
    Tensor bias = Tensor::randn({3}, 111);
    kiln::Graph g = kiln::trace("dyn", {kiln::arg("x", DType::f32, {kiln::dyn("B"), 3}),
                                         kiln::arg("y", DType::f32, {kiln::dyn("B"), 1})},
                                [&](const std::vector<Var>& in) {
                                    Var h = kiln::tanh(in[0] * in[1] + bias);
                                    return std::vector<Var>{h, h > 0.0};
                                });
    kiln::Function f = ref::interp_engine().load(g);
    for (std::int64_t b : {4, 0, 1, 17, 0, 33, 2}) {
        CAPTURE(b);
        Tensor x = Tensor::randn({b, 3}, 200 + static_cast<std::uint64_t>(b));
        Tensor y = Tensor::randn({b, 1}, 300 + static_cast<std::uint64_t>(b));
        auto out = f({x, y});
        REQUIRE(out.size() == 2);
        RTensor h = ref::tanh(ref::add(ref::mul(ref::from_kiln(x), ref::from_kiln(y), DType::f32), ref::from_kiln(bias),
                                       DType::f32));
        ref::check_close(out[0], h, DType::f32, ref::tol_for(DType::f32, 4), "tanh(x*y+bias)");
        // The comparison is checked against Kiln's own h (a tiny h could flip sign between f32 and f64).
        ref::check_close(out[1], ref::gt(ref::from_kiln(out[0]), ref::full({}, 0)), DType::boolean, {}, "h>0");
    }
    CHECK(f.stats().calls == 7);
}

// ---- the scalar formulas themselves (src/core/scalar_ops.h) ----
// Every tier computes with (or, for its inline code, is tested against) these; here they
// meet the naive double-precision reference (tests/reference.h) directly, in float and in
// double, on the values where formulas break: signed zeros, subnormals, huge values, the
// largest finite values, infinities and NaN.

namespace {

namespace scalar = kiln::core::scalar;
using RUn1 = std::function<RTensor(const RTensor&)>;
using RBin1 = std::function<RTensor(const RTensor&, const RTensor&)>;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double ref1(const RUn1& f, double x) { return f(ref::make({1}, {x})).v[0]; }
double ref2(const RBin1& f, double x, double y) { return f(ref::make({1}, {x}), ref::make({1}, {y})).v[0]; }

const std::vector<double>& edge_values() {
    static const std::vector<double> v{
        0.0, -0.0, 1e-45, -1e-45, 1e-40, -1e-40, 5e-324, -5e-324, 1e-300, 1e-7, -1e-7, 0.5, -0.5, 1.5, -2.5, 3.0,
        -3.0, 20.0, -20.0, 88.5, -88.5, 100.0, -100.0, 710.0, -710.0, 1e30, -1e30, 1e300, -1e300,
        std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), std::numeric_limits<double>::max(),
        -std::numeric_limits<double>::max(), kInf, -kInf, kNaN};
    return v;
}

// y (computed in C from x) against r (the reference in double on the same x): NaN where r is
// NaN; otherwise r rounded to C, exactly when that is infinite, else within a relative
// tolerance (plus a tiny absolute one for results at the bottom of C's range); and for a zero
// input, the sign of a zero result (the reference models signed zeros only there).
template <class C> void check_scalar(const std::string& what, double x, C y, double r) {
    constexpr bool f32 = std::is_same_v<C, float>;
    const double yd = static_cast<double>(y), rc = static_cast<double>(static_cast<C>(r));
    INFO(what, "(", (f32 ? "f32 " : "f64 "), x, ") = ", yd, ", reference ", r);
    if (std::isnan(r)) {
        CHECK(std::isnan(yd));
        return;
    }
    REQUIRE_FALSE(std::isnan(yd));
    if (std::isinf(rc)) {
        CHECK(yd == rc);
        return;
    }
    const double tol = (f32 ? 1e-5 : 1e-12) * std::fabs(rc) + (f32 ? 1e-6 : 1e-300);
    CHECK(std::fabs(yd - rc) <= tol);
    if (x == 0 && rc == 0) CHECK(std::signbit(yd) == std::signbit(rc));
}

template <class C> void check_unary_formulas() {
    struct Op {
        const char* name;
        C (*f)(C);
        RUn1 r;
    };
    const std::vector<Op> ops{
        {"neg", scalar::neg<C>, [](const RTensor& x) { return ref::neg(x, DType::f64); }},
        {"abs", scalar::abs<C>, [](const RTensor& x) { return ref::abs(x, DType::f64); }},
        {"exp", scalar::exp<C>, ref::exp},
        {"log", scalar::log<C>, ref::log},
        {"sqrt", scalar::sqrt<C>, ref::sqrt},
        {"rsqrt", scalar::rsqrt<C>, ref::rsqrt},
        {"reciprocal", scalar::reciprocal<C>, ref::reciprocal},
        {"sin", scalar::sin<C>, ref::sin},
        {"cos", scalar::cos<C>, ref::cos},
        {"tanh", scalar::tanh<C>, ref::tanh},
        {"sigmoid", scalar::sigmoid<C>, ref::sigmoid},
        {"relu", scalar::relu<C>, ref::relu},
        {"gelu_erf", scalar::gelu_erf<C>, [](const RTensor& x) { return ref::gelu(x, false); }},
        {"gelu_tanh", scalar::gelu_tanh<C>, [](const RTensor& x) { return ref::gelu(x, true); }},
        {"silu", scalar::silu<C>, ref::silu},
        {"erf", scalar::erf<C>, ref::erf},
        {"floor", scalar::floor<C>, ref::floor},
        {"ceil", scalar::ceil<C>, ref::ceil},
        {"round", scalar::round<C>, ref::round},
        {"sign", scalar::sign<C>, ref::sign},
    };
    for (const Op& op : ops)
        for (double v : edge_values()) {
            const C x = static_cast<C>(v);
            const double xd = static_cast<double>(x);
            if (std::isnan(xd)) {
                // Every unary op keeps NaN (the reference's relu and sign do not model it).
                INFO(op.name, "(NaN)");
                CHECK(std::isnan(static_cast<double>(op.f(x))));
                continue;
            }
            check_scalar<C>(op.name, xd, op.f(x), ref1(op.r, xd));
        }
    // Round half to even, and relu/sign of the zeros, exactly.
    const std::vector<std::pair<double, double>> halves{{-2.5, -2}, {-1.5, -2}, {-0.5, -0.0}, {0.5, 0}, {1.5, 2}, {2.5, 2}};
    for (const auto& [x, want] : halves) {
        CHECK(scalar::round(static_cast<C>(x)) == static_cast<C>(want));
        CHECK(std::signbit(scalar::round(static_cast<C>(x))) == std::signbit(want));
    }
    CHECK_FALSE(std::signbit(scalar::relu(C(-0.0))));
    CHECK_FALSE(std::signbit(scalar::sign(C(-0.0))));
    CHECK(scalar::sign(C(-1e-40)) == C(-1));
}

template <class C> void check_binary_formulas() {
    struct Op {
        const char* name;
        C (*f)(C, C);
        RBin1 r;
    };
    const std::vector<Op> ops{
        {"add", scalar::add<C>, [](const RTensor& a, const RTensor& b) { return ref::add(a, b, DType::f64); }},
        {"sub", scalar::sub<C>, [](const RTensor& a, const RTensor& b) { return ref::sub(a, b, DType::f64); }},
        {"mul", scalar::mul<C>, [](const RTensor& a, const RTensor& b) { return ref::mul(a, b, DType::f64); }},
        {"div", scalar::div<C>, [](const RTensor& a, const RTensor& b) { return ref::div(a, b, DType::f64); }},
        {"pow", scalar::pow<C>, ref::pow},
        {"maximum", scalar::maximum<C>, ref::maximum},
        {"minimum", scalar::minimum<C>, ref::minimum},
    };
    const std::vector<double> vals{0.0, -0.0, 1e-40, -1.5, 2.0, 0.5, 1e30, -1e30, std::numeric_limits<double>::max(), kInf, -kInf, kNaN};
    for (const Op& op : ops)
        for (double va : vals)
            for (double vb : vals) {
                const C a = static_cast<C>(va), b = static_cast<C>(vb);
                const double ad = static_cast<double>(a), bd = static_cast<double>(b);
                std::ostringstream name;
                name << op.name << " [second operand " << bd << "]";
                const bool minmax = std::string(op.name) == "maximum" || std::string(op.name) == "minimum";
                if (minmax && (std::isnan(ad) || std::isnan(bd))) {
                    // NaN propagates (the reference's max/min do not model it).
                    INFO(name.str(), " ", ad);
                    CHECK(std::isnan(static_cast<double>(op.f(a, b))));
                    continue;
                }
                check_scalar<C>(name.str(), ad, op.f(a, b), ref2(op.r, ad, bd));
            }
    // Equal operands: the first is returned, so the sign of a zero follows the first operand.
    CHECK(std::signbit(scalar::maximum(C(-0.0), C(0.0))));
    CHECK_FALSE(std::signbit(scalar::maximum(C(0.0), C(-0.0))));
    CHECK(std::signbit(scalar::minimum(C(-0.0), C(0.0))));
    CHECK_FALSE(std::signbit(scalar::minimum(C(0.0), C(-0.0))));
    // IEEE comparisons: NaN is unordered (only ne holds), -0 == +0.
    const C n = static_cast<C>(kNaN);
    CHECK_FALSE((scalar::eq(n, n) || scalar::lt(n, C(1)) || scalar::le(n, n) || scalar::gt(C(1), n) || scalar::ge(n, n)));
    CHECK(scalar::ne(n, n));
    CHECK(scalar::eq(C(-0.0), C(0.0)));
    // clamp keeps NaN.
    CHECK(std::isnan(static_cast<double>(scalar::clamp(n, C(-1), C(1)))));
}

// Integers: against the reference (which wraps results computed in double to the width) on
// i8, u8 and i32 edge values, where doubles hold every operand and result exactly.
template <class T> void check_int_formulas(DType dt) {
    using L = std::numeric_limits<T>;
    const double lo = static_cast<double>(L::min()), hi = static_cast<double>(L::max());
    const std::vector<double> vals{lo, lo + 1, -1, 0, 1, 2, 7, hi - 1, hi};
    const std::vector<std::pair<const char*, std::pair<T (*)(T), RUn1>>> un{
        {"neg", {scalar::neg<T>, [dt](const RTensor& x) { return ref::neg(x, dt); }}},
        {"abs", {scalar::abs<T>, [dt](const RTensor& x) { return ref::abs(x, dt); }}},
        {"relu", {scalar::relu<T>, ref::relu}},
        {"sign", {scalar::sign<T>, ref::sign}},
    };
    const std::vector<std::pair<const char*, std::pair<T (*)(T, T), RBin1>>> bin{
        {"add", {scalar::add<T>, [dt](const RTensor& a, const RTensor& b) { return ref::add(a, b, dt); }}},
        {"sub", {scalar::sub<T>, [dt](const RTensor& a, const RTensor& b) { return ref::sub(a, b, dt); }}},
        {"mul", {scalar::mul<T>, [dt](const RTensor& a, const RTensor& b) { return ref::mul(a, b, dt); }}},
        {"div", {scalar::div<T>, [dt](const RTensor& a, const RTensor& b) { return ref::div(a, b, dt); }}},
        {"maximum", {scalar::maximum<T>, ref::maximum}},
        {"minimum", {scalar::minimum<T>, ref::minimum}},
    };
    for (double v : vals) {
        if (v < lo || v > hi) continue;
        for (const auto& [name, fns] : un) {
            INFO(name, "(", v, ") on ", ref::dname(dt));
            CHECK(static_cast<double>(fns.first(static_cast<T>(v))) == ref::wrap_to(dt, ref1(fns.second, v)));
        }
        for (double w : vals) {
            if (w < lo || w > hi) continue;
            for (const auto& [name, fns] : bin) {
                if (std::string(name) == "mul" && std::fabs(v * w) > 9e15) continue;  // not exact in double
                INFO(name, "(", v, ", ", w, ") on ", ref::dname(dt));
                CHECK(static_cast<double>(fns.first(static_cast<T>(v), static_cast<T>(w))) ==
                      ref::wrap_to(dt, ref2(fns.second, v, w)));
            }
        }
    }
}

}  // namespace

TEST_CASE("ops.elementwise: the scalar formulas against the double reference on edge values") {
    SUBCASE("f32 unary") { check_unary_formulas<float>(); }
    SUBCASE("f64 unary") { check_unary_formulas<double>(); }
    SUBCASE("f32 binary") { check_binary_formulas<float>(); }
    SUBCASE("f64 binary") { check_binary_formulas<double>(); }
    SUBCASE("integers") {
        check_int_formulas<std::int8_t>(DType::i8);
        check_int_formulas<std::uint8_t>(DType::u8);
        check_int_formulas<std::int32_t>(DType::i32);
        // i64, where doubles are not exact: the wrap-around cases by hand.
        using I = std::int64_t;
        constexpr I mn = std::numeric_limits<I>::min(), mx = std::numeric_limits<I>::max();
        CHECK(scalar::neg(mn) == mn);
        CHECK(scalar::abs(mn) == mn);
        CHECK(scalar::add(mx, I(1)) == mn);
        CHECK(scalar::sub(mn, I(1)) == mx);
        CHECK(scalar::mul(mx, I(2)) == I(-2));
        CHECK(scalar::div(mn, I(-1)) == mn);
        CHECK(scalar::div(I(7), I(0)) == 0);
        CHECK(scalar::div(I(-7), I(2)) == -3);  // truncation toward zero
        CHECK(scalar::sign(mn) == -1);
        CHECK(scalar::relu(mn) == 0);
    }
    SUBCASE("clamp bounds saturate to the dtype first") {
        for (double v : {300.0, -300.0, 2.7, -2.7, 1e20, -1e20, kNaN}) {
            INFO("bound ", v);
            CHECK(static_cast<double>(scalar::clamp_bound<std::int8_t>(v)) == ref::cast_value(v, DType::f64, DType::i8));
            CHECK(static_cast<double>(scalar::clamp_bound<std::uint8_t>(v)) == ref::cast_value(v, DType::f64, DType::u8));
            CHECK(static_cast<double>(scalar::clamp_bound<std::int32_t>(v)) == ref::cast_value(v, DType::f64, DType::i32));
        }
        CHECK(std::isinf(scalar::clamp_bound<kiln::Half>(1e6)));  // beyond f16's range
        CHECK(scalar::clamp_bound<float>(0.1) == 0.1f);
        CHECK(scalar::clamp(std::int8_t(-100), scalar::clamp_bound<std::int8_t>(-300.0), scalar::clamp_bound<std::int8_t>(5.0)) ==
              std::int8_t(-100));
    }
}
