// src/cpu's blocked-layout convolution (src/cpu/conv_nchwc.h) against its formula in double
// precision, for every instruction set the host runs (portable, AVX2, AVX-512): dense and
// depthwise, blocked and NCHW inputs, 1x1 (the image as one row) and k x k with strides,
// padding and dilation, odd channel counts, runs cut by the borders and by the pixel range,
// sub-ranges of blocks and pixels written into a caller's tile (nothing outside it touched);
// and the column sums of the blocked layout's global average pool (src/cpu/col_sum.h).
#include <doctest/doctest.h>

#include "src/cpu/col_sum.h"
#include "src/cpu/conv_nchwc.h"

#include <array>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using kiln::cpu::CpuIsa;
using kiln::cpu::NchwcGeometry;
using I64 = std::int64_t;
constexpr I64 L = kiln::cpu::kNchwcLanes;

double reference(const NchwcGeometry& g, const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                 I64 ob, I64 p, I64 l) {
    const I64 k = (g.depthwise ? 1 : g.cin) * g.kh * g.kw, plane = g.h * g.w, y = p / g.ow, xo = p % g.ow;
    double s = b.empty() ? 0.0 : b[static_cast<std::size_t>(ob * L + l)];
    for (I64 c = 0; c < (g.depthwise ? 1 : g.cin); ++c)
        for (I64 i = 0; i < g.kh; ++i)
            for (I64 j = 0; j < g.kw; ++j) {
                const I64 iy = y * g.sh - g.ph + i * g.dh, ix = xo * g.sw - g.pw + j * g.dw;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                const I64 pix = iy * g.w + ix;
                const I64 at = g.depthwise ? (ob * plane + pix) * L + l
                               : g.blocked_input ? ((c / L) * plane + pix) * L + c % L
                                                 : c * plane + pix;
                s += double(w[static_cast<std::size_t>((ob * k + (c * g.kh + i) * g.kw + j) * L + l)]) *
                     double(x[static_cast<std::size_t>(at)]);
            }
    return s;
}

// The instruction sets this host runs: portable, then AVX2 and AVX-512 where it has them; a
// message names each one it lacks ("its <what> not tested here").
std::vector<CpuIsa> host_isas(const char* what) {
    std::vector<CpuIsa> isas{CpuIsa::portable};
    for (CpuIsa isa : {CpuIsa::avx2, CpuIsa::avx512})
        if (kiln::cpu::cap_cpu_isa(isa) == isa) isas.push_back(isa);
        else MESSAGE("cpu nchwc: the host lacks " << std::string(kiln::cpu::cpu_isa_name(isa)) << "; its " << what << " not tested here");
    return isas;
}

}  // namespace

