// The LLVM ORC tier (tiers/llvm): hand-built KIR kernels against the interpreter's formulas
// (tiers/interp/elementwise.cpp is the specification), bailouts, code lifetime, threads.
#include <doctest/doctest.h>

#include "have_tier.h"

#if defined(KILN_HAVE_LLVM)

#include "src/kir/eval.h"
#include "tier_kernels.h"
#include "tiers/llvm/llvm_tier.h"

#include <kiln/dtype.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace {

using namespace kiln;
using namespace kiln::kir;
using kiln::tiers::Bailout;
using kiln::tiers::CompiledKernel;
using I64 = std::int64_t;

tiers::Tier& tier() {
    static auto t = tiers::make_llvm_tier();
    return *t;
}

using tier_test::call;
using tier_test::eval_map;
using tier_test::map_kernel;
using tier_test::softmax_kernel;
using tier_test::ulp_diff;

std::shared_ptr<const CompiledKernel> compile_ok(const Kernel& k, const Specialization& s = {}) {
    return tier_test::compile_ok(tier(), k, s);
}

template <class O, class T> std::vector<O> run_map(const Kernel& k, const std::vector<T>& in) {
    auto ck = compile_ok(k);
    std::vector<O> out(in.size());
    call(*ck, {const_cast<T*>(in.data()), out.data()}, {static_cast<I64>(in.size())}, 0, static_cast<I64>(in.size()));
    return out;
}

template <class C> std::vector<C> test_values() { return tier_test::test_values<C>(300); }
constexpr const auto& kFloatUnary = tier_test::kUnaryOps;

template <class C> void check_unary_ops(DType dt) {
    const std::vector<C> in = test_values<C>();
    for (UnaryOp op : kFloatUnary) {
        if (op == UnaryOp::logical_not) continue;
        CAPTURE(op_name(op));
        const Kernel k = map_kernel(dt, dt, [op](ExprRef x) { return unary(op, x); });
        auto out = run_map<C>(k, in);
        const auto ref = eval_map<C>(k, in);
        const bool exact = op == UnaryOp::neg || op == UnaryOp::abs || op == UnaryOp::sqrt || op == UnaryOp::rsqrt ||
                           op == UnaryOp::reciprocal || op == UnaryOp::relu || op == UnaryOp::floor ||
                           op == UnaryOp::ceil || op == UnaryOp::round || op == UnaryOp::sign;
        double worst = 0;
        for (std::size_t i = 0; i < in.size(); ++i) {
            const C x = in[i], want = ref[i], got = out[i];
            CAPTURE(x);
            CAPTURE(want);
            CAPTURE(got);
            if (exact) {
                CHECK(ulp_diff(got, want) == 0);
                continue;
            }
            if ((op == UnaryOp::sin || op == UnaryOp::cos) && std::fabs(x) > C(1e12) && std::isfinite(x)) {  // documented range
                CHECK((got >= C(-1) && got <= C(1)));
                continue;
            }
            double d = ulp_diff(got, want);
            // gelu/silu cancel in their tails (1 + erf(x) near x -> -inf): compare absolutely there.
            const double abs_tol = (op == UnaryOp::gelu_erf || op == UnaryOp::gelu_tanh || op == UnaryOp::silu)
                                       ? 4 * std::numeric_limits<C>::epsilon() * std::max(C(1), std::fabs(x))
                                       : 0.0;
            if (d > 4 && std::fabs(static_cast<double>(got) - static_cast<double>(want)) <= abs_tol) d = 0;
            // f32 sigmoid flushes results below the smallest normal to 0 (vmath.cpp, exp_sigmoid_f32).
            if (d > 4 && op == UnaryOp::sigmoid && std::is_same_v<C, float> && got == C(0) &&
                std::fabs(want) < std::numeric_limits<C>::min())
                d = 0;
            worst = std::max(worst, d);
            CHECK(d <= 4);
        }
        MESSAGE(dtype_name(dt) << " " << op_name(op) << ": max " << worst << " ulp vs the interpreter's formula");
    }
}

}  // namespace

TEST_CASE("llvm: host description and tier identity") {
    const std::string d = tiers::llvm_host_description();
    MESSAGE("host: " << d.substr(0, 120) << (d.size() > 120 ? "..." : ""));
    CHECK(d.find(';') != std::string::npos);
    CHECK(tier().level() == 2);
    CHECK(tier().name() == "llvm");
}

