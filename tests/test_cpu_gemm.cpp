// The host GEMM and depthwise row kernels (src/cpu/gemm.h), for every kernel set
// this CPU runs (portable, AVX2 + FMA, AVX-512F; the others are skipped with the reason),
// against plain double-precision loops: sizes on both sides of every register tile and
// cache block, strided blocks (nothing outside C's block may change), accumulation into a
// non-zero C, NaN rows and columns, and the choice of instruction set.
#include <doctest/doctest.h>

#include "skip.h"
#include "src/core/scalar_ops.h"
#include "src/cpu/depthwise.h"
#include "src/cpu/gemm.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using I64 = std::int64_t;
using kiln::cpu::CpuIsa;

constexpr CpuIsa kAllIsas[] = {CpuIsa::portable, CpuIsa::avx2, CpuIsa::avx512};

// The kernel sets this host runs; skips the others with the reason.
std::vector<CpuIsa> runnable_isas() {
    std::vector<CpuIsa> out;
    for (CpuIsa isa : kAllIsas) {
        if (kiln::cpu::cap_cpu_isa(isa) == isa) out.push_back(isa);
        else kiln::test::skip(std::string("this CPU does not run the ") + kiln::cpu::cpu_isa_name(isa) + " kernels");
    }
    return out;
}

template <class T> std::vector<T> random_values(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> d(0.0, 1.0);
    std::vector<T> v(n);
    for (T& x : v) x = static_cast<T>(d(rng));
    return v;
}

constexpr double kGuard = 12345.0;  // the value of every C element outside the block

// Runs gemm_acc on an m x n x k problem stored with padded leading dimensions and checks
// every element of C against the double sum (bound: (k + 2) eps * sum |a||b| + eps |c|)
// and that the padding of C is untouched. Returns false on the first bad element.
// With packed_b, B is handed over in gemm_acc_packed_b's layout (panels of nr columns over
// the whole depth, zero past n) instead.
template <class T> bool check_gemm(CpuIsa isa, I64 m, I64 n, I64 k, std::uint64_t seed, bool packed_b = false) {
    const I64 lda = k + 3, ldb = n + 5, ldc = n + 2;
    const std::vector<T> a = random_values<T>(static_cast<std::size_t>(m * lda), seed);
    const std::vector<T> b = random_values<T>(static_cast<std::size_t>(k * ldb), seed + 1);
    std::vector<T> c(static_cast<std::size_t>(m * ldc), static_cast<T>(kGuard));
    const std::vector<T> c0 = random_values<T>(static_cast<std::size_t>(m * n), seed + 2);
    for (I64 i = 0; i < m; ++i)
        for (I64 j = 0; j < n; ++j) c[static_cast<std::size_t>(i * ldc + j)] = c0[static_cast<std::size_t>(i * n + j)];
    if (packed_b) {
        const I64 nr = kiln::cpu::simd_kernels<T>(isa).nr, panels = (n + nr - 1) / nr;
        std::vector<T> bp(static_cast<std::size_t>(panels * k * nr), T(0));
        for (I64 p = 0; p < k; ++p)
            for (I64 j = 0; j < n; ++j)
                bp[static_cast<std::size_t>((j / nr) * k * nr + p * nr + j % nr)] = b[static_cast<std::size_t>(p * ldb + j)];
        kiln::cpu::gemm_acc_packed_b<T>(isa, m, n, k, a.data(), lda, bp.data(), c.data(), ldc);
    } else {
        kiln::cpu::gemm_acc<T>(isa, m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc);
    }
    const double eps = std::numeric_limits<T>::epsilon();
    for (I64 i = 0; i < m; ++i)
        for (I64 j = 0; j < ldc; ++j) {
            const double got = static_cast<double>(c[static_cast<std::size_t>(i * ldc + j)]);
            if (j >= n) {
                if (got != kGuard) {
                    FAIL_CHECK("gemm wrote outside C: m=" << m << " n=" << n << " k=" << k << " at (" << i << ", " << j << ")");
                    return false;
                }
                continue;
            }
            const double c_in = static_cast<double>(c0[static_cast<std::size_t>(i * n + j)]);
            double want = c_in, mag = 0;
            for (I64 p = 0; p < k; ++p) {
                const double prod = static_cast<double>(a[static_cast<std::size_t>(i * lda + p)]) *
                                    static_cast<double>(b[static_cast<std::size_t>(p * ldb + j)]);
                want += prod;
                mag += std::fabs(prod);
            }
            const double bound = double(k + 2) * eps * mag + 2 * eps * std::fabs(c_in);
            if (!(std::fabs(got - want) <= bound)) {
                FAIL_CHECK("gemm: m=" << m << " n=" << n << " k=" << k << " C(" << i << ", " << j << ") = " << got
                                      << ", want " << want << " (bound " << bound << ")");
                return false;
            }
        }
    return true;
}