TEST_CASE("cpu nchwc: the blocked-layout convolution matches its formula on every instruction set") {
    const std::vector<CpuIsa> isas = host_isas("kernel is");
    std::mt19937_64 rng(11);
    auto pick = [&](std::vector<I64> v) { return v[rng() % v.size()]; };
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    int cases = 0;
    for (int it = 0; it < 160; ++it) {
        NchwcGeometry g;
        g.depthwise = it % 4 == 1;
        g.blocked_input = g.depthwise || it % 4 != 2;
        g.silu = it % 3 == 1;  // SiLU as the results are stored, on every kind of conv
        const bool pointwise = !g.depthwise && it % 3 == 0;
        g.kh = pointwise ? 1 : pick({1, 3, 5});
        g.kw = pointwise ? 1 : pick({1, 3, 5});
        g.sh = pointwise ? 1 : pick({1, 2});
        g.sw = pointwise ? 1 : pick({1, 2});
        // (padding up to 3: border pixels whose taps of a row or column all leave the image)
        g.ph = pointwise ? 0 : pick({0, 1, 2, 3});
        g.pw = pointwise ? 0 : pick({0, 1, 2, 3});
        g.dh = g.kh > 1 ? pick({1, 2}) : 1;
        g.dw = 1;
        g.h = pick({1, 3, 7, 14, 20});
        g.w = pick({1, 5, 7, 13, 30});
        g.oh = (g.h + 2 * g.ph - g.dh * (g.kh - 1) - 1);
        g.ow = (g.w + 2 * g.pw - g.dw * (g.kw - 1) - 1);
        if (g.oh < 0 || g.ow < 0) continue;
        g.oh = g.oh / g.sh + 1;
        g.ow = g.ow / g.sw + 1;
        const I64 ob = pick({1, 2, 3, 5});
        g.cin = g.depthwise ? 1 : pick({1, 3, 16, 21, 40});
        const I64 xc = g.depthwise ? ob * L : g.blocked_input ? (g.cin + L - 1) / L * L : g.cin;  // input channels as stored
        const I64 k = (g.depthwise ? 1 : g.cin) * g.kh * g.kw, npix = g.oh * g.ow;
        std::vector<float> x(static_cast<std::size_t>(xc * g.h * g.w)), w(static_cast<std::size_t>(ob * k * L)), b;
        for (float& v : x) v = u(rng);
        for (float& v : w) v = u(rng);
        // The last block's upper 8 channels padding, as the layout pads 24 channels: zero
        // weights.
        const bool tail = !g.depthwise && it % 6 == 5;
        if (tail)
            for (I64 t = 0; t < k; ++t)
                for (I64 l = L / 2; l < L; ++l) w[static_cast<std::size_t>(((ob - 1) * k + t) * L + l)] = 0.0f;
        if (it % 5 != 4) {
            b.resize(static_cast<std::size_t>(ob * L));
            for (float& v : b) v = u(rng);
        }
        // The real channel count inside the last block (conv_nchwc.h, cout): the channels
        // past it 0 before the epilogue, whatever their weights and bias.
        if (!g.depthwise && it % 4 == 3) g.cout = (ob - 1) * L + pick({1, 5, 8, 9, 15});
        // A sub-range of blocks and pixels, into a tile with a guard band after each block.
        const I64 ob0 = static_cast<I64>(rng() % static_cast<std::uint64_t>(ob)), ob1 = ob0 + 1 + static_cast<I64>(rng() % static_cast<std::uint64_t>(ob - ob0));
        const I64 p0 = static_cast<I64>(rng() % static_cast<std::uint64_t>(npix)), p1 = p0 + 1 + static_cast<I64>(rng() % static_cast<std::uint64_t>(npix - p0));
        const I64 ldb = (p1 - p0) * L + 8;
        std::vector<float> res;  // a residual laid out as the output, on every kind of conv
        if (it % 7 < 3) {
            res.resize(static_cast<std::size_t>((ob1 - ob0) * ldb));
            for (float& v : res) v = u(rng);
            g.residual = res.data();
        }
        const std::string what = "case " + std::to_string(it) + (g.depthwise ? " depthwise" : g.blocked_input ? " blocked" : " nchw") +
                                 (g.silu ? " silu" : "") + (g.residual ? " residual" : "") + (tail ? " zero tail" : "") +
                                 (g.cout < ob * L ? " cout " + std::to_string(g.cout) : "") +
                                 " cin " + std::to_string(g.cin) + " " + std::to_string(g.h) + "x" + std::to_string(g.w) + " k " +
                                 std::to_string(g.kh) + "x" + std::to_string(g.kw) + " s " + std::to_string(g.sh) + "x" +
                                 std::to_string(g.sw) + " p " + std::to_string(g.ph) + "x" + std::to_string(g.pw) + " d " +
                                 std::to_string(g.dh) + " blocks [" + std::to_string(ob0) + "," + std::to_string(ob1) +
                                 ") pixels [" + std::to_string(p0) + "," + std::to_string(p1) + ")";
        for (CpuIsa isa : isas) {
            std::vector<float> out(static_cast<std::size_t>((ob1 - ob0) * ldb), 12345.0f);
            kiln::cpu::conv_nchwc_f32(isa, g, x.data(), w.data(), b.empty() ? nullptr : b.data(), out.data(), ldb, ob0, ob1, p0, p1);
            int bad = 0;
            for (I64 o = ob0; o < ob1; ++o) {
                for (I64 p = p0; p < p1; ++p)
                    for (I64 l = 0; l < L; ++l) {
                        double want = o * L + l < g.cout ? reference(g, x, w, b, o, p, l) : 0.0;
                        if (g.residual) want += double(res[static_cast<std::size_t>((o - ob0) * ldb + (p - p0) * L + l)]);
                        if (g.silu) want = want / (1.0 + std::exp(-want));
                        const double got = out[static_cast<std::size_t>((o - ob0) * ldb + (p - p0) * L + l)];
                        if (std::abs(got - want) > 1e-5 * (1.0 + double(k)) && bad++ < 3)
                            FAIL_CHECK(std::string(kiln::cpu::cpu_isa_name(isa)) << " " << what << ": block " << o << " pixel " << p
                                                                   << " lane " << l << ": " << got << ", want " << want);
                    }
                for (I64 e = (p1 - p0) * L; e < ldb; ++e)
                    if (out[static_cast<std::size_t>((o - ob0) * ldb + e)] != 12345.0f && bad++ < 3)
                        FAIL_CHECK(std::string(kiln::cpu::cpu_isa_name(isa)) << " " << what << ": wrote past the range in block " << o);
            }
            CHECK_MESSAGE(bad == 0, std::string(kiln::cpu::cpu_isa_name(isa)) << " " << what);
        }
        ++cases;
    }
    CHECK(cases >= 120);
}