TEST_CASE("llvm: elementwise add and mul with a broadcast row, generic and specialised, chunked") {
    // y[o, j] = (a[o, j] + b[j]) * a[o, j], rows = param 0, cols = param 1.
    Kernel k;
    k.name = "bcast_add_mul";
    k.buffers = {{"a", DType::f32, false}, {"b", DType::f32, false}, {"y", DType::f32, true}};
    k.params = {"rows", "cols"};
    k.param_sources = {{0, 0}, {0, 1}};
    k.num_vars = 1;
    k.extent = param(0);
    auto idx = binary(BinaryOp::add, binary(BinaryOp::mul, outer(), param(1)), var(0));
    auto a = load(0, Type::f32, idx);
    k.body = {loop(0, index_const(0), param(1),
                   {store(2, idx, binary(BinaryOp::mul, binary(BinaryOp::add, a, load(1, Type::f32, var(0))), a))})};
    const I64 R = 13, C = 37;
    std::vector<float> av(R * C), bv(C);
    for (I64 i = 0; i < R * C; ++i) av[i] = static_cast<float>(i % 17) * 0.25f - 2.0f;
    for (I64 j = 0; j < C; ++j) bv[j] = static_cast<float>(j) * 0.5f;
    auto expect = [&](I64 o, I64 j) { return (av[o * C + j] + bv[j]) * av[o * C + j]; };

    auto generic = compile_ok(k);
    Specialization spec;
    spec.params = {R, C};
    auto special = compile_ok(k, spec);
    Specialization cols_only;
    cols_only.params = {std::nullopt, C};
    auto partial = compile_ok(k, cols_only);
    CHECK(generic->code_bytes() > 0);
    for (auto& ck : {generic, special, partial}) {
        std::vector<float> y(R * C, -1.0f);
        // [begin, end) chunks, as the runtime splits the outer extent across threads.
        call(*ck, {av.data(), bv.data(), y.data()}, {R, C}, 0, 3);
        call(*ck, {av.data(), bv.data(), y.data()}, {R, C}, 3, 4);
        call(*ck, {av.data(), bv.data(), y.data()}, {R, C}, 4, R);
        for (I64 o = 0; o < R; ++o)
            for (I64 j = 0; j < C; ++j) CHECK(y[o * C + j] == expect(o, j));
    }
    // Zero extent and zero inner length write nothing.
    std::vector<float> y(R * C, -7.0f);
    call(*generic, {av.data(), bv.data(), y.data()}, {R, C}, 0, 0);
    call(*generic, {av.data(), bv.data(), y.data()}, {R, C}, 5, 2);
    call(*generic, {av.data(), bv.data(), y.data()}, {R, 0}, 0, R);
    CHECK(std::all_of(y.begin(), y.end(), [](float v) { return v == -7.0f; }));
}

TEST_CASE("llvm: every unary op on f32 against the interpreter's formulas") { check_unary_ops<float>(DType::f32); }

TEST_CASE("llvm: every unary op on f64 against the interpreter's formulas") { check_unary_ops<double>(DType::f64); }

TEST_CASE("llvm: f32 exp over its whole range: subnormal results, overflow, NaN") {
    MESSAGE("f32 exp: max " << tier_test::check_exp_range(tier()) << " ulp vs exp in double");
}

// Checks out[i] against sigmoid(z) (product: in[i] * sigmoid(z)) in double, z = z_scale *
// in[i]: within 4 ulp, NaN for a NaN input (and for -inf in a product: -inf * 0); results
// below the smallest normal float count as exact, and so does a product's 0 where its value
// lies below 32 times it (exp(-z) overflowed to inf). Returns the worst distance in ulp.
double check_sigmoid_values(const std::vector<float>& in, const std::vector<float>& out, double z_scale, bool product) {
    double worst = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
        const double x = in[i], s = 1.0 / (1.0 + std::exp(-z_scale * x));
        const double want_d = product ? x * s : s;
        const float want = static_cast<float>(want_d), got = out[i];
        if (std::isnan(x) || (product && x == -INFINITY)) {
            CHECK(std::isnan(got));
            continue;
        }
        double d = ulp_diff(got, want);
        if (std::fabs(want) < std::numeric_limits<float>::min() && std::fabs(got) < std::numeric_limits<float>::min())
            d = 0;
        if (product && got == 0.0f && std::fabs(want_d) < 32.0 * std::numeric_limits<float>::min()) d = 0;
        if (d > 4) {
            CAPTURE(x);
            CAPTURE(want);
            CAPTURE(got);
            CHECK(d <= 4);
        }
        worst = std::max(worst, d);
    }
    return worst;
}

// One formula for both signs (vmath.cpp, exp_sigmoid_f32): checked against sigmoid and silu
// in double on every 1021st float of |x| <= 120 (past the clamps of both sides), and the
// specials. Results below the smallest normal float may be 0 (sigmoid's flush), and so may
// silu's below 32 times it (x in about [-91.9, -88.4], where exp(-x) overflows to inf and
// x / inf is 0); every other result within 4 ulp.
TEST_CASE("llvm: f32 sigmoid and silu over their whole range against double") {
    std::vector<float> in;
    for (std::uint32_t b = 0; b <= 0x42F00000u; b += 1021) {  // 0x42F00000: 120.0f
        float v;
        std::memcpy(&v, &b, sizeof v);
        in.push_back(v);
        in.push_back(-v);
    }
    for (float v : {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN(), 88.37f, -88.37f, 88.72f, -88.72f, 89.0f, -89.0f, 104.0f,
                    -104.0f, 87.34f, -87.34f})
        in.push_back(v);
    for (UnaryOp op : {UnaryOp::sigmoid, UnaryOp::silu}) {
        CAPTURE(op_name(op));
        const auto out = run_map<float>(map_kernel(DType::f32, DType::f32, [op](ExprRef x) { return unary(op, x); }), in);
        const double worst = check_sigmoid_values(in, out, 1, op == UnaryOp::silu);
        MESSAGE("f32 " << op_name(op) << ": max " << worst << " ulp vs double over " << in.size() << " values");
    }
}

