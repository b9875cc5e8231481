#pragma once
// Helpers shared by the tests of the compiling tiers (test_llvm_tier.cpp,
// test_asmjit_tier.cpp): compiling a hand-built KIR kernel on a tier, a 1-D map kernel and
// its reference on the KIR evaluator, the float values every unary op is checked on, and
// the distance in ulps.
#include <doctest/doctest.h>

#include "src/kir/eval.h"
#include "src/kir/kir.h"
#include "tiers/tier.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

namespace kiln::tier_test {

using I64 = std::int64_t;

// Compiles `k` on `tier`, requiring success (the bailout and the backend's message are shown otherwise).
inline std::shared_ptr<const tiers::CompiledKernel> compile_ok(tiers::Tier& tier, const kir::Kernel& k,
                                                               const kir::Specialization& s = {}) {
    auto r = tier.compile(k, s);
    INFO("bailout: " << tiers::bailout_name(r.bailout) << " " << r.detail);
    REQUIRE(r.bailout == tiers::Bailout::none);
    REQUIRE(r.kernel != nullptr);
    return r.kernel;
}

inline void call(const tiers::CompiledKernel& k, std::vector<void*> bufs, const std::vector<I64>& params, I64 begin,
                 I64 end) {
    tiers::host_entry(k)(bufs.data(), params.data(), begin, end);
}

// out[o] = f(in[o]) over a 1-D extent (param 0).
inline kir::Kernel map_kernel(DType in, DType out, const std::function<kir::ExprRef(kir::ExprRef)>& f) {
    kir::Kernel k;
    k.name = "map";
    k.buffers = {{"x", in, false}, {"y", out, true}};
    k.params = {"n"};
    k.param_sources = {{0, 0}};
    k.extent = kir::param(0);
    k.body = {kir::store(1, kir::outer(), f(kir::load(0, kir::compute_type(in), kir::outer())))};
    return k;
}

// The same kernel on the KIR evaluator (src/kir/eval.cpp), which computes with the
// interpreter's formulas in the element type: the reference for the code generators.
template <class O, class T> std::vector<O> eval_map(const kir::Kernel& k, const std::vector<T>& in) {
    std::vector<O> out(in.size());
    void* bufs[] = {const_cast<T*>(in.data()), out.data()};
    const I64 n = static_cast<I64>(in.size());
    kir::evaluate(k, bufs, &n, 0, n);
    return out;
}

// Distance in units in the last place (0 when both are NaN or equal; signed zeros differ).
template <class F> double ulp_diff(F a, F b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : 1e30;
    if (a == b) return std::signbit(a) == std::signbit(b) ? 0 : 1e30;
    using U = std::conditional_t<sizeof(F) == 4, std::int32_t, std::int64_t>;
    auto ord = [](F v) {
        U i = std::bit_cast<U>(v);
        return i < 0 ? static_cast<double>(std::numeric_limits<U>::min()) - static_cast<double>(i) : static_cast<double>(i);
    };
    return std::fabs(ord(a) - ord(b));
}

// Row softmax of x [rows, cols] (cols = param 0) with temps m (max) and s (sum) over three
// loops: y = exp(x - m) / s.
inline kir::Kernel softmax_kernel(DType dt) {
    using namespace kir;
    Kernel k;
    k.name = "softmax_row";
    k.buffers = {{"x", dt, false}, {"y", dt, true}};
    k.params = {"cols"};
    k.param_sources = {{0, 1}};
    k.temps = {Type::f32, Type::f32};
    k.num_vars = 1;
    auto idx = binary(BinaryOp::add, binary(BinaryOp::mul, outer(), param(0)), var(0));
    auto x = load(0, Type::f32, idx);
    auto m = temp(0, Type::f32), s = temp(1, Type::f32);
    auto e = unary(UnaryOp::exp, binary(BinaryOp::sub, x, m));
    k.body = {assign(0, constant(Type::f32, -std::numeric_limits<double>::infinity())),
              loop(0, index_const(0), param(0), {assign(0, binary(BinaryOp::max, m, x))}),
              assign(1, constant(Type::f32, 0.0)),
              loop(0, index_const(0), param(0), {assign(1, binary(BinaryOp::add, s, e))}),
              loop(0, index_const(0), param(0), {store(1, idx, binary(BinaryOp::div, e, s))})};
    return k;
}

// Compiles and checks z = (a && !b) || (x > 2 ? a : b) over bytes (bool a, b; i32 x).
inline void check_bool_logic(tiers::Tier& tier) {
    using namespace kir;
    Kernel k;
    k.name = "logic";
    k.buffers = {{"a", DType::boolean, false}, {"b", DType::boolean, false}, {"x", DType::i32, false},
                 {"z", DType::boolean, true}};
    k.params = {"n"};
    k.param_sources = {{0, 0}};
    k.extent = param(0);
    auto a = load(0, Type::boolean, outer()), b = load(1, Type::boolean, outer());
    auto big = binary(BinaryOp::gt, load(2, Type::i32, outer()), constant(Type::i32, 2));
    k.body = {store(3, outer(),
                    binary(BinaryOp::logical_or, binary(BinaryOp::logical_and, a, unary(UnaryOp::logical_not, b)),
                           select(big, a, b)))};
    std::vector<std::uint8_t> av = {0, 1, 0, 1, 1, 0, 2}, bv = {0, 0, 1, 1, 0, 1, 0}, z(7, 9);
    std::vector<std::int32_t> xv = {0, 5, 5, 0, 3, 1, 9};
    auto ck = compile_ok(tier, k);
    call(*ck, {av.data(), bv.data(), xv.data(), z.data()}, {7}, 0, 7);
    for (std::size_t i = 0; i < 7; ++i) {
        bool A = av[i] != 0, B = bv[i] != 0;
        CHECK(z[i] == ((A && !B) || (xv[i] > 2 ? A : B) ? 1 : 0));
    }
}

// 4 threads each compile `reps` different map kernels (tanh(x) + c) on `tier` at once and run
// them; every one must compile and compute c on zeros.
inline void check_concurrent_compiles(tiers::Tier& tier, int reps) {
    using namespace kir;
    std::vector<std::thread> ts;
    std::vector<int> ok(4, 0);
    for (int t = 0; t < 4; ++t)
        ts.emplace_back([t, reps, &ok, &tier] {
            for (int rep = 0; rep < reps; ++rep) {
                const float c = static_cast<float>(t * 100 + rep);
                Kernel k = map_kernel(DType::f32, DType::f32, [c](ExprRef x) {
                    return binary(BinaryOp::add, unary(UnaryOp::tanh, x), constant(Type::f32, c));
                });
                auto r = tier.compile(k, {});
                if (r.bailout != tiers::Bailout::none) return;
                std::vector<float> in(100, 0.0f), out(100);
                void* bufs[] = {in.data(), out.data()};
                I64 n = 100;
                tiers::host_entry(*r.kernel)(bufs, &n, 0, n);
                if (std::all_of(out.begin(), out.end(), [c](float v) { return v == c; })) ++ok[static_cast<std::size_t>(t)];
            }
        });
    for (auto& th : ts) th.join();
    CHECK(ok == std::vector<int>(4, reps));
}

// Special values (zeros, infinities, NaN, subnormals, the edges of the approximations'
// ranges) followed by `random` seeded values in [-30, 30] and [-2, 2].
template <class C> std::vector<C> test_values(int random) {
    const C inf = std::numeric_limits<C>::infinity();
    std::vector<C> v = {C(0), -C(0), inf, -inf, std::numeric_limits<C>::quiet_NaN(), std::numeric_limits<C>::denorm_min(),
                        -std::numeric_limits<C>::denorm_min(), std::numeric_limits<C>::min(), C(1e-30), C(-1e-30),
                        C(0.5), C(-0.5), C(1), C(-1), C(1.5), C(2.5), C(-2.5), C(3.5), C(0.624), C(0.626), C(0.99),
                        C(1.01), C(3.9), C(4.1), C(10), C(-10), C(88), C(-88), C(89), C(-103), C(-104), C(100), C(-100),
                        C(1e4), C(-1e4), C(1e6), C(1e9), C(-3e11), std::numeric_limits<C>::max(), std::numeric_limits<C>::lowest()};
    std::mt19937 rng(1234);
    std::uniform_real_distribution<double> wide(-30.0, 30.0), narrow(-2.0, 2.0);
    for (int i = 0; i < random; ++i) v.push_back(static_cast<C>(i % 2 ? wide(rng) : narrow(rng)));
    return v;
}

// f32 exp against exp in double over [-110, 95] (every 1009th float, so every binade and
// the subnormal results) and special values: within 1.1 ulp (the approximation's measured
// maximum over all floats is 1.06), inf from 88.73 on, 0 below -103.98, NaN stays NaN.
// Returns the largest error seen, in ulps.
inline double check_exp_range(tiers::Tier& tier) {
    std::vector<float> in = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                             std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest(), 0.0f, -0.0f,
                             std::numeric_limits<float>::denorm_min(), 88.72283f, 88.72284f, -87.33654f, -103.97f,
                             -103.98f, -104.0f, -1e30f};
    for (float x = 95.0f; x >= -110.0f;) {
        in.push_back(x);
        const auto b = std::bit_cast<std::uint32_t>(x);
        x = std::bit_cast<float>(x > 0 ? b - 1009 : x == 0 ? 0x80000001u : b + 1009);
    }
    kir::Kernel k = map_kernel(DType::f32, DType::f32, [](kir::ExprRef x) { return kir::unary(kir::UnaryOp::exp, x); });
    auto ck = compile_ok(tier, k);
    std::vector<float> out(in.size());
    call(*ck, {in.data(), out.data()}, {static_cast<I64>(in.size())}, 0, static_cast<I64>(in.size()));
    double worst = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
        const double want = std::exp(static_cast<double>(in[i]));
        const float got = out[i];
        CAPTURE(in[i]);
        CAPTURE(got);
        if (std::isnan(in[i])) {
            CHECK(std::isnan(got));
        } else if (want >= static_cast<double>(std::numeric_limits<float>::max()) * (1 + 0x1p-25)) {
            CHECK(got == std::numeric_limits<float>::infinity());
        } else {
            int e = 0;
            std::frexp(want, &e);
            const double ulp = std::ldexp(1.0, std::max(e - 24, -149));
            const double err = std::fabs(static_cast<double>(got) - want) / ulp;
            worst = std::max(worst, err);
            CHECK(err <= 1.1);
        }
    }
    return worst;
}