// src/cpu/col_sum.h: the blocked layout's global average pool sums each of the 16 lanes of
// a block over the pixels, in double (tiers/interp/reduce.cpp). The kernels must give the
// interpreter's plain loop bit for bit: each column from 0.0, rows in order.
// A channel whose weights are all zero (padding past the last real channel, or a pruned
// filter) still sums 0 * x: an infinite input makes it NaN, as in the formula and the
// interpreter, on every instruction set (no shortcut that skips zero weights).
TEST_CASE("cpu nchwc: zero weights times an infinite input give NaN on every instruction set") {
    const std::vector<CpuIsa> isas = host_isas("NaN propagation is");
    NchwcGeometry g;
    g.cin = 3;
    g.blocked_input = false;
    g.h = g.w = g.oh = g.ow = 4;
    const I64 npix = g.oh * g.ow;
    std::vector<float> x(static_cast<std::size_t>(g.cin * npix), 0.5f), w(static_cast<std::size_t>(g.cin * L), 0.0f);
    for (I64 c = 0; c < g.cin; ++c)
        for (I64 l = 0; l < L / 2; ++l) w[static_cast<std::size_t>(c * L + l)] = 0.25f;  // upper 8 channels: zero
    x[static_cast<std::size_t>(1 * npix + 5)] = std::numeric_limits<float>::infinity();  // channel 1, pixel 5
    for (CpuIsa isa : isas) {
        std::vector<float> out(static_cast<std::size_t>(npix * L), 1.0f);
        kiln::cpu::conv_nchwc_f32(isa, g, x.data(), w.data(), nullptr, out.data(), npix * L, 0, 1, 0, npix);
        const std::string name(kiln::cpu::cpu_isa_name(isa));
        for (I64 p = 0; p < npix; ++p)
            for (I64 l = 0; l < L; ++l) {
                const float v = out[static_cast<std::size_t>(p * L + l)];
                if (p == 5) CHECK_MESSAGE((l < L / 2 ? std::isinf(v) : std::isnan(v)), name << " lane " << l << ": " << v);
                else CHECK_MESSAGE(v == (l < L / 2 ? 0.375f : 0.0f), name << " pixel " << p << " lane " << l << ": " << v);
            }
    }
}