// ONNX spells SiLU x * Sigmoid(x): tier 2 folds a product with an f32 sigmoid into its
// division (y / (1 + exp(-z)), ops.cpp), so the product compiles to the instructions of silu
// (counted in the dumped IR) and keeps its values: within 4 ulp of y * sigmoid(z) in double
// over the range, NaN at x = -inf (-inf * 0) and for NaN, on either side of the product and
// with z != y.
TEST_CASE("llvm: a product with a sigmoid folds into its division (SiLU as x * Sigmoid(x))") {
    const auto dir = std::filesystem::temp_directory_path() / ("kiln_llvm_silu_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    tiers::LlvmTierOptions opt;
    opt.dump_llvm = true;
    opt.dump_dir = dir.string();
    auto t = tiers::make_llvm_tier(opt);
    auto two = [](ExprRef x) { return binary(BinaryOp::mul, x, constant(Type::f32, 2.0)); };
    struct Form {
        const char* name;
        std::function<ExprRef(ExprRef)> f;
        double z_scale;  // the sigmoid's argument: z_scale * x
        bool sigmoid_left;
    };
    const Form forms[] = {
        {"silu_op", [](ExprRef x) { return unary(UnaryOp::silu, x); }, 1, false},
        {"x_sigmoid_x", [](ExprRef x) { return binary(BinaryOp::mul, x, unary(UnaryOp::sigmoid, x)); }, 1, false},
        {"sigmoid_x_x", [](ExprRef x) { return binary(BinaryOp::mul, unary(UnaryOp::sigmoid, x), x); }, 1, true},
        {"x_sigmoid_2x", [two](ExprRef x) { return binary(BinaryOp::mul, x, unary(UnaryOp::sigmoid, two(x))); }, 2, false},
    };
    std::vector<float> in;
    for (std::uint32_t b = 0; b <= 0x42F00000u; b += 4099) {  // |x| <= 120
        float v;
        std::memcpy(&v, &b, sizeof v);
        in.push_back(v);
        in.push_back(-v);
    }
    for (float v : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN(), 88.72f, -88.72f, -104.0f})
        in.push_back(v);
    auto slurp = [](const std::filesystem::path& p) {
        std::ifstream f(p);
        return std::string(std::istreambuf_iterator<char>(f), {});
    };
    auto count = [](const std::string& text, const std::string& what) {
        std::size_t n = 0;
        for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
        return n;
    };
    std::size_t silu_fmul = 0, silu_fdiv = 0;
    for (const Form& form : forms) {
        CAPTURE(form.name);
        Kernel k = map_kernel(DType::f32, DType::f32, form.f);
        k.name = form.name;
        auto r = t->compile(k, {});
        REQUIRE(r.bailout == Bailout::none);
        std::string ll;
        for (auto& e : std::filesystem::directory_iterator(dir))
            if (e.path().filename().string().rfind(std::string(form.name) + ".", 0) == 0 && e.path().extension() == ".ll")
                ll = slurp(e.path());
        REQUIRE(!ll.empty());
        if (std::string(form.name) == "silu_op") {
            silu_fmul = count(ll, " fmul ");
            silu_fdiv = count(ll, " fdiv ");
            CHECK(silu_fdiv > 0);
        } else if (form.z_scale == 1) {
            CHECK(count(ll, " fmul ") == silu_fmul);  // no multiply by the sigmoid left
            CHECK(count(ll, " fdiv ") == silu_fdiv);
        }
        std::vector<float> out(in.size());
        call(*r.kernel, {in.data(), out.data()}, {static_cast<I64>(in.size())}, 0, static_cast<I64>(in.size()));
        const double worst = check_sigmoid_values(in, out, form.z_scale, true);
        MESSAGE(std::string(form.name) << ": max " << worst << " ulp vs double");
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("llvm: row max/min that skip NaN (softmax's row max) against the evaluator") {
    tier_test::check_nan_skipping_extremes(tier());
}

TEST_CASE("llvm: float binary ops, max/min NaN propagation, comparisons") {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const std::vector<float> xs = {1.0f, -2.0f, nan, 3.0f, nan, -0.0f, 0.0f, inf, -inf, 2.0f};
    const std::vector<float> ys = {2.0f, -3.0f, 1.0f, nan, nan, 0.0f, -0.0f, inf, 5.0f, 10.0f};
    const std::size_t n = xs.size();
    for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div, BinaryOp::pow, BinaryOp::max,
                        BinaryOp::min}) {
        CAPTURE(op_name(op));
        Kernel k;
        k.name = "fbin";
        k.buffers = {{"x", DType::f32, false}, {"y", DType::f32, false}, {"z", DType::f32, true}};
        k.params = {"n"};
        k.extent = param(0);
        k.body = {store(2, outer(), binary(op, load(0, Type::f32, outer()), load(1, Type::f32, outer())))};
        auto ck = compile_ok(k);
        std::vector<float> z(n);
        call(*ck, {const_cast<float*>(xs.data()), const_cast<float*>(ys.data()), z.data()}, {I64(n)}, 0, I64(n));
        for (std::size_t i = 0; i < n; ++i) {
            const float x = xs[i], y = ys[i];
            float want = 0;
            switch (op) {
            case BinaryOp::add: want = x + y; break;
            case BinaryOp::sub: want = x - y; break;
            case BinaryOp::mul: want = x * y; break;
            case BinaryOp::div: want = x / y; break;
            case BinaryOp::pow: want = std::pow(x, y); break;
            case BinaryOp::max: want = std::isnan(x) ? x : std::isnan(y) ? y : (y > x ? y : x); break;
            case BinaryOp::min: want = std::isnan(x) ? x : std::isnan(y) ? y : (y < x ? y : x); break;
            default: break;
            }
            CAPTURE(x);
            CAPTURE(y);
            CHECK(ulp_diff(z[i], want) == 0);
        }
    }
    for (BinaryOp op : {BinaryOp::eq, BinaryOp::ne, BinaryOp::lt, BinaryOp::le, BinaryOp::gt, BinaryOp::ge}) {
        CAPTURE(op_name(op));
        Kernel k;
        k.name = "fcmp";
        k.buffers = {{"x", DType::f32, false}, {"y", DType::f32, false}, {"z", DType::boolean, true}};
        k.params = {"n"};
        k.extent = param(0);
        k.body = {store(2, outer(), binary(op, load(0, Type::f32, outer()), load(1, Type::f32, outer())))};
        auto ck = compile_ok(k);
        std::vector<std::uint8_t> z(n, 7);
        call(*ck, {const_cast<float*>(xs.data()), const_cast<float*>(ys.data()), z.data()}, {I64(n)}, 0, I64(n));
        for (std::size_t i = 0; i < n; ++i) {
            const float x = xs[i], y = ys[i];
            bool want = op == BinaryOp::eq ? x == y : op == BinaryOp::ne ? x != y : op == BinaryOp::lt ? x < y
                      : op == BinaryOp::le ? x <= y : op == BinaryOp::gt ? x > y : x >= y;
            CHECK(z[i] == (want ? 1 : 0));
        }
    }
}