const std::vector<I64> kEdgeSizes{1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 15, 16, 17, 23, 24, 25, 31, 32, 33, 37, 40};

}  // namespace

TEST_CASE("cpu gemm: every kernel set against double loops, sizes 1..40 around the register tiles") {
    for (CpuIsa isa : runnable_isas()) {
        INFO("isa = ", kiln::cpu::cpu_isa_name(isa));
        std::uint64_t seed = 7000;
        bool ok = true;
        for (I64 m : kEdgeSizes)
            for (I64 n : kEdgeSizes)
                for (I64 k : {1, 2, 3, 5, 8, 13, 31, 40}) {
                    seed += 3;
                    if (ok) ok = check_gemm<float>(isa, m, n, k, seed) && check_gemm<double>(isa, m, n, k, seed);
                }
        CHECK(ok);
    }
}

TEST_CASE("cpu gemm: sizes across the cache blocks (KC, MC, NC) and k = 0") {
    for (CpuIsa isa : runnable_isas()) {
        INFO("isa = ", kiln::cpu::cpu_isa_name(isa));
        // m past MC (144) and k past KC (256); n past the f64 NC (512) and f32 NC (1024).
        CHECK(check_gemm<float>(isa, 150, 37, 300, 1));
        CHECK(check_gemm<double>(isa, 149, 41, 259, 2));
        CHECK(check_gemm<float>(isa, 13, 1030, 20, 3));
        CHECK(check_gemm<double>(isa, 7, 530, 17, 4));
        CHECK(check_gemm<float>(isa, 3, 1037, 513, 5));  // the streamed path across KC blocks
        CHECK(check_gemm<float>(isa, 5, 7, 0, 6));       // k = 0 leaves C as it was
    }
}

TEST_CASE("cpu gemm: with B already packed (conv2d's im2col), small sizes and across the cache blocks") {
    for (CpuIsa isa : runnable_isas()) {
        INFO("isa = ", kiln::cpu::cpu_isa_name(isa));
        std::uint64_t seed = 8000;
        bool ok = true;
        for (I64 m : {1, 2, 5, 6, 7, 12, 13, 25})
            for (I64 n : {1, 7, 8, 16, 17, 33, 40})
                for (I64 k : {1, 3, 27, 40}) {
                    seed += 3;
                    if (ok) ok = check_gemm<float>(isa, m, n, k, seed, true) && check_gemm<double>(isa, m, n, k, seed, true);
                }
        CHECK(ok);
        CHECK(check_gemm<float>(isa, 150, 1030, 300, 9, true));
        CHECK(check_gemm<double>(isa, 20, 530, 270, 10, true));
    }
}

