// The asmjit tier (tiers/asmjit): hand-built KIR kernels and lowered groups against the KIR
// evaluator (src/kir/eval.cpp, the interpreter's formulas), at every vector width the host
// has (zmm, ymm, and scalar code), at sizes that hit the vector tails; bailouts; code
// lifetime; threads.
#include <doctest/doctest.h>

#include "have_tier.h"

#if defined(KILN_HAVE_ASMJIT)

#include "jit/exec/run_plan.h"
#include "jit/exec/shape_plan.h"
#include "reference.h"
#include "reference_kir.h"
#include "src/ir/ir.h"
#include "src/kir/eval.h"
#include "jit/exec/pipeline.h"
#include "src/passes/fuse.h"
#include "tier_kernels.h"
#include "tiers/asmjit/asmjit_tier.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace kiln;
using namespace kiln::kir;
using kiln::tiers::Bailout;
using kiln::tiers::CompiledKernel;
using I64 = std::int64_t;

tiers::Tier& tier() {
    static auto t = tiers::make_asmjit_tier();
    return *t;
}

// The widths to test: zmm (ymm on hosts without AVX-512), ymm, scalar.
const int kWidths[] = {64, 32, 0};

struct WidthScope {
    explicit WidthScope(int bytes) { tiers::set_asmjit_vector_bytes(bytes); }
    ~WidthScope() { tiers::set_asmjit_vector_bytes(-1); }
    WidthScope(const WidthScope&) = delete;
    WidthScope& operator=(const WidthScope&) = delete;
};

using tier_test::call;
using tier_test::eval_map;
using tier_test::map_kernel;
using tier_test::softmax_kernel;
using tier_test::ulp_diff;

std::shared_ptr<const CompiledKernel> compile_ok(const Kernel& k) { return tier_test::compile_ok(tier(), k); }

// Runs a map kernel over `in` in chunks [0, 3), [3, n) (so vector loops start mid-buffer),
// with guard elements after the output that must stay untouched.
template <class O, class T> std::vector<O> run_map(const CompiledKernel& ck, const std::vector<T>& in) {
    const I64 n = static_cast<I64>(in.size());
    std::vector<O> out(in.size() + 19, O(7));
    const I64 cut = std::min<I64>(3, n);
    call(ck, {const_cast<T*>(in.data()), out.data()}, {n}, 0, cut);
    call(ck, {const_cast<T*>(in.data()), out.data()}, {n}, cut, n);
    for (std::size_t i = in.size(); i < out.size(); ++i) REQUIRE(out[i] == O(7));
    out.resize(in.size());
    return out;
}

// 343 values: not a multiple of 8 or 16.
template <class C> std::vector<C> test_values() { return tier_test::test_values<C>(303); }
constexpr const auto& kUnary = tier_test::kUnaryOps;

bool exact_op(UnaryOp op) {
    return op == UnaryOp::neg || op == UnaryOp::abs || op == UnaryOp::sqrt || op == UnaryOp::rsqrt ||
           op == UnaryOp::reciprocal || op == UnaryOp::relu || op == UnaryOp::floor || op == UnaryOp::ceil ||
           op == UnaryOp::round || op == UnaryOp::sign;
}

template <class C> void check_unary_ops(DType dt, int width) {
    const std::vector<C> in = test_values<C>();
    for (UnaryOp op : kUnary) {
        if (op == UnaryOp::logical_not) continue;
        CAPTURE(op_name(op));
        const Kernel k = map_kernel(dt, dt, [op](ExprRef x) { return unary(op, x); });
        auto ck = compile_ok(k);
        const auto out = run_map<C>(*ck, in);
        const auto ref = eval_map<C>(k, in);
        // f64 transcendental functions are libm calls, like the interpreter: exact.
        const bool exact = exact_op(op) || dt == DType::f64 || op == UnaryOp::sin || op == UnaryOp::cos;
        double worst = 0;
        for (std::size_t i = 0; i < in.size(); ++i) {
            const C x = in[i], want = ref[i], got = out[i];
            CAPTURE(x);
            CAPTURE(want);
            CAPTURE(got);
            double d = ulp_diff(got, want);
            if (exact) {
                CHECK(d == 0);
                continue;
            }
            // gelu/silu cancel in their tails (1 + erf(x) near x -> -inf): compare absolutely there.
            const double abs_tol = (op == UnaryOp::gelu_erf || op == UnaryOp::gelu_tanh || op == UnaryOp::silu)
                                       ? 4 * std::numeric_limits<C>::epsilon() * std::max(C(1), std::fabs(x))
                                       : 0.0;
            if (d > 4 && std::fabs(static_cast<double>(got) - static_cast<double>(want)) <= abs_tol) d = 0;
            worst = std::max(worst, d);
            CHECK(d <= 4);
        }
        if (width == 64 && worst > 0) MESSAGE(dtype_name(dt) << " " << op_name(op) << ": max " << worst << " ulp");
    }
}

// True (with the reason printed) on a host whose CPU cannot run tier-1 code.
bool host_lacks_tier1() { return kiln::test::lacks_tier(1); }

}  // namespace

TEST_CASE("asmjit: tier identity and host") {
    if (host_lacks_tier1()) return;
    CHECK(tier().level() == 1);
    CHECK(tier().name() == "asmjit");
}