namespace {
template <class T> T wrap_ref(BinaryOp op, T x, T y) {
    using U = std::uint64_t;
    switch (op) {
    case BinaryOp::add: return static_cast<T>(static_cast<U>(x) + static_cast<U>(y));
    case BinaryOp::sub: return static_cast<T>(static_cast<U>(x) - static_cast<U>(y));
    case BinaryOp::mul: return static_cast<T>(static_cast<U>(x) * static_cast<U>(y));
    case BinaryOp::div:
        if (y == 0) return T(0);
        if constexpr (std::is_signed_v<T>)
            if (y == T(-1)) return static_cast<T>(U(0) - static_cast<U>(x));
        return static_cast<T>(x / y);
    case BinaryOp::max: return y > x ? y : x;
    case BinaryOp::min: return y < x ? y : x;
    default: return T(0);
    }
}

template <class T> void check_int_ops(DType dt) {
    const Type t = compute_type(dt);
    const T lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
    std::vector<T> xs = {T(0), T(1), T(5), T(7), hi, lo, T(hi - 1), T(100), T(3), T(42)};
    std::vector<T> ys = {T(0), T(0), T(2), T(T(0) - T(3)), T(1), T(-1), T(hi), T(7), T(hi), T(6)};
    const std::size_t n = xs.size();
    for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div, BinaryOp::max, BinaryOp::min}) {
        CAPTURE(op_name(op));
        Kernel k;
        k.name = "ibin";
        k.buffers = {{"x", dt, false}, {"y", dt, false}, {"z", dt, true}};
        k.params = {"n"};
        k.extent = param(0);
        k.body = {store(2, outer(), binary(op, load(0, t, outer()), load(1, t, outer())))};
        auto ck = compile_ok(k);
        std::vector<T> z(n);
        call(*ck, {xs.data(), ys.data(), z.data()}, {I64(n)}, 0, I64(n));
        for (std::size_t i = 0; i < n; ++i) {
            CAPTURE(+xs[i]);
            CAPTURE(+ys[i]);
            CHECK(+z[i] == +wrap_ref(op, xs[i], ys[i]));
        }
    }
    for (UnaryOp op : {UnaryOp::neg, UnaryOp::abs, UnaryOp::relu, UnaryOp::sign}) {
        CAPTURE(op_name(op));
        auto z = run_map<T>(map_kernel(dt, dt, [op](ExprRef x) { return unary(op, x); }), xs);
        for (std::size_t i = 0; i < n; ++i) {
            const T v = xs[i];
            using U = std::uint64_t;
            T want{};
            if (op == UnaryOp::neg) want = static_cast<T>(U(0) - static_cast<U>(v));
            if (op == UnaryOp::abs) want = std::is_signed_v<T> && v < T(0) ? static_cast<T>(U(0) - static_cast<U>(v)) : v;
            if (op == UnaryOp::relu) want = v > T(0) ? v : T(0);
            if (op == UnaryOp::sign) want = std::is_signed_v<T> ? static_cast<T>((v > 0) - (v < 0)) : static_cast<T>(v != 0);
            CAPTURE(+v);
            CHECK(+z[i] == +want);
        }
    }
}
}  // namespace