TEST_CASE("cpu gemm: a NaN in row i of A (column j of B) makes row i (column j) of C NaN, and nothing else") {
    for (CpuIsa isa : runnable_isas()) {
        INFO("isa = ", kiln::cpu::cpu_isa_name(isa));
        for (I64 m : {1, 3, 5, 13}) {
            const I64 n = 19, k = 11;
            CAPTURE(m);
            std::vector<float> a = random_values<float>(static_cast<std::size_t>(m * k), 90 + static_cast<std::uint64_t>(m));
            std::vector<float> b = random_values<float>(static_cast<std::size_t>(k * n), 91);
            const I64 bad_row = m / 2, bad_col = 17;
            a[static_cast<std::size_t>(bad_row * k + 4)] = std::numeric_limits<float>::quiet_NaN();
            b[static_cast<std::size_t>(6 * n + bad_col)] = std::numeric_limits<float>::quiet_NaN();
            std::vector<float> c(static_cast<std::size_t>(m * n), 0.f);
            kiln::cpu::gemm_acc<float>(isa, m, n, k, a.data(), k, b.data(), n, c.data(), n);
            for (I64 i = 0; i < m; ++i)
                for (I64 j = 0; j < n; ++j) {
                    CAPTURE(i);
                    CAPTURE(j);
                    CHECK(std::isnan(c[static_cast<std::size_t>(i * n + j)]) == (i == bad_row || j == bad_col));
                }
        }
    }
}

// depthwise_plane for one geometry against double loops: every output pixel of [p0, p1),
// the plane read through an exact-size buffer (a read outside it is a heap overflow under
// AddressSanitizer), nothing written outside [0, p1 - p0).
template <class T>
void check_depthwise(CpuIsa isa, const kiln::cpu::Im2colShape& g, I64 oh, I64 p0, I64 p1, std::uint64_t seed) {
    const std::vector<T> x = random_values<T>(static_cast<std::size_t>(g.h * g.w), seed);
    const std::vector<T> w = random_values<T>(static_cast<std::size_t>(g.kh * g.kw), seed + 1);
    const T init = T(0.25);
    std::vector<T> out(static_cast<std::size_t>(p1 - p0 + 8), T(-7));
    const kiln::cpu::DwPlan plan = kiln::cpu::depthwise_plan(g);
    std::vector<T> scratch(static_cast<std::size_t>(plan.scratch_elems));
    kiln::cpu::depthwise_plane<T>(isa, g, plan, x.data(), w.data(), init, out.data(), p0, p1, scratch.data());
    const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-13;
    for (I64 p = p0; p < p1; ++p) {
        const I64 y = p / g.ow, xo = p % g.ow;
        REQUIRE(y < oh);
        double want = init, mag = std::fabs(double(init));
        for (I64 i = 0; i < g.kh; ++i)
            for (I64 j = 0; j < g.kw; ++j) {
                const I64 iy = y * g.sh - g.ph + i * g.dh, ix = xo * g.sw - g.pw + j * g.dw;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                const double t = double(w[static_cast<std::size_t>(i * g.kw + j)]) * double(x[static_cast<std::size_t>(iy * g.w + ix)]);
                want += t;
                mag += std::fabs(t);
            }
        CAPTURE(p);
        CHECK(std::fabs(double(out[static_cast<std::size_t>(p - p0)]) - want) <= tol * (1 + mag));
    }
    for (std::size_t i = static_cast<std::size_t>(p1 - p0); i < out.size(); ++i) CHECK(out[i] == T(-7));
}