TEST_CASE("asmjit: every unary op on f32 and f64 against the interpreter's formulas, at every width") {
    if (host_lacks_tier1()) return;
    for (int w : kWidths) {
        CAPTURE(w);
        WidthScope ws(w);
        check_unary_ops<float>(DType::f32, w);
        check_unary_ops<double>(DType::f64, w);
    }
}

TEST_CASE("asmjit: f32 exp over its whole range (subnormal results, overflow, NaN) and NaN-skipping row max/min, at every width") {
    if (host_lacks_tier1()) return;
    for (int w : kWidths) {
        CAPTURE(w);
        WidthScope ws(w);
        const double worst = tier_test::check_exp_range(tier());
        if (w == 64) MESSAGE("f32 exp: max " << worst << " ulp vs exp in double");
        CHECK(tiers::asmjit_loop_report(tier_test::row_extreme_kernel(true, -HUGE_VAL)).vector_loops == (w ? 1 : 0));
        tier_test::check_nan_skipping_extremes(tier());
    }
}

TEST_CASE("asmjit: elementwise with a broadcast row, odd sizes, chunked outer ranges, zero extents") {
    if (host_lacks_tier1()) return;
    // y[o, j] = (a[o, j] + b[j]) * a[o, j] - max(a, b); rows = param 0, cols = param 1.
    Kernel k;
    k.name = "bcast";
    k.buffers = {{"a", DType::f32, false}, {"b", DType::f32, false}, {"y", DType::f32, true}};
    k.params = {"rows", "cols"};
    k.param_sources = {{0, 0}, {0, 1}};
    k.num_vars = 1;
    k.extent = param(0);
    auto idx = binary(BinaryOp::add, binary(BinaryOp::mul, outer(), param(1)), var(0));
    auto a = load(0, Type::f32, idx), b = load(1, Type::f32, var(0));
    k.body = {loop(0, index_const(0), param(1),
                   {store(2, idx, binary(BinaryOp::sub, binary(BinaryOp::mul, binary(BinaryOp::add, a, b), a),
                                         binary(BinaryOp::max, a, b)))})};
    for (int w : kWidths) {
        CAPTURE(w);
        WidthScope ws(w);
        const auto rep = tiers::asmjit_loop_report(k);
        CHECK(rep.vector_loops == (w ? 1 : 0));
        auto ck = compile_ok(k);
        for (I64 C : {1, 7, 8, 16, 17, 1003}) {
            const I64 R = 5;
            CAPTURE(C);
            std::vector<float> av(static_cast<std::size_t>(R * C)), bv(static_cast<std::size_t>(C)), y(static_cast<std::size_t>(R * C + 17), -1.0f);
            for (std::size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(i % 17) * 0.25f - 2.0f;
            for (std::size_t j = 0; j < bv.size(); ++j) bv[j] = static_cast<float>(j % 5) * 0.5f;
            call(*ck, {av.data(), bv.data(), y.data()}, {R, C}, 0, 2);
            call(*ck, {av.data(), bv.data(), y.data()}, {R, C}, 2, R);
            std::vector<float> want(y.size(), -1.0f);
            void* bufs[] = {av.data(), bv.data(), want.data()};
            const I64 ps[] = {R, C};
            kir::evaluate(k, bufs, ps, 0, R);
            CHECK(y == want);
            // Zero extents and empty rows write nothing.
            std::vector<float> z(y.size(), -7.0f);
            call(*ck, {av.data(), bv.data(), z.data()}, {R, C}, 0, 0);
            call(*ck, {av.data(), bv.data(), z.data()}, {R, C}, 3, 2);
            call(*ck, {av.data(), bv.data(), z.data()}, {R, 0}, 0, R);
            CHECK(std::all_of(z.begin(), z.end(), [](float v) { return v == -7.0f; }));
        }
    }
}

TEST_CASE("asmjit: float binary ops, max/min NaN propagation and signed zeros, comparisons, select") {
    if (host_lacks_tier1()) return;
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    std::vector<float> xs = {1.0f, -2.0f, nan, 3.0f, nan, -0.0f, 0.0f, inf, -inf, 2.0f, 0.0f, -0.0f};
    std::vector<float> ys = {2.0f, -3.0f, 1.0f, nan, nan, 0.0f, -0.0f, inf, 5.0f, 10.0f, 0.0f, -0.0f};
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 4.0f);
    for (int i = 0; i < 25; ++i) {  // 37 pairs: vector body and a tail
        xs.push_back(i % 7 == 0 ? nan : nd(rng));
        ys.push_back(i % 5 == 0 ? nan : nd(rng));
    }
    const I64 n = static_cast<I64>(xs.size());
    auto two = [](BinaryOp op, Type t) {
        Kernel k;
        k.name = "bin";
        k.buffers = {{"x", t == Type::f32 ? DType::f32 : DType::f64, false}, {"y", t == Type::f32 ? DType::f32 : DType::f64, false},
                     {"z", t == Type::f32 ? DType::f32 : DType::f64, true}};
        k.params = {"n"};
        k.param_sources = {{0, 0}};
        k.extent = param(0);
        auto x = load(0, t, outer()), y = load(1, t, outer());
        ExprRef v = binary(op, x, y);
        if (v->type == Type::boolean) v = select(v, x, binary(BinaryOp::sub, y, x));
        k.body = {store(2, outer(), v)};
        return k;
    };
    std::vector<double> xd(xs.begin(), xs.end()), yd(ys.begin(), ys.end());
    for (int w : kWidths) {
        CAPTURE(w);
        WidthScope ws(w);
        for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div, BinaryOp::pow, BinaryOp::max,
                            BinaryOp::min, BinaryOp::eq, BinaryOp::ne, BinaryOp::lt, BinaryOp::le, BinaryOp::gt, BinaryOp::ge}) {
            CAPTURE(op_name(op));
            {
                const Kernel k = two(op, Type::f32);
                auto ck = compile_ok(k);
                std::vector<float> z(xs.size()), want(xs.size());
                call(*ck, {xs.data(), ys.data(), z.data()}, {n}, 0, n);
                void* bufs[] = {xs.data(), ys.data(), want.data()};
                kir::evaluate(k, bufs, &n, 0, n);
                for (std::size_t i = 0; i < xs.size(); ++i) {
                    CAPTURE(xs[i]);
                    CAPTURE(ys[i]);
                    CHECK(ulp_diff(z[i], want[i]) == 0);
                }
            }
            {
                const Kernel k = two(op, Type::f64);
                auto ck = compile_ok(k);
                std::vector<double> z(xd.size()), want(xd.size());
                call(*ck, {xd.data(), yd.data(), z.data()}, {n}, 0, n);
                void* bufs[] = {xd.data(), yd.data(), want.data()};
                kir::evaluate(k, bufs, &n, 0, n);
                for (std::size_t i = 0; i < xd.size(); ++i) CHECK(ulp_diff(z[i], want[i]) == 0);
            }
        }
    }
}