// max/min with a constant operand (relu6's bounds, kir::lower inlines them) take a shorter
// path than two buffers (tiers/llvm/ops.cpp): the same values, NaN and the sign of zero
// included, with the constant second and first, NaN and infinite constants too.
TEST_CASE("llvm: max/min against a constant: NaN propagation and signed zeros as with two operands") {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const std::vector<float> xs = {1.0f, -2.0f, nan, 6.0f, 7.5f, -0.0f, 0.0f, inf, -inf, 5.999f};
    for (const float c : {0.0f, -0.0f, 6.0f, inf, -inf, nan})
        for (BinaryOp op : {BinaryOp::max, BinaryOp::min})
            for (const bool first : {false, true}) {
                CAPTURE(op_name(op));
                CAPTURE(c);
                CAPTURE(first);
                const Kernel k = map_kernel(DType::f32, DType::f32, [&](ExprRef x) {
                    return first ? binary(op, constant(Type::f32, c), x) : binary(op, x, constant(Type::f32, c));
                });
                const std::vector<float> got = run_map<float>(k, xs);
                for (std::size_t i = 0; i < xs.size(); ++i) {
                    const float a = first ? c : xs[i], b = first ? xs[i] : c;
                    const bool mx = op == BinaryOp::max;
                    const float want = std::isnan(a) ? a : std::isnan(b) ? b : ((mx ? b > a : b < a) ? b : a);
                    CAPTURE(xs[i]);
                    CHECK(std::isnan(got[i]) == std::isnan(want));
                    if (!std::isnan(want)) {
                        CHECK(got[i] == want);
                        CHECK(std::signbit(got[i]) == std::signbit(want));
                    }
                }
            }
}

TEST_CASE("llvm: integer ops wrap, divide by zero gives 0, INT_MIN / -1 wraps") {
    check_int_ops<std::int32_t>(DType::i32);
    check_int_ops<std::int64_t>(DType::i64);
    check_int_ops<std::int8_t>(DType::i8);
    check_int_ops<std::uint8_t>(DType::u8);
}

TEST_CASE("llvm: boolean logic and select") { tier_test::check_bool_logic(tier()); }

TEST_CASE("llvm: casts saturate, truncate, wrap; NaN -> 0; -> bool is x != 0") {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const std::vector<float> fs = {0.0f, -0.0f, 1.9f, -1.9f, 127.5f, 128.0f, -129.0f, 255.9f, 256.0f, -1.0f, nan,
                                   inf, -inf, 3e9f, -3e9f, 1e19f, -1e19f, 2147483520.0f, 0.3f};
    const I64 n = static_cast<I64>(fs.size());
    auto run_cast = [&](DType to, auto zero) {
        using T = decltype(zero);
        auto z = [&] {
            auto ck = compile_ok(map_kernel(DType::f32, to, [to](ExprRef x) { return cast(compute_type(to), x); }));
            std::vector<T> out(fs.size());
            call(*ck, {const_cast<float*>(fs.data()), out.data()}, {n}, 0, n);
            return out;
        }();
        for (std::size_t i = 0; i < fs.size(); ++i) {
            const float v = fs[i];
            T want;
            if (to == DType::boolean) {
                want = v != 0.0f;
            } else {
                const double lo = static_cast<double>(std::numeric_limits<T>::min());
                const double hi = static_cast<double>(std::numeric_limits<T>::max());
                const double d = v;
                want = std::isnan(v) ? T(0) : d <= lo ? std::numeric_limits<T>::min() : d >= hi ? std::numeric_limits<T>::max()
                                                                                              : static_cast<T>(d);
            }
            CAPTURE(v);
            CHECK(+z[i] == +want);
        }
    };
    run_cast(DType::i8, std::int8_t{});
    run_cast(DType::u8, std::uint8_t{});
    run_cast(DType::i32, std::int32_t{});
    run_cast(DType::i64, std::int64_t{});
    run_cast(DType::boolean, std::uint8_t{});

    // Integer -> narrower integer wraps; -> float; bool -> number.
    std::vector<std::int32_t> is = {0, 1, -1, 127, 128, 255, 256, -129, 2147483647, -2147483647 - 1, 16777217};
    auto i8 = run_map<std::int8_t>(map_kernel(DType::i32, DType::i8, [](ExprRef x) { return cast(Type::i8, x); }), is);
    auto u8 = run_map<std::uint8_t>(map_kernel(DType::i32, DType::u8, [](ExprRef x) { return cast(Type::u8, x); }), is);
    auto f = run_map<float>(map_kernel(DType::i32, DType::f32, [](ExprRef x) { return cast(Type::f32, x); }), is);
    auto i64 = run_map<std::int64_t>(map_kernel(DType::i32, DType::i64, [](ExprRef x) { return cast(Type::i64, x); }), is);
    for (std::size_t i = 0; i < is.size(); ++i) {
        CHECK(i8[i] == static_cast<std::int8_t>(is[i]));
        CHECK(u8[i] == static_cast<std::uint8_t>(is[i]));
        CHECK(f[i] == static_cast<float>(is[i]));
        CHECK(i64[i] == static_cast<std::int64_t>(is[i]));
    }
    std::vector<std::uint8_t> u = {0, 1, 200, 255};
    auto uf = run_map<double>(map_kernel(DType::u8, DType::f64, [](ExprRef x) { return cast(Type::f64, x); }), u);
    auto ui = run_map<std::int32_t>(map_kernel(DType::u8, DType::i32, [](ExprRef x) { return cast(Type::i32, x); }), u);
    for (std::size_t i = 0; i < u.size(); ++i) {
        CHECK(uf[i] == static_cast<double>(u[i]));
        CHECK(ui[i] == static_cast<std::int32_t>(u[i]));
    }
    std::vector<std::uint8_t> bs = {0, 1, 1, 0};
    auto bf = run_map<float>(map_kernel(DType::boolean, DType::f32, [](ExprRef x) { return cast(Type::f32, x); }), bs);
    CHECK(bf == std::vector<float>{0, 1, 1, 0});
    std::vector<double> ds = {1e300, -1e300, 0.1, std::numeric_limits<double>::quiet_NaN(), 5e-324};
    auto df = run_map<float>(map_kernel(DType::f64, DType::f32, [](ExprRef x) { return cast(Type::f32, x); }), ds);
    for (std::size_t i = 0; i < ds.size(); ++i) CHECK(ulp_diff(df[i], static_cast<float>(ds[i])) == 0);
}