TEST_CASE("cpu gemm: the depthwise plane kernel against double loops (strides 1-3, pads, dilations, filters up to 17 rows, pixel runs)") {
    std::mt19937_64 rng(77);
    auto pick = [&](I64 lo, I64 hi) { return lo + static_cast<I64>(rng() % static_cast<std::uint64_t>(hi - lo + 1)); };
    for (CpuIsa isa : runnable_isas()) {
        INFO("isa = ", kiln::cpu::cpu_isa_name(isa));
        std::uint64_t seed = 900;
        // The shapes of real networks (mobilenet's 3x3 at 112..7, stride 1 and 2; efficientnet's 5x5),
        // then random geometries.
        struct Case { I64 hw, k, s, p, d; };
        std::vector<Case> cases = {{112, 3, 1, 1, 1}, {112, 3, 2, 1, 1}, {56, 3, 2, 1, 1}, {28, 5, 1, 2, 1}, {14, 3, 1, 1, 1},
                                   {14, 5, 2, 2, 1}, {7, 3, 1, 1, 1},   {7, 5, 1, 2, 1},  {9, 3, 1, 0, 1},  {33, 3, 1, 2, 2}};
        for (int r = 0; r < 300; ++r) cases.push_back({pick(1, 40), pick(1, 7), pick(1, 3), pick(0, 3), pick(1, 3)});
        for (const Case& c : cases)
            for (int tall = 0; tall < 2; ++tall) {
                kiln::cpu::Im2colShape g;
                g.c = 1;
                g.h = tall ? c.hw + 17 : c.hw;
                g.w = c.hw + (tall ? 3 : 0);
                g.kh = tall ? 17 : c.k;  // more filter rows than the kernel takes in one call
                g.kw = c.k;
                g.sh = g.sw = c.s;
                if (tall) g.sw = 1;  // unequal strides: row by row
                g.ph = g.pw = c.p;
                g.dh = g.dw = c.d;
                const I64 oh = (g.h + 2 * g.ph - (g.kh - 1) * g.dh - 1) / g.sh + 1;
                g.ow = (g.w + 2 * g.pw - (g.kw - 1) * g.dw - 1) / g.sw + 1;
                if (oh <= 0 || g.ow <= 0 || g.h + 2 * g.ph < (g.kh - 1) * g.dh + 1 || g.w + 2 * g.pw < (g.kw - 1) * g.dw + 1)
                    continue;
                CAPTURE(g.h);
                CAPTURE(g.w);
                CAPTURE(g.kh);
                CAPTURE(g.kw);
                CAPTURE(g.sh);
                CAPTURE(g.sw);
                CAPTURE(g.ph);
                CAPTURE(g.dh);
                const I64 npix = oh * g.ow;
                check_depthwise<float>(isa, g, oh, 0, npix, ++seed);
                check_depthwise<double>(isa, g, oh, 0, npix, ++seed);
                // A run of pixels starting and ending inside rows (tiers 1 and 2 split planes so).
                const I64 p0 = pick(0, npix - 1), p1 = pick(p0 + 1, npix);
                check_depthwise<float>(isa, g, oh, p0, p1, ++seed);
            }
    }
}