namespace {
template <class T> void check_int_ops(DType dt) {
    const Type t = compute_type(dt);
    const T lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
    std::vector<T> xs = {T(0), T(1), T(5), T(7), hi, lo, T(hi - 1), T(100), T(3), T(42), lo, T(9)};
    std::vector<T> ys = {T(0), T(0), T(2), T(T(0) - T(3)), T(1), T(-1), T(hi), T(7), T(hi), T(6), T(0), T(-1)};
    const I64 n = static_cast<I64>(xs.size());
    auto check = [&](const Kernel& k) {
        auto ck = compile_ok(k);
        std::vector<T> z(xs.size()), want(xs.size());
        call(*ck, {xs.data(), ys.data(), z.data()}, {n}, 0, n);
        void* bufs[] = {xs.data(), ys.data(), want.data()};
        kir::evaluate(k, bufs, &n, 0, n);
        for (std::size_t i = 0; i < xs.size(); ++i) {
            CAPTURE(+xs[i]);
            CAPTURE(+ys[i]);
            CHECK(+z[i] == +want[i]);
        }
    };
    auto base = [&] {
        Kernel k;
        k.name = "ints";
        k.buffers = {{"x", dt, false}, {"y", dt, false}, {"z", dt, true}};
        k.params = {"n"};
        k.param_sources = {{0, 0}};
        k.extent = param(0);
        return k;
    };
    for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div, BinaryOp::max, BinaryOp::min, BinaryOp::eq,
                        BinaryOp::ne, BinaryOp::lt, BinaryOp::le, BinaryOp::gt, BinaryOp::ge}) {
        CAPTURE(op_name(op));
        Kernel k = base();
        auto x = load(0, t, outer()), y = load(1, t, outer());
        ExprRef v = binary(op, x, y);
        if (v->type == Type::boolean) v = select(v, x, y);
        k.body = {store(2, outer(), v)};
        check(k);
    }
    for (UnaryOp op : {UnaryOp::neg, UnaryOp::abs, UnaryOp::relu, UnaryOp::sign}) {
        CAPTURE(op_name(op));
        Kernel k = base();
        k.body = {store(2, outer(), unary(op, load(0, t, outer())))};
        check(k);
    }
}
}  // namespace

TEST_CASE("asmjit: integer ops wrap, divide by zero gives 0, INT_MIN / -1 wraps, comparisons") {
    if (host_lacks_tier1()) return;
    check_int_ops<std::int32_t>(DType::i32);
    check_int_ops<std::int64_t>(DType::i64);
    check_int_ops<std::int8_t>(DType::i8);
    check_int_ops<std::uint8_t>(DType::u8);
}