TEST_CASE("llvm: f16 and bf16 loads and stores are bit-exact with kiln::Half / kiln::BFloat16") {
    // Every 16-bit pattern loaded as f32.
    std::vector<std::uint16_t> all(65536);
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
    {
        auto ck = compile_ok(map_kernel(DType::f16, DType::f32, [](ExprRef x) { return x; }));
        auto cb = compile_ok(map_kernel(DType::bf16, DType::f32, [](ExprRef x) { return x; }));
        std::vector<float> h(all.size()), b(all.size());
        call(*ck, {all.data(), h.data()}, {65536}, 0, 65536);
        call(*cb, {all.data(), b.data()}, {65536}, 0, 65536);
        int bad_h = 0, bad_b = 0;
        for (std::size_t i = 0; i < all.size(); ++i) {
            Half hv;
            hv.bits = all[i];
            BFloat16 bv;
            bv.bits = all[i];
            bad_h += std::bit_cast<std::uint32_t>(h[i]) != std::bit_cast<std::uint32_t>(static_cast<float>(hv));
            bad_b += std::bit_cast<std::uint32_t>(b[i]) != std::bit_cast<std::uint32_t>(static_cast<float>(bv));
        }
        CHECK(bad_h == 0);
        CHECK(bad_b == 0);
    }
    // f32 -> f16 / bf16 over a sweep of bit patterns (every exponent, rounding cases, specials).
    std::vector<float> fs;
    for (std::uint64_t b = 0; b < (1ull << 32); b += 65521) fs.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(b)));
    for (std::uint32_t e = 0; e < 256; ++e)
        for (std::uint32_t m : {0u, 1u, 0x1000u, 0x1001u, 0x2000u, 0x3000u, 0x7fffu, 0x8000u, 0x18000u, 0x7fffffu, 0x400000u})
            for (std::uint32_t s : {0u, 0x80000000u}) fs.push_back(std::bit_cast<float>(s | (e << 23) | m));
    const I64 n = static_cast<I64>(fs.size());
    auto ch = compile_ok(map_kernel(DType::f32, DType::f16, [](ExprRef x) { return x; }));
    auto cb = compile_ok(map_kernel(DType::f32, DType::bf16, [](ExprRef x) { return x; }));
    std::vector<std::uint16_t> h(fs.size()), b(fs.size());
    call(*ch, {fs.data(), h.data()}, {n}, 0, n);
    call(*cb, {fs.data(), b.data()}, {n}, 0, n);
    int bad_h = 0, bad_b = 0;
    for (std::size_t i = 0; i < fs.size(); ++i) {
        bad_h += h[i] != Half(fs[i]).bits;
        bad_b += b[i] != BFloat16(fs[i]).bits;
    }
    CHECK(bad_h == 0);
    CHECK(bad_b == 0);
    MESSAGE(fs.size() << " f32 patterns converted to f16 and bf16");
}

TEST_CASE("llvm: row softmax with temps and nested loops, generic and specialised") {
    const I64 R = 7, C = 133;
    std::vector<float> x(R * C);
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    for (auto& v : x) v = nd(rng);
    x[2 * C + 5] = std::numeric_limits<float>::quiet_NaN();  // row 2: all NaN
    for (I64 j = 0; j < C; ++j) x[4 * C + j] = -std::numeric_limits<float>::infinity();  // row 4: NaN (-inf - -inf)
    x[5 * C + 9] = std::numeric_limits<float>::infinity();  // row 5: inf - inf = NaN at j=9, 0 elsewhere -> NaN sum
    Kernel k = softmax_kernel(DType::f32);
    Specialization spec;
    spec.params = {C};
    auto generic = compile_ok(k), special = compile_ok(k, spec);
    std::vector<float> y1(R * C), y2(R * C);
    call(*generic, {x.data(), y1.data()}, {C}, 0, R);
    call(*special, {x.data(), y2.data()}, {C}, 0, 2);
    call(*special, {x.data(), y2.data()}, {C}, 2, R);
    for (I64 o = 0; o < R; ++o) {
        double m = -INFINITY, s = 0;
        bool nan = false;
        for (I64 j = 0; j < C; ++j) {
            nan |= std::isnan(x[o * C + j]);
            m = std::max(m, static_cast<double>(x[o * C + j]));
        }
        for (I64 j = 0; j < C; ++j) s += std::exp(x[o * C + j] - m);
        for (I64 j = 0; j < C; ++j) {
            const double want = nan ? NAN : std::exp(x[o * C + j] - m) / s;
            CAPTURE(o);
            CAPTURE(j);
            for (float got : {y1[o * C + j], y2[o * C + j]}) {
                if (std::isnan(want)) {
                    CHECK(std::isnan(got));
                } else {
                    CHECK(std::fabs(got - want) <= 1e-5 * std::fabs(want) + 1e-12);
                }
            }
        }
    }
    // The bf16 version: loads and stores through the bit conversions.
    auto kb = compile_ok(softmax_kernel(DType::bf16));
    std::vector<BFloat16> xb(C), yb(C);
    for (I64 j = 0; j < C; ++j) xb[j] = BFloat16(static_cast<float>(j % 11) * 0.3f);
    call(*kb, {xb.data(), yb.data()}, {C}, 0, 1);
    double sum = 0;
    for (auto v : yb) sum += static_cast<float>(v);
    CHECK(sum == doctest::Approx(1.0).epsilon(0.02));
}