// depthwise_planes: several planes of one geometry in one call (each its own input, filter
// and start value, outputs ld apart), the same values as one plane per call, nothing
// written between the planes' outputs.
// Small planes run with the channels across the lanes (DwPlan::chan) when a call has enough
// planes: random geometries, plane counts and pixel runs cover that path against the other.
TEST_CASE("cpu gemm: the depthwise kernel on several planes per call equals one plane per call") {
    std::mt19937_64 rng(78);
    auto pick = [&](I64 lo, I64 hi) { return lo + static_cast<I64>(rng() % static_cast<std::uint64_t>(hi - lo + 1)); };
    for (CpuIsa isa : runnable_isas()) {
        INFO("isa = ", kiln::cpu::cpu_isa_name(isa));
        struct Case { I64 hw, k, s, p, d = 1, nch = 19; bool run = false; };  // run: a random run of pixels
        // (5 x 5 of stride 1: the channel lanes' runs of pixels, DwPlan::runs; rows of 4 pixels
        // shorter than a run, of 15 and 29 not a whole number of runs.)
        std::vector<Case> cases = {{7, 3, 1, 1}, {14, 3, 2, 1}, {9, 5, 1, 2}, {13, 5, 2, 2}, {20, 3, 3, 0}, {28, 3, 2, 1}, {7, 7, 1, 3},
                                   {3, 5, 1, 2, 1, 16}, {14, 5, 1, 2, 1, 33, true}, {28, 5, 1, 2, 1, 17, true}, {14, 5, 1, 2, 1, 19, true}};
        for (int r = 0; r < 120; ++r) {
            cases.push_back({pick(1, 30), pick(1, 7), pick(1, 3), pick(0, 3), pick(1, 2), pick(1, 20), r % 2 == 1});
        }
        for (const Case& c : cases) {
            kiln::cpu::Im2colShape g{1, c.hw, c.hw + 1, 0, c.k, c.k, c.s, c.s, c.p, c.p, c.d, c.d};
            if (g.h + 2 * c.p < (c.k - 1) * c.d + 1) continue;
            g.ow = (g.w + 2 * c.p - (c.k - 1) * c.d - 1) / c.s + 1;
            const I64 oh = (g.h + 2 * c.p - (c.k - 1) * c.d - 1) / c.s + 1, npix = oh * g.ow, nch = c.nch, ld = npix + 5;
            const I64 p0 = c.run ? pick(0, npix - 1) : std::min<I64>(1, npix - 1);
            const I64 p1 = c.run ? pick(p0 + 1, npix) : npix;
            CAPTURE(c.hw);
            CAPTURE(c.k);
            CAPTURE(c.s);
            CAPTURE(c.p);
            CAPTURE(c.d);
            CAPTURE(nch);
            CAPTURE(p0);
            CAPTURE(p1);
            const std::vector<float> x = random_values<float>(static_cast<std::size_t>(nch * g.h * g.w), 31);
            const std::vector<float> w = random_values<float>(static_cast<std::size_t>(nch * c.k * c.k), 32);
            const std::vector<float> init = random_values<float>(static_cast<std::size_t>(nch), 33);
            std::vector<const float*> xs, ws;
            for (I64 k = 0; k < nch; ++k) {
                xs.push_back(x.data() + k * g.h * g.w);
                ws.push_back(w.data() + k * c.k * c.k);
            }
            const kiln::cpu::DwPlan plan = kiln::cpu::depthwise_plan(g);
            // The scratch as another kernel left it: NaN where the kernel forgot to write.
            std::vector<float> scratch(static_cast<std::size_t>(plan.scratch_elems), std::numeric_limits<float>::quiet_NaN());
            std::vector<float> many(static_cast<std::size_t>(nch * ld), -7.0f), one(static_cast<std::size_t>(npix));
            kiln::cpu::depthwise_planes<float>(isa, g, plan, nch, xs.data(), ws.data(), init.data(), many.data(), ld, p0,
                                               p1, scratch.data());
            for (I64 k = 0; k < nch; ++k) {
                kiln::cpu::depthwise_plane<float>(isa, g, plan, xs[static_cast<std::size_t>(k)], ws[static_cast<std::size_t>(k)],
                                                  init[static_cast<std::size_t>(k)], one.data(), p0, p1, scratch.data());
                CAPTURE(k);
                for (I64 p = 0; p < ld; ++p) {
                    const float got = many[static_cast<std::size_t>(k * ld + p)];
                    if (p < p1 - p0) CHECK(got == one[static_cast<std::size_t>(p)]);
                    else CHECK(got == -7.0f);
                }
            }
        }
    }
}