TEST_CASE("asmjit: booleans, logic on lanes, select and f32 to and from bool casts, at every width") {
    if (host_lacks_tier1()) return;
    // Scalar bytes.
    tier_test::check_bool_logic(tier());
    // f32 lanes: y = (x > 0 && !(x > 2)) || x != x ? x * 2 : float(x < -1).
    Kernel k = map_kernel(DType::f32, DType::f32, [](ExprRef x) {
        auto c0 = constant(Type::f32, 0.0), c2 = constant(Type::f32, 2.0), m1 = constant(Type::f32, -1.0);
        auto cond = binary(BinaryOp::logical_or,
                           binary(BinaryOp::logical_and, binary(BinaryOp::gt, x, c0), unary(UnaryOp::logical_not, binary(BinaryOp::gt, x, c2))),
                           binary(BinaryOp::ne, x, x));
        auto alt = binary(BinaryOp::add, cast(Type::f32, binary(BinaryOp::lt, x, m1)),
                          cast(Type::f32, cast(Type::boolean, binary(BinaryOp::sub, x, c2))));
        return select(cond, binary(BinaryOp::mul, x, c2), alt);
    });
    const std::vector<float> in = test_values<float>();
    const auto want = eval_map<float>(k, in);
    for (int w : kWidths) {
        CAPTURE(w);
        WidthScope ws(w);
        CHECK(tiers::asmjit_loop_report(k).vector_loops == (w ? 1 : 0));
        const auto got = run_map<float>(*compile_ok(k), in);
        for (std::size_t i = 0; i < in.size(); ++i) CHECK(ulp_diff(got[i], want[i]) == 0);
    }
}

TEST_CASE("asmjit: casts saturate, truncate, wrap; NaN -> 0; -> bool is x != 0") {
    if (host_lacks_tier1()) return;
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const std::vector<float> fs = {0.0f, -0.0f, 1.9f, -1.9f, 127.5f, 128.0f, -129.0f, 255.9f, 256.0f, -1.0f, nan,
                                   inf, -inf, 3e9f, -3e9f, 1e19f, -1e19f, 2147483520.0f, 0.3f, 9.3e18f, -9.3e18f};
    auto check_from = [&](DType to, auto zero, const auto& src, DType from) {
        using T = decltype(zero);
        using S = typename std::decay_t<decltype(src)>::value_type;
        const Kernel k = map_kernel(from, to, [to](ExprRef x) { return cast(compute_type(to), x); });
        const auto got = run_map<T>(*compile_ok(k), src);
        const auto want = eval_map<T>(k, src);
        for (std::size_t i = 0; i < src.size(); ++i) {
            CAPTURE(static_cast<double>(static_cast<S>(src[i])));
            if constexpr (std::is_floating_point_v<T>) CHECK(ulp_diff(got[i], want[i]) == 0);
            else CHECK(+got[i] == +want[i]);
        }
    };
    std::vector<double> ds(fs.begin(), fs.end());
    ds.push_back(1e300);
    ds.push_back(5e-324);
    std::vector<std::int64_t> is = {0, 1, -1, 127, 128, 255, 256, -129, 2147483647, -2147483648LL, 16777217,
                                    INT64_MAX, INT64_MIN, 9007199254740993LL};
    std::vector<std::uint8_t> bs = {0, 1, 1, 0, 200};
    for (DType to : {DType::i8, DType::u8, DType::i32, DType::i64, DType::boolean, DType::f32, DType::f64}) {
        CAPTURE(ref::dname(to));
        auto run_all = [&](auto zero) {
            check_from(to, zero, fs, DType::f32);
            check_from(to, zero, ds, DType::f64);
            check_from(to, zero, is, DType::i64);
            check_from(to, zero, bs, DType::u8);
        };
        switch (to) {
        case DType::i8: run_all(std::int8_t{}); break;
        case DType::u8: case DType::boolean: run_all(std::uint8_t{}); break;
        case DType::i32: run_all(std::int32_t{}); break;
        case DType::i64: run_all(std::int64_t{}); break;
        case DType::f32: run_all(float{}); break;
        default: run_all(double{}); break;
        }
    }
}

TEST_CASE("asmjit: f16 and bf16 loads and stores are bit-exact with kiln::Half / kiln::BFloat16") {
    if (host_lacks_tier1()) return;
    std::vector<std::uint16_t> all(65536);
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
    for (DType dt : {DType::f16, DType::bf16}) {
        const Kernel k = map_kernel(dt, DType::f32, [](ExprRef x) { return x; });
        const auto got = run_map<float>(*compile_ok(k), all);
        int bad = 0;
        for (std::size_t i = 0; i < all.size(); ++i) {
            Half h;
            h.bits = all[i];
            BFloat16 b;
            b.bits = all[i];
            const float want = dt == DType::f16 ? static_cast<float>(h) : static_cast<float>(b);
            bad += std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want);
        }
        CHECK(bad == 0);
    }
    std::vector<float> fs;
    for (std::uint64_t b = 0; b < (1ull << 32); b += 65521) fs.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(b)));
    for (DType dt : {DType::f16, DType::bf16}) {
        const Kernel k = map_kernel(DType::f32, dt, [](ExprRef x) { return unary(UnaryOp::neg, x); });
        const auto got = run_map<std::uint16_t>(*compile_ok(k), fs);
        const auto want = eval_map<std::uint16_t>(k, fs);
        CHECK(got == want);
    }
}