// With the real channel count given (cout), the channels past it are 0 before the epilogue:
// an infinite input leaves them 0 (no 0 * inf), on every instruction set; those below it see
// it as before. Fails where a kernel computes the padding lanes (NaN) or skips real ones.
TEST_CASE("cpu nchwc: channels past the real count are 0 whatever the inputs on every instruction set") {
    const std::vector<CpuIsa> isas = host_isas("real channel count is");
    for (I64 cout : {I64{5}, I64{8}, I64{12}, I64{24}}) {
        NchwcGeometry g;
        g.cin = 3;
        g.blocked_input = false;
        g.h = g.w = g.oh = g.ow = 4;
        g.cout = cout;
        const I64 npix = g.oh * g.ow, ob = (cout + L - 1) / L;
        std::vector<float> x(static_cast<std::size_t>(g.cin * npix), 0.5f), w(static_cast<std::size_t>(ob * g.cin * L), 0.25f);
        std::vector<float> b(static_cast<std::size_t>(ob * L), 1.0f);  // (padding bias not 0: still 0 out)
        x[static_cast<std::size_t>(1 * npix + 5)] = std::numeric_limits<float>::infinity();  // channel 1, pixel 5
        for (CpuIsa isa : isas) {
            std::vector<float> out(static_cast<std::size_t>(ob * npix * L), -7.0f);
            kiln::cpu::conv_nchwc_f32(isa, g, x.data(), w.data(), b.data(), out.data(), npix * L, 0, ob, 0, npix);
            const std::string name(kiln::cpu::cpu_isa_name(isa));
            for (I64 o = 0; o < ob; ++o)
                for (I64 p = 0; p < npix; ++p)
                    for (I64 l = 0; l < L; ++l) {
                        const float v = out[static_cast<std::size_t>((o * npix + p) * L + l)];
                        if (o * L + l >= cout) CHECK_MESSAGE(v == 0.0f, name << " cout " << cout << " channel " << o * L + l << " pixel " << p << ": " << v);
                        else if (p == 5) CHECK_MESSAGE(std::isinf(v), name << " cout " << cout << " channel " << o * L + l << ": " << v);
                        else CHECK_MESSAGE(v == 1.375f, name << " cout " << cout << " channel " << o * L + l << " pixel " << p << ": " << v);
                    }
        }
    }
}

TEST_CASE("cpu nchwc: column sums in double equal the plain loop bit for bit on every instruction set") {
    const std::vector<CpuIsa> isas = host_isas("column sums are");
    std::mt19937_64 rng(5);
    // Values of mixed magnitudes, so that the order of the additions shows in the bits.
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::uniform_int_distribution<int> e(-60, 60);  // wider than double's 53 bits: sums round
    const std::vector<std::array<I64, 3>> shapes{{1, 1, 1},  {3, 7, 16},  {2, 49, 16}, {5, 196, 16}, {1, 3, 1},
                                                 {4, 9, 5},  {2, 11, 37}, {3, 0, 16},  {1, 5, 64},   {7, 13, 24},
                                                 {1, 2, 200}, {9, 4, 8}};
    for (const auto& [a, r, b] : shapes) {
        std::vector<float> x(static_cast<std::size_t>(a * r * b));
        for (float& v : x) v = std::ldexp(u(rng), e(rng));
        std::vector<double> want(static_cast<std::size_t>(a * b));
        for (I64 i = 0; i < a; ++i)
            for (I64 j = 0; j < b; ++j) {
                double s = 0.0;
                for (I64 k = 0; k < r; ++k) s += double(x[static_cast<std::size_t>((i * r + k) * b + j)]);
                want[static_cast<std::size_t>(i * b + j)] = s;
            }
        for (CpuIsa isa : isas) {
            CAPTURE(std::string(kiln::cpu::cpu_isa_name(isa)));
            CAPTURE(a);
            CAPTURE(r);
            CAPTURE(b);
            std::vector<double> got(want.size() + 1, -7.0);  // one past the end: must stay untouched
            kiln::cpu::col_sum_f32(isa, x.data(), a, r, b, got.data());
            for (std::size_t t = 0; t < want.size(); ++t) REQUIRE(std::memcmp(&got[t], &want[t], sizeof(double)) == 0);
            CHECK(got.back() == -7.0);
        }
    }
}