// The planes x (nch of g.h x g.w) through filters w and from init, with depthwise_plan(g)
// (first) and with `variant`, a copy of it with other bounds or SiLU (second).
template <class T>
std::pair<std::vector<T>, std::vector<T>> depthwise_plain_and(CpuIsa isa, const kiln::cpu::Im2colShape& g, I64 oh,
                                                              I64 nch, const std::vector<T>& x, const std::vector<T>& w,
                                                              const std::vector<T>& init, const kiln::cpu::DwPlan& variant) {
    const I64 npix = oh * g.ow, taps = g.kh * g.kw;
    std::vector<const T*> xs, ws;
    for (I64 k = 0; k < nch; ++k) {
        xs.push_back(x.data() + k * g.h * g.w);
        ws.push_back(w.data() + k * taps);
    }
    const kiln::cpu::DwPlan plain = kiln::cpu::depthwise_plan(g);
    std::vector<T> scratch(static_cast<std::size_t>(plain.scratch_elems));
    std::vector<T> want(static_cast<std::size_t>(nch * npix)), got(want.size());
    kiln::cpu::depthwise_planes<T>(isa, g, plain, nch, xs.data(), ws.data(), init.data(), want.data(), npix, 0, npix,
                                   scratch.data());
    kiln::cpu::depthwise_planes<T>(isa, g, variant, nch, xs.data(), ws.data(), init.data(), got.data(), npix, 0, npix,
                                   scratch.data());
    return {std::move(want), std::move(got)};
}

// A square depthwise geometry of the clamp and SiLU tests: hw x hw planes, k x k filters of
// stride s and padding p, nch planes per call.
struct DwCase {
    I64 hw, k, s, p, nch;
    kiln::cpu::Im2colShape shape() const {
        kiln::cpu::Im2colShape g{1, hw, hw, 0, k, k, s, s, p, p, 1, 1};
        g.ow = (hw + 2 * p - k) / s + 1;
        return g;
    }
    I64 oh() const { return (hw + 2 * p - k) / s + 1; }
};

// The clamp the kernel applies as it stores (DwPlan::lo, hi: a conv's relu6 or Clip):
// for each of its paths, bit for bit the unclamped outputs put through the interpreter's
// maximum and minimum, with NaN, +-inf and -0 among the inputs, a plane of zero weights
// from -0 (outputs of either zero's sign), one bound or both.
template <class T>
void check_depthwise_clamp(CpuIsa isa, const kiln::cpu::Im2colShape& g, I64 oh, I64 nch, double lo, double hi,
                           std::uint64_t seed) {
    using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    const I64 taps = g.kh * g.kw;
    std::vector<T> x = random_values<T>(static_cast<std::size_t>(nch * g.h * g.w), seed);
    std::vector<T> w = random_values<T>(static_cast<std::size_t>(nch * taps), seed + 1);
    std::vector<T> init = random_values<T>(static_cast<std::size_t>(nch), seed + 2);
    for (T& v : x) v *= T(4);  // outputs on both sides of the bounds
    const T specials[] = {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                          -std::numeric_limits<T>::infinity(), T(-0.0)};
    for (std::size_t i = 0; i < 4; ++i) x[(static_cast<std::size_t>(seed) * 7 + i * 131) % x.size()] = specials[i];
    for (I64 t = 0; t < taps; ++t) w[static_cast<std::size_t>(t)] = T(0);  // plane 0: zero weights from -0
    init[0] = T(-0.0);
    kiln::cpu::DwPlan clamped = kiln::cpu::depthwise_plan(g);
    clamped.lo = lo;
    clamped.hi = hi;
    const auto [want, got] = depthwise_plain_and<T>(isa, g, oh, nch, x, w, init, clamped);
    int mismatches = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        const T v = kiln::core::scalar::minimum(kiln::core::scalar::maximum(want[i], T(lo)), T(hi));
        if (std::bit_cast<Bits>(v) != std::bit_cast<Bits>(got[i]) && ++mismatches <= 3)
            FAIL_CHECK("output ", i, ": got ", got[i], ", want ", v, " (unclamped ", want[i], ")");
    }
    CHECK(mismatches == 0);
}