TEST_CASE("asmjit: hand-built row softmax: accumulators in vector loops, NaN rows, f16 rows") {
    if (host_lacks_tier1()) return;
    for (int w : kWidths) {
        CAPTURE(w);
        WidthScope ws(w);
        const Kernel k = softmax_kernel(DType::f32);
        const auto rep = tiers::asmjit_loop_report(k);
        CHECK(rep.vector_loops == (w ? 3 : 0));
        auto ck = compile_ok(k);
        for (I64 C : {1, 7, 17, 133, 1003}) {
            CAPTURE(C);
            const I64 R = 7;
            std::vector<float> x(static_cast<std::size_t>(R * C));
            std::mt19937 rng(static_cast<unsigned>(C));
            std::normal_distribution<float> nd(0.0f, 3.0f);
            for (auto& v : x) v = nd(rng);
            x[static_cast<std::size_t>(2 * C + C / 2)] = std::numeric_limits<float>::quiet_NaN();        // row 2: NaN
            for (I64 j = 0; j < C; ++j) x[static_cast<std::size_t>(4 * C + j)] = -std::numeric_limits<float>::infinity();
            x[static_cast<std::size_t>(5 * C + C - 1)] = std::numeric_limits<float>::infinity();        // row 5
            std::vector<float> y(x.size()), want(x.size());
            call(*ck, {x.data(), y.data()}, {C}, 0, 3);
            call(*ck, {x.data(), y.data()}, {C}, 3, R);
            void* bufs[] = {x.data(), want.data()};
            kir::evaluate(k, bufs, &C, 0, R);
            for (std::size_t i = 0; i < y.size(); ++i) {
                CAPTURE(i);
                if (std::isnan(want[i])) CHECK(std::isnan(y[i]));
                else CHECK(std::fabs(y[i] - want[i]) <= 2e-6f * std::fabs(want[i]) + 1e-30f);
            }
        }
    }
    auto kh = compile_ok(softmax_kernel(DType::f16));
    std::vector<Half> xh(33), yh(33);
    for (std::size_t j = 0; j < xh.size(); ++j) xh[j] = Half(static_cast<float>(j % 11) * 0.3f);
    call(*kh, {xh.data(), yh.data()}, {33}, 0, 1);
    double sum = 0;
    for (auto v : yh) sum += static_cast<float>(v);
    CHECK(sum == doctest::Approx(1.0).epsilon(0.01));
}

// ---------------------------------------------------------------- lowered groups

namespace {

using kiln::Tensor;
using kiln::Var;

// Runs group `gr`'s kernel compiled by tier 1 on the same buffers ref::evaluate_group uses.
std::vector<Tensor> run_group(const CompiledKernel& ck, const Kernel& k, const passes::Group& group, const ir::Graph& g,
                              const jit::ShapePlan& sp, const std::vector<Tensor>& vals) {
    std::vector<Tensor> bufs;
    for (auto v : group.inputs) bufs.push_back(vals[static_cast<std::size_t>(v)].contiguous());
    for (auto v : group.outputs)
        bufs.push_back(Tensor::empty(sp.shapes[static_cast<std::size_t>(v)], g.nodes[static_cast<std::size_t>(v)].type.dtype));
    std::vector<void*> ptrs;
    for (Tensor& t : bufs) ptrs.push_back(t.data());
    std::vector<I64> params;
    jit::group_params(k, group, sp, params);  // buffer dims and symbol values, as the runtime gives them
    const I64 extent = kir::eval_index(k.extent, params.data());
    const I64 mid = extent / 2;
    tiers::host_entry(ck)(ptrs.data(), params.data(), 0, mid);
    tiers::host_entry(ck)(ptrs.data(), params.data(), mid, extent);
    return std::vector<Tensor>(bufs.begin() + static_cast<std::ptrdiff_t>(group.inputs.size()), bufs.end());
}

struct GraphResult {
    int compiled = 0, vector_loops = 0, bailed = 0;
};

// Every group of `kg` on `inputs`: lowered groups through tier 1 and through the KIR
// evaluator on the same inputs (compared with max_rel_diff <= tol), the others through
// the interpreter. Elementwise and row-reduction groups must compile.
GraphResult check_graph(const kiln::Graph& kg, const std::vector<Tensor>& inputs, double tol) {
    const ir::Graph& g = *kg.impl();
    const auto plan = jit::lower_function(kg.impl());
    std::vector<kiln::Shape> shapes;
    for (const Tensor& t : inputs) shapes.push_back(t.shape());
    auto sp = jit::make_shape_plan(*plan, shapes, "check_graph");
    std::vector<Tensor> vals(g.nodes.size());
    for (std::size_t id : plan->order) {
        if (g.nodes[id].op == ir::Op::input) vals[id] = inputs[static_cast<std::size_t>(plan->arg_index[id])];
        if (g.nodes[id].op == ir::Op::constant) vals[id] = g.nodes[id].value;
    }
    GraphResult res;
    for (const auto& group : plan->groups) {
        const passes::Group& gr = group->group;
        INFO("group " << gr.name);
        const std::optional<Kernel>& k = group->kernel;
        REQUIRE_MESSAGE(k.has_value(), group->lower_failure);
        INFO(kir::print(*k));
        auto r = tier().compile(*k, {});
        if (gr.kind == passes::GroupKind::matmul) {
            CHECK(r.bailout == Bailout::unsupported_op);
            ++res.bailed;
        } else {
            INFO("bailout: " << tiers::bailout_name(r.bailout) << " " << r.detail);
            REQUIRE(r.bailout == Bailout::none);
            ++res.compiled;
            res.vector_loops += tiers::asmjit_loop_report(*k).vector_loops;
        }
        const std::vector<Tensor> want = ref::evaluate_group(*k, gr, g, *sp, vals);
        std::vector<Tensor> got = r.kernel ? run_group(*r.kernel, *k, gr, g, *sp, vals) : want;
        for (std::size_t i = 0; i < gr.outputs.size(); ++i) {
            CAPTURE(i);
            const double d = ref::max_rel_diff(got[i], want[i]);
            CHECK(d <= tol);
            vals[static_cast<std::size_t>(gr.outputs[i])] = got[i];
        }
    }
    return res;
}

using Body = std::function<std::vector<Var>(const std::vector<Var>&)>;

}  // namespace