TEST_CASE("llvm: bailouts are enumerated, never exceptions") {
    auto r1 = tier().compile(map_kernel(DType::i32, DType::i32, [](ExprRef x) { return unary(UnaryOp::exp, x); }), {});
    CHECK(r1.bailout == Bailout::unsupported_op);
    CHECK(r1.kernel == nullptr);
    Kernel k2 = map_kernel(DType::f32, DType::f32, [](ExprRef x) { return x; });
    k2.body = {store(1, outer(), load(0, Type::f64, outer()))};  // load type != buffer's compute type
    CHECK(tier().compile(k2, {}).bailout == Bailout::unsupported_dtype);
    Kernel k3 = map_kernel(DType::f32, DType::f32, [](ExprRef x) { return x; });
    k3.body = {store(1, var(3), load(0, Type::f32, outer()))};  // variable out of scope
    auto r3 = tier().compile(k3, {});
    CHECK(r3.bailout == Bailout::backend_error);
    MESSAGE("malformed kernel: " << r3.detail);
    auto r4 = tier().compile(map_kernel(DType::f32, DType::f32, [](ExprRef x) {
                                 return binary(BinaryOp::logical_and, x, x);
                             }),
                             {});
    CHECK(r4.bailout == Bailout::unsupported_op);
}

TEST_CASE("llvm: the injected-failure hook") {
    Kernel k = map_kernel(DType::f32, DType::f32, [](ExprRef x) { return unary(UnaryOp::neg, x); });
    tiers::set_llvm_fail_next_compiles(2);
    CHECK(tier().compile(k, {}).bailout == Bailout::injected_failure);
    CHECK(tier().compile(k, {}).bailout == Bailout::injected_failure);
    CHECK(tier().compile(k, {}).bailout == Bailout::none);
}

namespace {
long rss_kb() {
    std::ifstream f("/proc/self/statm");
    long pages = 0, resident = 0;
    f >> pages >> resident;
    return resident * 4;
}
}  // namespace

TEST_CASE("llvm: dropping kernels frees their code (compile many times without growth)") {
    Kernel k = softmax_kernel(DType::f32);
    std::vector<float> x(64, 1.0f), y(64);
    auto cycle = [&] {
        auto ck = compile_ok(k);
        call(*ck, {x.data(), y.data()}, {64}, 0, 1);
        CHECK(y[0] == doctest::Approx(1.0 / 64));
    };
    for (int i = 0; i < 30; ++i) cycle();
    const long before = rss_kb();
    for (int i = 0; i < 300; ++i) cycle();
    const long growth = rss_kb() - before;
    MESSAGE("RSS growth over 300 compile/free cycles: " << growth << " KiB");
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // The sanitizers keep freed memory in quarantine, so RSS says nothing here; LeakSanitizer
    // checks the frees instead.
    kiln::test::skip("the RSS check: sanitizers keep freed memory in quarantine");
#else
    CHECK(growth < 1536);  // keeping the kernels instead grows RSS by ~3.6 MiB (~12 KiB each)
#endif
}

TEST_CASE("llvm: compiles from 4 threads at once") { tier_test::check_concurrent_compiles(tier(), 5); }