TEST_CASE("cpu gemm: the depthwise kernel clamps as it stores, as maximum and minimum do (every path, NaN, inf, -0)") {
    const double inf = std::numeric_limits<double>::infinity();
    struct Bounds { double lo, hi; };
    const Bounds bounds[] = {{0.0, 6.0}, {-inf, 0.5}, {-1.0, inf}, {0.0, inf}, {2.0, 2.0}};
    // The direct rows at stride 1 and 2, the channel lanes (small planes, enough of them) in
    // blocks and in runs (5 x 5 of stride 1), the flat bands (5 x 5), and a filter of more
    // taps than one chunk (9 x 9).
    const DwCase cases[] = {{28, 3, 1, 1, 3},  {56, 3, 2, 1, 2},  {7, 3, 1, 1, 19}, {14, 5, 2, 2, 17},
                            {14, 5, 1, 2, 17}, {20, 5, 1, 2, 2}, {12, 9, 1, 4, 2}};
    std::uint64_t seed = 4000;
    for (CpuIsa isa : runnable_isas()) {
        INFO("isa = ", kiln::cpu::cpu_isa_name(isa));
        for (const DwCase& c : cases)
            for (const Bounds& b : bounds) {
                CAPTURE(c.hw);
                CAPTURE(c.k);
                CAPTURE(c.s);
                CAPTURE(b.lo);
                CAPTURE(b.hi);
                check_depthwise_clamp<float>(isa, c.shape(), c.oh(), c.nch, b.lo, b.hi, seed += 10);
                check_depthwise_clamp<double>(isa, c.shape(), c.oh(), c.nch, b.lo, b.hi, seed += 10);
            }
    }
}

// SiLU as the kernel stores (DwPlan::silu, a conv's SiLU epilogue applied by the kernel):
// for each path, the plain outputs put through v / (1 + exp(-v)) in double, within 4 ulp of
// T (f32: the vector kernels' exp polynomial, tier 2's; f64: lane by lane in double);
// results below 32 times the smallest normal may be 0 (exp(-v) overflows there); NaN where
// the plain output is NaN or -inf (-inf * 0), inf at inf.
template <class T>
void check_depthwise_silu(CpuIsa isa, const kiln::cpu::Im2colShape& g, I64 oh, I64 nch, std::uint64_t seed) {
    const I64 taps = g.kh * g.kw;
    std::vector<T> x = random_values<T>(static_cast<std::size_t>(nch * g.h * g.w), seed);
    std::vector<T> w = random_values<T>(static_cast<std::size_t>(nch * taps), seed + 1);
    std::vector<T> init = random_values<T>(static_cast<std::size_t>(nch), seed + 2);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] *= T(i % 3 == 0 ? 40 : 4);  // outputs out to about +-100
    const T specials[] = {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                          -std::numeric_limits<T>::infinity()};
    for (std::size_t i = 0; i < 3; ++i) x[(static_cast<std::size_t>(seed) * 7 + i * 131) % x.size()] = specials[i];
    kiln::cpu::DwPlan silu = kiln::cpu::depthwise_plan(g);
    silu.silu = true;
    const auto [want, got] = depthwise_plain_and<T>(isa, g, oh, nch, x, w, init, silu);
    int mismatches = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        const double v = want[i], s = v / (1.0 + std::exp(-v));
        const T sw = static_cast<T>(s);
        bool ok;
        if (std::isnan(v) || v == -std::numeric_limits<double>::infinity()) ok = std::isnan(got[i]);
        else if (std::isinf(v)) ok = got[i] == sw;
        else if (std::fabs(s) < 32 * static_cast<double>(std::numeric_limits<T>::min()))
            ok = std::fabs(got[i]) <= 32 * std::numeric_limits<T>::min();
        else
            ok = std::fabs(static_cast<double>(got[i]) - s) <=
                 4 * (std::nextafter(std::fabs(sw), std::numeric_limits<T>::infinity()) - std::fabs(sw));
        if (!ok && ++mismatches <= 3) FAIL_CHECK("output ", i, ": got ", got[i], ", want ", s, " (plain ", want[i], ")");
    }
    CHECK(mismatches == 0);
}