TEST_CASE("asmjit: lowered elementwise chain gelu_tanh(a*b+c)*sigmoid(a), flat and with a broadcast row") {
    if (host_lacks_tier1()) return;
    const Body chain = [](const std::vector<Var>& in) -> std::vector<Var> {
        return {kiln::gelu(in[0] * in[1] + in[2], true) * kiln::sigmoid(in[0])};
    };
    for (int w : kWidths) {
        CAPTURE(w);
        WidthScope ws(w);
        for (I64 n : {1, 7, 17, 1003, 4099}) {
            CAPTURE(n);
            kiln::Graph flat = kiln::trace("chain", {kiln::arg("a", DType::f32, {kiln::dyn("n")}), kiln::arg("b", DType::f32, {kiln::dyn("n")}),
                                                     kiln::arg("c", DType::f32, {kiln::dyn("n")})}, chain);
            auto r = check_graph(flat, {ref::random_input({n}, 1, DType::f32), ref::random_input({n}, 2, DType::f32),
                                        ref::random_input({n}, 3, DType::f32)}, 1e-5);
            CHECK(r.vector_loops == (w ? 1 : 0));
            kiln::Graph rows = kiln::trace("chain2", {kiln::arg("a", DType::f32, {kiln::dyn("r"), n}), kiln::arg("b", DType::f32, {kiln::dyn("r"), n}),
                                                      kiln::arg("c", DType::f32, {n})}, chain);
            r = check_graph(rows, {ref::random_input({3, n}, 4, DType::f32), ref::random_input({3, n}, 5, DType::f32),
                                   ref::random_input({n}, 6, DType::f32)}, 1e-5);
            CHECK(r.vector_loops == (w ? 1 : 0));
        }
    }
}

TEST_CASE("asmjit: lowered row reductions (sum, mean, max, min, softmax, log_softmax, layer_norm, rms_norm, chains)") {
    if (host_lacks_tier1()) return;
    const std::vector<std::pair<const char*, Body>> cases = {
        {"sum", [](const std::vector<Var>& in) -> std::vector<Var> { return {kiln::sum(in[0] * 2.0, -1)}; }},
        {"mean", [](const std::vector<Var>& in) -> std::vector<Var> { return {kiln::mean(in[0], -1, true) + 1.0}; }},
        {"max", [](const std::vector<Var>& in) -> std::vector<Var> { return {kiln::max(in[0], -1)}; }},
        {"min", [](const std::vector<Var>& in) -> std::vector<Var> { return {kiln::min(kiln::abs(in[0]), -1)}; }},
        {"softmax", [](const std::vector<Var>& in) -> std::vector<Var> { return {kiln::softmax(in[0], -1)}; }},
        {"log_softmax", [](const std::vector<Var>& in) -> std::vector<Var> { return {kiln::log_softmax(in[0] * 0.5, -1)}; }},
        {"layer_norm", [](const std::vector<Var>& in) -> std::vector<Var> { return {kiln::layer_norm(in[0], in[1], in[2], 1e-5)}; }},
        {"rms_norm", [](const std::vector<Var>& in) -> std::vector<Var> { return {kiln::rms_norm(in[0], in[1], 1e-6)}; }},
        {"softmax(layer_norm)", [](const std::vector<Var>& in) -> std::vector<Var> {
             return {kiln::softmax(kiln::layer_norm(in[0], in[1], in[2], 1e-5), -1)};
         }},
        {"sum(softmax(layer_norm)) and the intermediate", [](const std::vector<Var>& in) -> std::vector<Var> {
             Var ln = kiln::layer_norm(in[0], in[1], in[2], 1e-5);
             return {kiln::sum(kiln::softmax(ln, -1) * in[1], -1), ln};
         }},
    };
    std::mt19937 rng(20240611);
    for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
        CAPTURE(ref::dname(dt));
        for (int w : kWidths) {
            CAPTURE(w);
            WidthScope ws(w);
            for (const auto& [name_c, body] : cases) {
                const std::string name = name_c;
                CAPTURE(name);
                for (I64 C : {1, 7, 17, 1003}) {
                    const I64 R = 1 + static_cast<I64>(rng() % 6);
                    CAPTURE(R);
                    CAPTURE(C);
                    kiln::Graph kg = kiln::trace("rows", {kiln::arg("x", dt, {kiln::dyn("r"), C}), kiln::arg("g", dt, {C}), kiln::arg("b", dt, {C})},
                                                 body);
                    const double tol = dt == DType::f32 ? 2e-5 : dt == DType::f64 ? 1e-12 : 2e-2;
                    auto r = check_graph(kg, {ref::random_input({R, C}, 11, dt), ref::random_input({C}, 12, dt), ref::random_input({C}, 13, dt)}, tol);
                    CHECK(r.compiled >= 1);
                    if (dt == DType::f32 && w > 0 && name != "sum" && name != "mean") CHECK(r.vector_loops >= 1);
                }
            }
        }
    }
}