TEST_CASE("llvm: KILN_DUMP=perf lists each kernel in the process's perf map") {
    // Linux perf names samples in JIT code from /tmp/perf-<pid>.map: "<start> <size> <name>",
    // hex. A compiled kernel gets one line, and so does one loaded from its object.
    const std::filesystem::path map = "/tmp/perf-" + std::to_string(::getpid()) + ".map";
    std::filesystem::remove(map);
    tiers::LlvmTierOptions opt;
    opt.dump_perf = true;
    auto t = tiers::make_llvm_tier(opt);
    Kernel k = map_kernel(DType::f32, DType::f32, [](ExprRef x) { return unary(UnaryOp::exp, x); });
    k.name = "perf_listed";
    const tiers::CompileResult r = t->compile(k, {});
    REQUIRE(r.bailout == Bailout::none);
    REQUIRE(t->load(r.object, r.symbol).bailout == Bailout::none);
    auto plain = tiers::make_llvm_tier();  // without the option: no line
    Kernel other = k;
    other.name = "perf_unlisted";
    REQUIRE(plain->compile(other, {}).bailout == Bailout::none);
    std::ifstream f(map);
    REQUIRE(f.good());
    int listed = 0;
    for (std::string line; std::getline(f, line);) {
        CAPTURE(line);
        std::istringstream in(line);
        std::string start, size, name;
        in >> start >> size >> name;
        CHECK(name.find("perf_unlisted") == std::string::npos);
        if (name != "kiln_perf_listed") continue;
        ++listed;
        CHECK(std::stoull(start, nullptr, 16) != 0);
        CHECK(std::stoull(size, nullptr, 16) > 0);
    }
    CHECK(listed == 2);
    f.close();
    std::filesystem::remove(map);
}

TEST_CASE("llvm: loops vectorise (dumped IR and assembly)") {
    const auto dir = std::filesystem::temp_directory_path() / ("kiln_llvm_dump_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    tiers::LlvmTierOptions opt;
    opt.dump_llvm = opt.dump_asm = true;
    opt.dump_dir = dir.string();
    auto t = tiers::make_llvm_tier(opt);
    Kernel k = map_kernel(DType::f32, DType::f32, [](ExprRef x) {
        return binary(BinaryOp::mul, unary(UnaryOp::gelu_tanh, x), unary(UnaryOp::sigmoid, x));
    });
    k.name = "gelu_x_sigmoid";
    REQUIRE(t->compile(k, {}).bailout == Bailout::none);
    REQUIRE(t->compile(softmax_kernel(DType::f32), {}).bailout == Bailout::none);
    REQUIRE(t->compile(tier_test::row_extreme_kernel(true, -HUGE_VAL), {}).bailout == Bailout::none);
    auto slurp = [](const std::filesystem::path& p) {
        std::ifstream f(p);
        return std::string(std::istreambuf_iterator<char>(f), {});
    };
    std::string ll, s, softmax_ll, extreme_ll;
    for (auto& e : std::filesystem::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        const bool softmax = name.rfind("softmax_row.", 0) == 0, extreme = name.rfind("row_extreme.", 0) == 0;
        if (e.path().extension() == ".ll") (softmax ? softmax_ll : extreme ? extreme_ll : ll) = slurp(e.path());
        if (e.path().extension() == ".s" && !softmax && !extreme) s = slurp(e.path());
    }
    std::filesystem::remove_all(dir);
    REQUIRE(!ll.empty());
    REQUIRE(!s.empty());
    const bool vec_ir = ll.find("<16 x float>") != std::string::npos || ll.find("<8 x float>") != std::string::npos ||
                        ll.find("<4 x float>") != std::string::npos;
    CHECK(vec_ir);
    MESSAGE("vector registers in the assembly: zmm " << (s.find("zmm") != std::string::npos) << ", ymm "
                                                     << (s.find("ymm") != std::string::npos));
    CHECK(ll.find("call float @") == std::string::npos);  // no scalar libm call in the f32 path
    // The row reductions of softmax (max, then sum) vectorise too.
    CHECK(softmax_ll.find("llvm.vector.reduce.fmaximum") != std::string::npos);
    CHECK(softmax_ll.find("llvm.vector.reduce.fadd") != std::string::npos);
    // So does a max that skips NaN (lowered softmax rows), as a plain max reduction.
    CHECK(extreme_ll.find("llvm.vector.reduce.fmax") != std::string::npos);
    // Row kernels prefetch the next row (one outer index ahead); flat maps do not.
    CHECK(softmax_ll.find("llvm.prefetch") != std::string::npos);
    CHECK(ll.find("llvm.prefetch") == std::string::npos);
}

TEST_CASE("llvm: compile latency (measured, not asserted)") {
    std::vector<Kernel> ks;
    ks.push_back(softmax_kernel(DType::f32));
    ks.push_back(map_kernel(DType::f32, DType::f32, [](ExprRef x) {
        return binary(BinaryOp::mul, unary(UnaryOp::gelu_tanh, x), unary(UnaryOp::sigmoid, x));
    }));
    ks.push_back(map_kernel(DType::f32, DType::f32, [](ExprRef x) { return binary(BinaryOp::add, x, x); }));
    ks.push_back(map_kernel(DType::f16, DType::f16, [](ExprRef x) { return unary(UnaryOp::exp, x); }));
    std::vector<double> ms;
    for (int rep = 0; rep < 5; ++rep)
        for (const auto& k : ks) {
            auto r = tier().compile(k, {});
            REQUIRE(r.bailout == Bailout::none);
            ms.push_back(r.compile_ms);
        }
    std::sort(ms.begin(), ms.end());
    MESSAGE("LLVM compile latency over " << ms.size() << " compiles: median " << ms[ms.size() / 2] << " ms, p90 "
                                         << ms[ms.size() * 9 / 10] << " ms, max " << ms.back() << " ms");
}

#else

// Every case of this file needs the LLVM tier's headers: in a build without it, one case stands for them.
TEST_CASE("llvm: tier tests") { kiln::test::lacks_tier(2); }

#endif