TEST_CASE("cpu gemm: the depthwise kernel applies SiLU as it stores (every path, NaN, inf)") {
    const DwCase cases[] = {{28, 3, 1, 1, 3},  {56, 3, 2, 1, 2},  {7, 3, 1, 1, 19}, {14, 5, 2, 2, 17},
                            {14, 5, 1, 2, 17}, {20, 5, 1, 2, 2}, {12, 9, 1, 4, 2}, {28, 5, 2, 2, 16}};
    std::uint64_t seed = 6000;
    for (CpuIsa isa : runnable_isas()) {
        INFO("isa = ", kiln::cpu::cpu_isa_name(isa));
        for (const DwCase& c : cases) {
            CAPTURE(c.hw);
            CAPTURE(c.k);
            CAPTURE(c.s);
            check_depthwise_silu<float>(isa, c.shape(), c.oh(), c.nch, seed += 10);
            check_depthwise_silu<double>(isa, c.shape(), c.oh(), c.nch, seed += 10);
        }
    }
}

TEST_CASE("cpu gemm: the instruction set is the best the CPU reports, AVX-512 only where it runs") {
    const CpuIsa host = kiln::cpu::host_cpu_isa();
    MESSAGE("kernel instruction set: " << std::string(kiln::cpu::cpu_isa_name(kiln::cpu::kernel_cpu_isa())));
    // The kernels' set is the host's, capped by KILN_CPU_ISA (tests/test_cpu_isa.cpp).
    const char* env = std::getenv("KILN_CPU_ISA");
    CHECK(kiln::cpu::kernel_cpu_isa() ==
          kiln::cpu::cap_cpu_isa(kiln::cpu::parse_cpu_isa_cap(env ? env : "").value_or(CpuIsa::avx512)));
    CHECK(kiln::cpu::cap_cpu_isa(CpuIsa::portable) == CpuIsa::portable);
    CHECK(kiln::cpu::cap_cpu_isa(CpuIsa::avx512) == host);
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    const bool avx512 = __builtin_cpu_supports("avx512f");
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    CHECK((host == CpuIsa::avx512) == avx512);
    CHECK((host == CpuIsa::avx2) == (avx2 && !avx512));
    // A capped request never exceeds the cap, and the kernel tables say which set they are.
    CHECK(kiln::cpu::simd_kernels<float>(CpuIsa::avx2).isa == (avx2 || avx512 ? CpuIsa::avx2 : CpuIsa::portable));
    CHECK(kiln::cpu::simd_kernels<double>(CpuIsa::avx512).isa == host);
#endif
    CHECK(kiln::cpu::simd_kernels<float>(CpuIsa::portable).isa == CpuIsa::portable);
}

TEST_CASE("cpu gemm: split_gemm covers the product with tile-aligned parts, one part for one thread") {
    using kiln::cpu::split_gemm;
    const auto one = split_gemm(512, 512, 512, 1);
    CHECK(one.row_parts == 1);
    CHECK(one.col_parts == 1);
    for (I64 m : {1, 7, 128, 512, 1000})
        for (I64 n : {1, 33, 1024, 3072})
            for (I64 parts : {1, 2, 8, 64}) {
                CAPTURE(m);
                CAPTURE(n);
                CAPTURE(parts);
                const auto s = split_gemm(m, n, 256, parts);
                CHECK(s.rows_per_part % 12 == 0);
                CHECK(s.cols_per_part % 32 == 0);
                CHECK(s.row_parts * s.rows_per_part >= m);
                CHECK((s.row_parts - 1) * s.rows_per_part < m);
                CHECK(s.col_parts * s.cols_per_part >= n);
                CHECK((s.col_parts - 1) * s.cols_per_part < n);
                CHECK(s.row_parts * s.col_parts <= std::max<I64>(parts, 1) * 2);
            }
    // A row vector splits along its columns.
    const auto gemv = split_gemm(1, 1024, 784, 8);
    CHECK(gemv.row_parts == 1);
    CHECK(gemv.col_parts == 8);
}