TEST_CASE("asmjit: row max/min and elementwise maximum/minimum propagate NaN") {
    if (host_lacks_tier1()) return;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int w : kWidths) {
        CAPTURE(w);
        WidthScope ws(w);
        kiln::Graph kg = kiln::trace("nan", {kiln::arg("x", DType::f32, {4, 21}), kiln::arg("y", DType::f32, {4, 21})},
                                     [](const std::vector<Var>& in) -> std::vector<Var> {
                                         Var m = kiln::maximum(in[0], in[1]);
                                         return {kiln::max(m, -1), kiln::min(kiln::minimum(in[0], in[1]), -1), m};
                                     });
        std::vector<float> xv(84), yv(84);
        for (std::size_t i = 0; i < 84; ++i) {
            xv[i] = static_cast<float>(i % 9) - 4.0f;
            yv[i] = static_cast<float>(i % 5) - 2.0f;
        }
        xv[1 * 21 + 20] = nan;  // row 1: NaN in the last lane (the tail)
        yv[2 * 21 + 3] = nan;   // row 2: NaN from the other operand
        Tensor x = Tensor::from_vector(xv, {4, 21}), y = Tensor::from_vector(yv, {4, 21});
        check_graph(kg, {x, y}, 0.0);
        auto outs = ref::run_graph(kg, {x, y});
        auto mx = outs[0].to_vector<float>();
        CHECK(std::isnan(mx[1]));
        CHECK(std::isnan(mx[2]));
        CHECK(!std::isnan(mx[0]));
    }
}

TEST_CASE("asmjit: random elementwise graphs with broadcasting (seeded)") {
    if (host_lacks_tier1()) return;
    const std::uint64_t seed0 = 977;
    for (int round = 0; round < 24; ++round) {
        const std::uint64_t seed = seed0 + static_cast<std::uint64_t>(round);
        INFO("seed " << seed);
        std::mt19937_64 rng(seed);
        const I64 rows = 1 + static_cast<I64>(rng() % 5), cols = std::vector<I64>{1, 7, 16, 17, 33, 1003}[rng() % 6];
        const int ops = 3 + static_cast<int>(rng() % 6);
        const std::uint64_t op_seed = rng();
        const Body body = [ops, op_seed](const std::vector<Var>& in) -> std::vector<Var> {
            std::mt19937_64 r(op_seed);
            std::vector<Var> pool = in;
            for (int i = 0; i < ops; ++i) {
                Var a = pool[r() % pool.size()], b = pool[r() % pool.size()];
                Var v = a;
                switch (r() % 12) {
                case 0: v = a + b; break;
                case 1: v = a * b; break;
                case 2: v = a - b; break;
                case 3: v = kiln::maximum(a, b); break;
                case 4: v = kiln::where(a > b, a, b * 0.5); break;
                case 5: v = kiln::tanh(a); break;
                case 6: v = kiln::exp(kiln::clamp(a, -20.0, 20.0)); break;
                case 7: v = kiln::sigmoid(a) + kiln::relu(b); break;
                case 8: v = kiln::silu(a); break;
                case 9: v = kiln::gelu(a) * kiln::sqrt(kiln::abs(b)); break;
                case 10: v = a / (kiln::abs(b) + 1.0); break;
                default: v = kiln::log(kiln::abs(a) + 0.5); break;
                }
                pool.push_back(v);
            }
            return {pool.back(), pool[pool.size() - 2]};
        };
        const int width = kWidths[rng() % 3];
        CAPTURE(width);
        WidthScope ws(width);
        kiln::Graph kg = kiln::trace("rand", {kiln::arg("x", DType::f32, {kiln::dyn("r"), cols}), kiln::arg("y", DType::f32, {cols}),
                                              kiln::arg("z", DType::f32, {kiln::dyn("r"), cols})}, body);
        check_graph(kg, {ref::random_input({rows, cols}, seed, DType::f32), ref::random_input({cols}, seed + 1, DType::f32),
                         ref::random_input({rows, cols}, seed + 2, DType::f32)},
                    2e-5);
    }
}