// y[r] = the max (or min) of row r of x [rows, cols] (cols = param 0) that skips NaN:
// t = init; t = select(x > t, x, t) (`<` for min) over the row (softmax's row max).
inline kir::Kernel row_extreme_kernel(bool max, double init) {
    using namespace kir;
    Kernel k;
    k.name = "row_extreme";
    k.buffers = {{"x", DType::f32, false}, {"y", DType::f32, true}};
    k.params = {"cols"};
    k.param_sources = {{0, 1}};
    k.temps = {Type::f32};
    k.num_vars = 1;
    auto x = load(0, Type::f32, binary(BinaryOp::add, binary(BinaryOp::mul, outer(), param(0)), var(0)));
    auto t = temp(0, Type::f32);
    k.body = {assign(0, constant(Type::f32, init)),
              loop(0, index_const(0), param(0), {assign(0, select(binary(max ? BinaryOp::gt : BinaryOp::lt, x, t), x, t))}),
              store(1, outer(), t)};
    return k;
}

// Row extremes that skip NaN, `t = select(x > t, x, t)` (max) and `select(x < t, x, t)`
// (min) from an initial t (the form of softmax's row max; tiers/kir_forms.h), against the
// KIR evaluator: rows with NaN first, inside, last or everywhere, infinities and zeros of
// both signs, odd and vector-sized lengths. From a NaN start every row stays NaN.
inline void check_nan_skipping_extremes(tiers::Tier& tier) {
    using namespace kir;
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (bool max : {true, false})
        for (double init : {max ? -HUGE_VAL : HUGE_VAL, 0.5, static_cast<double>(nan)})
            for (I64 C : {1, 7, 16, 133, 1024}) {
                CAPTURE(max);
                CAPTURE(init);
                CAPTURE(C);
                const Kernel k = row_extreme_kernel(max, init);
                const I64 R = 8;
                std::vector<float> in(static_cast<std::size_t>(R * C)), out(R), want(R);
                std::mt19937 rng(static_cast<unsigned>(C));
                std::normal_distribution<float> nd(0.0f, 3.0f);
                for (auto& v : in) v = nd(rng);
                auto at = [&](I64 r, I64 j) -> float& { return in[static_cast<std::size_t>(r * C + j)]; };
                at(1, 0) = nan;
                at(2, C / 2) = nan;
                at(3, C - 1) = nan;
                for (I64 j = 0; j < C; ++j) at(4, j) = nan;
                at(5, C / 3) = inf;
                at(5, C - 1) = -inf;
                at(5, 0) = nan;
                for (I64 j = 0; j < C; ++j) at(6, j) = j % 2 ? -inf : nan;
                for (I64 j = 0; j < C; ++j) at(7, j) = j % 2 ? 0.0f : -0.0f;
                auto ck = compile_ok(tier, k);
                call(*ck, {in.data(), out.data()}, {C}, 0, 3);
                call(*ck, {in.data(), out.data()}, {C}, 3, R);
                void* bufs[] = {in.data(), want.data()};
                evaluate(k, bufs, &C, 0, R);
                for (I64 r = 0; r < R; ++r) {
                    CAPTURE(r);
                    const float g = out[static_cast<std::size_t>(r)], w = want[static_cast<std::size_t>(r)];
                    if (std::isnan(w)) CHECK(std::isnan(g));
                    else CHECK(g == w);  // an equal zero's sign may differ
                }
            }
}

#define X(n) kir::UnaryOp::n,
inline constexpr kir::UnaryOp kUnaryOps[] = {KIR_UNARY_OPS(X)};
#undef X

}  // namespace kiln::tier_test