TEST_CASE("asmjit: bailouts are enumerated results, never exceptions") {
    if (host_lacks_tier1()) return;
    auto r1 = tier().compile(map_kernel(DType::i32, DType::i32, [](ExprRef x) { return unary(UnaryOp::exp, x); }), {});
    CHECK(r1.bailout == Bailout::unsupported_op);
    CHECK(r1.kernel == nullptr);
    CHECK(!r1.detail.empty());
    Kernel k2 = map_kernel(DType::f32, DType::f32, [](ExprRef x) { return x; });
    k2.body = {store(1, outer(), load(0, Type::f64, outer()))};  // load type != the buffer's compute type
    CHECK(tier().compile(k2, {}).bailout == Bailout::unsupported_dtype);
    Kernel k3 = map_kernel(DType::f32, DType::f32, [](ExprRef x) { return x; });
    k3.body = {store(1, var(3), load(0, Type::f32, outer()))};  // variable out of range
    auto r3 = tier().compile(k3, {});
    CHECK(r3.bailout == Bailout::backend_error);
    MESSAGE("bailout detail: " << r3.detail);
    k3.num_vars = 4;  // in range, but used outside any loop
    CHECK(tier().compile(k3, {}).bailout == Bailout::backend_error);
    auto r4 = tier().compile(map_kernel(DType::f32, DType::f32, [](ExprRef x) { return binary(BinaryOp::logical_and, x, x); }), {});
    CHECK(r4.bailout == Bailout::unsupported_op);
    auto r5 = tier().compile(map_kernel(DType::i64, DType::i64, [](ExprRef x) { return binary(BinaryOp::pow, x, x); }), {});
    CHECK(r5.bailout == Bailout::unsupported_op);
    Kernel k6 = map_kernel(DType::f32, DType::f32, [](ExprRef x) { return x; });
    k6.body = {store(5, outer(), load(0, Type::f32, outer()))};  // buffer out of range
    CHECK(tier().compile(k6, {}).bailout == Bailout::backend_error);
    // A matmul group compiles (the GEMM driver, tiers/asmjit/matmul.h) and reports its
    // epilogue's loops; with f16 operands it is a bail-out.
    for (DType dt : {DType::f32, DType::f16}) {
        kiln::Graph mm = kiln::trace("mm", {kiln::arg("a", dt, {4, 8}), kiln::arg("b", dt, {8, 3})},
                                     [](const std::vector<Var>& in) -> std::vector<Var> { return {kiln::relu(kiln::matmul(in[0], in[1]))}; });
        const auto mm_plan = jit::lower_function(mm.impl());
        REQUIRE(mm_plan->groups.size() == 1);
        const auto& k7 = mm_plan->groups[0]->kernel;
        REQUIRE(k7.has_value());
        auto r7 = tier().compile(*k7, {});
        if (dt == DType::f32) {
            CHECK(r7.bailout == Bailout::none);
            CHECK(tiers::asmjit_loop_report(*k7).vector_loops >= 1);
        } else {
            CHECK(r7.bailout == Bailout::unsupported_dtype);
            CHECK(r7.kernel == nullptr);
        }
    }
    // The injected-failure hook.
    Kernel ok = map_kernel(DType::f32, DType::f32, [](ExprRef x) { return unary(UnaryOp::neg, x); });
    tiers::set_asmjit_fail_next_compiles(2);
    CHECK(tier().compile(ok, {}).bailout == Bailout::injected_failure);
    CHECK(tier().compile(ok, {}).bailout == Bailout::injected_failure);
    CHECK(tier().compile(ok, {}).bailout == Bailout::none);
}

TEST_CASE("asmjit: dropping a kernel releases its code") {
    if (host_lacks_tier1()) return;
    const auto before = tiers::asmjit_code_stats();
    {
        auto a = compile_ok(softmax_kernel(DType::f32));
        auto b = compile_ok(map_kernel(DType::f32, DType::f32, [](ExprRef x) { return unary(UnaryOp::gelu_tanh, x); }));
        const auto during = tiers::asmjit_code_stats();
        CHECK(during.kernels == before.kernels + 2);
        CHECK(during.code_bytes == before.code_bytes + a->code_bytes() + b->code_bytes());
        CHECK(a->code_bytes() > 0);
        MESSAGE("code bytes: softmax " << a->code_bytes() << ", gelu_tanh map " << b->code_bytes());
    }
    const auto after = tiers::asmjit_code_stats();
    CHECK(after.kernels == before.kernels);
    CHECK(after.code_bytes == before.code_bytes);
    for (int i = 0; i < 500; ++i) compile_ok(softmax_kernel(DType::f32));
    CHECK(tiers::asmjit_code_stats().kernels == before.kernels);
}

TEST_CASE("asmjit: compiles from 4 threads at once") {
    if (host_lacks_tier1()) return;
    tier_test::check_concurrent_compiles(tier(), 20);
}

TEST_CASE("asmjit: compile latency (measured, not asserted)") {
    if (host_lacks_tier1()) return;
    std::vector<Kernel> ks;
    ks.push_back(softmax_kernel(DType::f32));
    ks.push_back(map_kernel(DType::f32, DType::f32, [](ExprRef x) {
        return binary(BinaryOp::mul, unary(UnaryOp::gelu_tanh, x), unary(UnaryOp::sigmoid, x));
    }));
    ks.push_back(map_kernel(DType::f32, DType::f32, [](ExprRef x) { return binary(BinaryOp::add, x, x); }));
    std::vector<double> us;
    for (int rep = 0; rep < 20; ++rep)
        for (const auto& k : ks) {
            auto r = tier().compile(k, {});
            REQUIRE(r.bailout == Bailout::none);
            us.push_back(r.compile_ms * 1000.0);
        }
    std::sort(us.begin(), us.end());
    MESSAGE("asmjit compile latency over " << us.size() << " compiles: median " << us[us.size() / 2] << " us, p90 "
                                           << us[us.size() * 9 / 10] << " us");
}

#else

// Every case of this file needs asmjit's headers: in a build without it, one case stands for them.
TEST_CASE("asmjit: tier tests") { kiln::test::lacks_tier(1); }

#endif
