#pragma once
// The depthwise convolution kernels (depthwise.h, DwPlan in gemm.h) over a traits type S
// (simd_kernels.h's conventions), included by simd_kernels.h after its copy_n and fill_n:
// the band kernel dw_planes and its taps (dw_taps), the direct 3 x 3 rows (dw_direct3,
// dw_direct3s2), and the channel-lane path for small planes (dw_channels, with dw_run and
// dw_channel_runs for 5-column filters).
// (Its includers include these first, outside their instruction-set region: simd_kernels.h.)
#include "src/core/scalar_ops.h"
#include "src/cpu/vmath_coeffs.h"

#include <cstdint>
#include <type_traits>

namespace kiln::cpu::simd {

// SiLU, x / (1 + exp(-x)), of each lane. The f32 vector traits (their bit operations:
// min_bits, exp2_bits, div in simd_avx2.cpp, simd_avx512.cpp) compute it as tier 2 does
// (tiers/llvm/vmath.cpp, exp_sigmoid_f32, whose comment derives each step): x clamped to
// [-89, 87] by two integer minimums on its bits (a NaN x reaches the quotient through the
// numerator), n = round(-x log2e) through the magic constant, q = x + n ln2 in two parts,
// exp(-x) = (1 + q g(q)) 2^n with g the Horner steps of kExpSigmoidP in q with alternating
// signs, one division. The other traits: lane by lane, as the interpreter (scalar::silu).
template <class S> inline typename S::V dw_silu(typename S::V v) {
    using V = typename S::V;
    if constexpr (requires { S::exp2_bits(v); }) {
        using vmath::kExpSigmoidP;
        const V z = S::min_bits(v, 0xC2B20000u, 0x42AE0000);  // the bits of -89.0f and 87.0f
        const V magic = S::set1(12582912.0f + 127.0f), one = S::set1(1.0f);
        const V t = S::fma(z, S::set1(-1.44269504088896341f), magic);
        const V n = S::sub(t, magic);
        V q = S::fma(n, S::set1(0.693359375f), z);
        q = S::fma(n, S::set1(-2.12194440e-4f), q);
        V p = S::set1(-kExpSigmoidP[0]);
        p = S::fma(p, q, S::set1(kExpSigmoidP[1]));
        p = S::fma(p, q, S::set1(-kExpSigmoidP[2]));
        p = S::fma(p, q, S::set1(kExpSigmoidP[3]));
        p = S::fma(p, q, S::set1(-kExpSigmoidP[4]));
        return S::div(v, S::fma(S::fma(p, q, one), S::exp2_bits(t), one));
    } else {
        alignas(64) typename S::T lanes[S::W];
        S::store(lanes, v);
        for (auto& x : lanes) x = core::scalar::silu(x);
        return S::load(lanes);
    }
}

// What the depthwise kernels apply to each output vector as they store it (DwPlan): the
// clamp to [lo, hi], then SiLU where kSilu. A template argument, not a flag: SiLU's code in
// a kernel's loop, even where not taken, ran the loops without it up to 17% slower at 256
// bits (registers), so each kernel is made once without and once with it.
template <class S, bool kSilu> struct DwFinish {
    typename S::V lo, hi;
    explicit DwFinish(const DwPlan& pl) {
        const typename S::T l = typename S::T(pl.lo), h = typename S::T(pl.hi);
        lo = S::bcast(&l);
        hi = S::bcast(&h);
    }
    [[gnu::always_inline]] typename S::V operator()(typename S::V v) const {
        v = S::clamp(v, lo, hi);
        if constexpr (kSilu) v = dw_silu<S>(v);
        return v;
    }
};

// flat[q] = fin(init + sum over taps t of w[t] * (pixel q of tap t)) for the flat
// positions q < n of a depthwise band (dw_planes), tap t = i * kw + j at in(i, j), `fin`
// the plan's clamp and SiLU (DwFinish).
template <class S, class Tap, class Fin>
void dw_taps(const Im2colShape& g, std::int64_t n, Tap in_of, const typename S::T* w, typename S::T init,
             typename S::T* flat, const Fin& fin) {
    using T = typename S::T;
    using V = typename S::V;
    using I64 = std::int64_t;
    constexpr int W = S::W, U = 4;
    const V vinit = S::bcast(&init);
    if (g.kh == 3 && g.kw == 3) {  // the nine weights stay in registers
        const T* in[9];
        V wv[9];
#pragma GCC unroll 9
        for (int t = 0; t < 9; ++t) {
            in[t] = in_of(t / 3, t % 3);
            wv[t] = S::bcast(w + t);
        }
        I64 q = 0;
        for (; q + U * W <= n; q += U * W) {
            V acc[U];
#pragma GCC unroll 4
            for (int u = 0; u < U; ++u) acc[u] = vinit;
#pragma GCC unroll 9
            for (int t = 0; t < 9; ++t)
#pragma GCC unroll 4
                for (int u = 0; u < U; ++u) acc[u] = S::fma(wv[t], S::load(in[t] + q + u * W), acc[u]);
#pragma GCC unroll 4
            for (int u = 0; u < U; ++u) S::store(flat + q + u * W, fin(acc[u]));
        }
        for (; q < n; q += W) {  // the last vector reads and writes into the slack
            V acc = vinit;
#pragma GCC unroll 9
            for (int t = 0; t < 9; ++t) acc = S::fma(wv[t], S::load(in[t] + q), acc);
            S::store(flat + q, fin(acc));
        }
        return;
    }
    // Any other filter: the taps in chunks of kTapChunk (pointers on the stack), the first
    // chunk from init, the next ones adding to the flat output.
    constexpr I64 kTapChunk = 64;
    const T* in[kTapChunk];
    const I64 taps = g.kh * g.kw;
    for (I64 t0 = 0; t0 < taps; t0 += kTapChunk) {
        const I64 nt = taps - t0 < kTapChunk ? taps - t0 : kTapChunk;
        for (I64 t = 0; t < nt; ++t) in[t] = in_of((t0 + t) / g.kw, (t0 + t) % g.kw);
        const T* wt = w + t0;
        const bool last = t0 + nt == taps;  // the sums are whole: finished as stored
        for (I64 q = 0; q < n; q += U * W) {
            V acc[U];
#pragma GCC unroll 4
            for (int u = 0; u < U; ++u) acc[u] = t0 == 0 ? vinit : S::load(flat + q + u * W);
            for (I64 t = 0; t < nt; ++t) {
                const V wv = S::bcast(wt + t);
#pragma GCC unroll 4
                for (int u = 0; u < U; ++u) acc[u] = S::fma(wv, S::load(in[t] + q + u * W), acc[u]);
            }
#pragma GCC unroll 4
            for (int u = 0; u < U; ++u) S::store(flat + q + u * W, last ? fin(acc[u]) : acc[u]);
        }
    }
}

// The direct 3 x 3 kernels' U vectors of two output rows (dw_direct3, dw_direct3s2): a0 at
// o, and where `two`, a1 one output row (ld) below, clamped to [vlo, vhi] (their SiLU comes
// after each plane: dw_silu_row).
template <class S, int U>
inline void dw_store_pair(const typename S::V (&a0)[U], const typename S::V (&a1)[U], typename S::T* o, std::int64_t ld,
                          bool two, typename S::V vlo, typename S::V vhi) {
#pragma GCC unroll 2
    for (int u = 0; u < U; ++u) {
        S::store(o + u * S::W, S::clamp(a0[u], vlo, vhi));
        if (two) S::store(o + ld + u * S::W, S::clamp(a1[u], vlo, vhi));
    }
}

// SiLU in place over the n >= W values at p: run over each plane of the direct 3 x 3 kernels
// after them, while it is in L1 (SiLU's code inside their loop, taken or not, ran them up to
// 1.5x slower: 144 channels at 56 x 56, AMD EPYC Zen 4). The last vector, which may overlap
// the ones before it, is taken from the values before any changed and stored last, so that
// no value is put through twice.
template <class S> void dw_silu_row(typename S::T* p, std::int64_t n) {
    using V = typename S::V;
    constexpr int W = S::W;
    const std::int64_t last = n - W;
    const V tail = dw_silu<S>(S::load(p + last));
    std::int64_t i = 0;
    for (; i + 2 * W <= last; i += 2 * W) {
        const V v0 = dw_silu<S>(S::load(p + i)), v1 = dw_silu<S>(S::load(p + i + W));
        S::store(p + i, v0);
        S::store(p + i + W, v1);
    }
    for (; i < last; i += W) S::store(p + i, dw_silu<S>(S::load(p + i)));
    S::store(p + last, tail);
}

// Output rows [y0, y1) of one depthwise plane whose filter is 3 x 3 with stride 1, padding 1
// and dilation 1 (the output plane is the input's h x w), read straight from the input plane
// x into out + (y - y0) * w: no band, no flat output. Output row r reads input rows r - 1 to
// r + 1, a row outside the plane from `zeros` (w + 2 zeros from zeros[-1] on). Along a row,
// tap column j of the vector at column c is the input from column c + j - 1: the row's first
// vector takes its left neighbour column as zero (load_from) and its last, which ends at the
// row's last pixel and may overlap the one before it (w >= W), its right one (load_n), so no
// lane reads across rows or writes outside the row. Two output rows at a time share the
// loads of their two common input rows (12 loads for 18 FMAs), two vectors along the row keep
// four accumulator chains in flight. The taps accumulate from init in filter order, as in
// dw_taps, so both paths give the same values (a row outside the plane adds w * 0).
template <class S>
void dw_direct3(const typename S::T* x, std::int64_t h, std::int64_t w, std::int64_t ow, std::int64_t y0,
                std::int64_t y1, const typename S::T* wt, typename S::T init, typename S::T* out,
                const typename S::T* zeros, typename S::T lo, typename S::T hi) {
    (void)ow;  // == w (the signature of dw_direct3s2, so that dw_planes picks either)
    using T = typename S::T;
    using V = typename S::V;
    using I64 = std::int64_t;
    constexpr int W = S::W;
    V wv[9];
#pragma GCC unroll 9
    for (int t = 0; t < 9; ++t) wv[t] = S::bcast(wt + t);
    const V vinit = S::bcast(&init), vlo = S::bcast(&lo), vhi = S::bcast(&hi);
    auto row_at = [&](I64 iy) { return iy >= 0 && iy < h ? x + iy * w : zeros; };
    // U vectors from column c of output rows r and (two) r + 1; in[i]: input row r - 1 + i.
    auto block = [&](auto u_tag, const T* const* in, T* o, I64 c, bool two, bool left, bool right) {
        constexpr int U = decltype(u_tag)::value;
        V a0[U], a1[U];
#pragma GCC unroll 2
        for (int u = 0; u < U; ++u) a0[u] = a1[u] = vinit;
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
            if (i == 3 && !two) break;
#pragma GCC unroll 3
            for (int j = 0; j < 3; ++j)
#pragma GCC unroll 2
                for (int u = 0; u < U; ++u) {
                    const T* p = in[i] + c + u * W + j - 1;
                    const V v = j == 0 && u == 0 && left        ? S::load_from(p, 1)
                                : j == 2 && u == U - 1 && right ? S::load_n(p, W - 1)
                                                                : S::load(p);
                    if (i < 3) a0[u] = S::fma(wv[i * 3 + j], v, a0[u]);
                    if (i > 0) a1[u] = S::fma(wv[(i - 1) * 3 + j], v, a1[u]);
                }
        }
        dw_store_pair<S, U>(a0, a1, o + c, w, two, vlo, vhi);
    };
    constexpr std::integral_constant<int, 1> one{};
    constexpr std::integral_constant<int, 2> pair{};
    for (I64 r = y0; r < y1; r += 2) {
        const bool two = r + 1 < y1;
        const T* in[4] = {row_at(r - 1), row_at(r), row_at(r + 1), row_at(r + 2)};
        T* o = out + (r - y0) * w;
        if (w == W) {
            block(one, in, o, 0, two, true, true);
            continue;
        }
        block(one, in, o, 0, two, true, false);
        I64 c = W;
        for (; c + 2 * W < w; c += 2 * W) block(pair, in, o, c, two, false, false);
        for (; c + W < w; c += W) block(one, in, o, c, two, false, false);
        block(one, in, o, w - W, two, false, true);
    }
}

// dw_direct3 for stride 2 (3 x 3, padding 1, dilation 1; output ow = ceil(w / 2) columns):
// output rows [y0, y1) straight from the input plane into out + (y - y0) * ow. Output row r
// reads input rows 2r - 1 to 2r + 1; two output rows at a time share input row 2r + 1.
// Output column c's taps read input columns 2c - 1, 2c and 2c + 1: per input row and vector,
// 2W consecutive inputs split into their even (tap column 1) and odd (tap column 2) lanes,
// and the odd lanes moved up one with the input before them (tap column 0; zero at the row's
// start). A row's last vector ends at its last output (overlapping the one before it,
// ow >= W) and reads no further than the row's end (masked). The taps accumulate from init in
// filter order, as in dw_taps. (One template for both strides, the taps chosen per stride,
// ran the stride-1 path 7-40% slower on AMD EPYC Zen 4, so the two stay apart.)
template <class S>
void dw_direct3s2(const typename S::T* x, std::int64_t h, std::int64_t w, std::int64_t ow, std::int64_t y0,
                  std::int64_t y1, const typename S::T* wt, typename S::T init, typename S::T* out,
                  const typename S::T* zeros, typename S::T lo, typename S::T hi) {
    using T = typename S::T;
    using V = typename S::V;
    using I64 = std::int64_t;
    constexpr int W = S::W;
    V wv[9];
#pragma GCC unroll 9
    for (int t = 0; t < 9; ++t) wv[t] = S::bcast(wt + t);
    const V vinit = S::bcast(&init), vlo = S::bcast(&lo), vhi = S::bcast(&hi);
    auto row_at = [&](I64 iy) { return iy >= 0 && iy < h ? x + iy * w : zeros; };
    // U vectors from output column c of output rows r and (two) r + 1; in[k]: input row 2r - 1 + k.
    auto block = [&](auto u_tag, const T* const* in, T* o, I64 c, bool two) {
        constexpr int U = decltype(u_tag)::value;
        V a0[U], a1[U];
#pragma GCC unroll 2
        for (int u = 0; u < U; ++u) a0[u] = a1[u] = vinit;
#pragma GCC unroll 5
        for (int k = 0; k < 5; ++k) {
            if (k == 3 && !two) break;
#pragma GCC unroll 2
            for (int u = 0; u < U; ++u) {
                const I64 col = 2 * (c + u * W);
                const I64 n = w - col < 2 * W ? w - col : 2 * W;
                V v[3];
                S::deint(in[k] + col, n, v[1], v[2]);
                v[0] = S::shift_in(v[2], col > 0 ? in[k][col - 1] : T(0));
#pragma GCC unroll 3
                for (int j = 0; j < 3; ++j) {
                    if (k < 3) a0[u] = S::fma(wv[k * 3 + j], v[j], a0[u]);
                    if (k >= 2) a1[u] = S::fma(wv[(k - 2) * 3 + j], v[j], a1[u]);
                }
            }
        }
        dw_store_pair<S, U>(a0, a1, o + c, ow, two, vlo, vhi);
    };
    constexpr std::integral_constant<int, 1> one{};
    constexpr std::integral_constant<int, 2> pair{};
    for (I64 r = y0; r < y1; r += 2) {
        const bool two = r + 1 < y1;
        const T* in[5] = {row_at(2 * r - 1), row_at(2 * r), row_at(2 * r + 1), row_at(2 * r + 2), row_at(2 * r + 3)};
        T* o = out + (r - y0) * ow;
        I64 c = 0;
        for (; c + 2 * W <= ow; c += 2 * W) block(pair, in, o, c, two);
        for (; c + W <= ow; c += W) block(one, in, o, c, two);
        if (c < ow) block(one, in, o, ow - W, two);
    }
}

// The channel-lane path (dw_channels) writes its outputs in blocks of n <= W pixels, r[j]
// holding pixel j's W channels, as the first nc channels' rows of n values at dst (ld
// apart). A block of at most kDwTail pixels (a plane's last few: 49 pixels are 3 blocks of 16
// and one) is stored lane by lane, without the W x W transpose (dw_store_lanes; r[0..n)
// read); the others transposed (dw_store_rows, r transposed in place).
template <int W> inline constexpr int kDwTail = W >= 4 ? W / 4 : 1;

template <class S>
[[gnu::always_inline]] inline void dw_store_lanes(const typename S::V* r, std::int64_t n, std::int64_t nc,
                                                  typename S::T* dst, std::int64_t ld) {
    for (std::int64_t j = 0; j < n; ++j) {
        alignas(64) typename S::T lanes[S::W];
        S::store(lanes, r[j]);
        for (std::int64_t k = 0; k < nc; ++k) dst[k * ld + j] = lanes[k];
    }
}

template <class S>
[[gnu::always_inline]] inline void dw_store_rows(typename S::V (&r)[S::W], std::int64_t n, std::int64_t nc,
                                                 typename S::T* dst, std::int64_t ld) {
    S::transpose(r);
    for (std::int64_t k = 0; k < nc; ++k) {
        if (n == S::W) S::store(dst + k * ld, r[k]);
        else S::store_n(dst + k * ld, r[k], n);
    }
}

// One run of R output pixels of one output row in dw_channels (DwPlan::runs): `in` is the
// run's first input vector in the pixel-major buffer (filter row 0), its rows `pitch` values
// apart; wt the transposed filters (tap t at wt + t * W). With KW filter columns (dilation 1)
// and column stride SW fixed, each input vector of a filter row is loaded once for every tap
// and pixel that reads it ((R - 1) SW + KW loads per filter row, not R KW), the row's KW
// weights in registers. Every pixel accumulates its taps from init in filter order, as the
// other paths do, so all give the same values. Stored finished, pixel after pixel, at o.
template <class S, int R, int KW, int SW, class Fin>
[[gnu::always_inline]] inline void dw_run(const typename S::T* in, std::int64_t pitch, std::int64_t kh,
                                          std::int64_t dh, const typename S::T* wt, typename S::V init,
                                          const Fin& fin, typename S::T* o) {
    using V = typename S::V;
    constexpr int W = S::W;
    V acc[R];
#pragma GCC unroll 16
    for (int j = 0; j < R; ++j) acc[j] = init;
    for (std::int64_t i = 0; i < kh; ++i) {
        const typename S::T* row = in + i * dh * pitch;
        V wv[KW];
#pragma GCC unroll 8
        for (int kx = 0; kx < KW; ++kx) wv[kx] = S::load(wt + (i * KW + kx) * W);
        // Input column m is tap m - j SW of the pixels j with 0 <= m - j SW < KW, taken in
        // increasing j: each pixel's taps come in increasing kx.
#pragma GCC unroll 64
        for (int m = 0; m < (R - 1) * SW + KW; ++m) {
            const V v = S::load(row + m * W);
            const int jlo = m < KW ? 0 : (m - KW + SW) / SW, jhi = m / SW < R - 1 ? m / SW : R - 1;
#pragma GCC unroll 16
            for (int j = jlo; j <= jhi; ++j) acc[j] = S::fma(wv[m - j * SW], v, acc[j]);
        }
    }
#pragma GCC unroll 16
    for (int j = 0; j < R; ++j) S::store(o + j * W, fin(acc[j]));
}

// dw_channels' output pixels [p0, p1) of one group of nc <= W channels in runs (DwPlan::runs:
// 5 filter columns, column stride 1):
// buf holds the group's padded input rows from the first one the outputs read (pitch pl.cw
// pixels of W lanes), wt its transposed filters. Each output row runs in kDwRun-pixel runs
// (dw_run; a row's last run overlaps the one before it, or reaches past the row into the
// zero columns) into a pixel-major buffer after the filters, which is transposed back, W
// pixels at a time across rows, into the channels' planes at outs (ld apart).
template <class S, bool kSilu>
void dw_channel_runs(const Im2colShape& g, const DwPlan& pl, const typename S::T* buf, typename S::T* wt,
                     typename S::V init, std::int64_t nc, typename S::T* outs,
                     std::int64_t ld, std::int64_t p0, std::int64_t p1) {
    using T = typename S::T;
    using V = typename S::V;
    using I64 = std::int64_t;
    constexpr int W = S::W, R = kDwRun;
    const I64 ow = g.ow, sh = g.sh, kh = g.kh, dh = g.dh, pitch = pl.cw * W, obp = ow + R;
    const I64 y_first = p0 / ow, y_last = (p1 - 1) / ow;
    T* obuf = wt + kh * g.kw * W;  // (y_last - y_first + 1) x obp output pixels of W lanes
    // The runs clamp as they store; SiLU comes as the pixels are gathered for the transpose
    // out, W independent vectors (at each run's store it ran 5x5 at 14 x 14 over 672 channels
    // 6% slower at 256 bits, AMD EPYC Zen 4).
    const DwFinish<S, false> clamp(pl);
    for (I64 y = y_first; y <= y_last; ++y) {
        const I64 xa = y == y_first ? p0 % ow : 0, xb = y == y_last ? (p1 - 1) % ow + 1 : ow;
        const T* in = buf + (y - y_first) * sh * pitch;
        T* o = obuf + (y - y_first) * obp * W;
        for (I64 x0 = xa;; x0 += R) {
            const I64 xr = x0 + R < xb ? x0 : (xb - R > xa ? xb - R : xa);
            dw_run<S, R, 5, 1>(in + xr * W, pitch, kh, dh, wt, init, clamp, o + xr * W);
            if (xr + R >= xb) break;
        }
    }
    const V vzero = S::zero();
    I64 oy = 0, ox = p0 % ow;
    for (I64 b = p0; b < p1; b += W) {
        const I64 n = p1 - b < W ? p1 - b : W;
        V r[W];
#pragma GCC unroll 16
        for (int j = 0; j < W; ++j) {
            r[j] = vzero;
            if (j < n) {
                r[j] = S::load(obuf + (oy * obp + ox) * W);
                if (++ox == ow) {
                    ox = 0;
                    ++oy;
                }
            }
        }
        if constexpr (kSilu) {
#pragma GCC unroll 16
            for (int j = 0; j < W; ++j) r[j] = dw_silu<S>(r[j]);
        }
        if (n <= kDwTail<W>) dw_store_lanes<S>(r, n, nc, outs + (b - p0), ld);
        else dw_store_rows<S>(r, n, nc, outs + (b - p0), ld);
    }
}

// The taps of a block of W output pixels of one output row in dw_channels: pixel j's tap t
// at at + toff[t] + j * SW * W (SW the column stride), one pointer a tap and constant
// offsets, where a pointer per pixel spilled registers in the tap loop at 256 bits. The taps
// accumulate in filter order, as on the other paths. (Not for 3 x 3 filters: their loop
// keeps the nine weight vectors in registers, and ran slower this way.)
template <class S, int SW>
[[gnu::always_inline]] inline void dw_row_taps(const typename S::T* at, const std::int64_t* toff, std::int64_t taps,
                                               const typename S::T* wt, typename S::V (&o)[S::W]) {
    constexpr int W = S::W;
    for (std::int64_t t = 0; t < taps; ++t) {
        const typename S::V wv = S::load(wt + t * W);
        const typename S::T* p = at + toff[t];
#pragma GCC unroll 16
        for (int j = 0; j < W; ++j) o[j] = S::fma(wv, S::load(p + j * SW * W), o[j]);
    }
}

// dw_planes with the channels across the lanes (DwPlan::chan: small planes, whose rows fill
// few vectors). Per group of W channels: the padded input rows that outputs [p0, p1) read
// are transposed into a zero-padded pixel-major buffer (W values per pixel, one per channel;
// cw pixels per row), the filters into one vector of W weights per tap; then each block of W
// output pixels (across output rows) keeps W accumulators, one vector FMA per pixel and tap,
// and is transposed back into W runs of the channels' planes. The taps accumulate from init
// in filter order, as in dw_taps, so both paths give the same values.
template <class S, bool kSilu>
void dw_channels(const Im2colShape& g, const DwPlan& pl, std::int64_t nch, const typename S::T* const* xs,
                 const typename S::T* const* ws, const typename S::T* inits, typename S::T* outs, std::int64_t ld,
                 std::int64_t p0, std::int64_t p1, typename S::T* scratch) {
    using T = typename S::T;
    using V = typename S::V;
    using I64 = std::int64_t;
    constexpr int W = S::W;
    // The geometry in locals: the vector stores may alias anything, so that fields read
    // through g would be loaded again after each one.
    const I64 h = g.h, w = g.w, ow = g.ow, kw = g.kw, sh = g.sh, sw = g.sw, ph = g.ph, pw = g.pw, dh = g.dh, dw = g.dw;
    const I64 taps = g.kh * kw, cw = pl.cw;
    // A block of at most kTail pixels skips the W x W transposes, in and out, and computes
    // kTail pixels, not W (kDwTail).
    constexpr int kTail = kDwTail<W>;
    const I64 y_first = p0 / ow, y_last = (p1 - 1) / ow;
    const I64 row0 = y_first * sh;                                     // first padded row read
    const I64 nrows = (y_last - y_first) * sh + (g.kh - 1) * dh + 1;  // padded rows read
    T* buf = scratch;                  // nrows x cw pixels of W lanes
    T* wt = buf + nrows * cw * W;      // taps x W weights
    I64 toff[kDwChanTaps];             // tap t at pixel base + toff[t] (DwPlan::chan: taps <= kDwChanTaps)
    for (I64 t = 0; t < taps; ++t) toff[t] = ((t / kw) * dh * cw + (t % kw) * dw) * W;
    // The input rows inside the plane, and where input column ix lands (padded column ix + pw,
    // kept where the taps reach it).
    const I64 iy_lo = row0 - ph > 0 ? row0 - ph : 0;
    const I64 iy_hi = row0 - ph + nrows < h ? row0 - ph + nrows : h;
    const V vzero = S::zero();
    const DwFinish<S, kSilu> fin(pl);  // the outputs' clamp and SiLU
    for (I64 c0 = 0; c0 < nch; c0 += W) {
        const I64 nc = nch - c0 < W ? nch - c0 : W;
        // The filters transposed: W taps of the W channels at a time.
        for (I64 t0 = 0; t0 < taps; t0 += W) {
            const I64 n = taps - t0 < W ? taps - t0 : W;
            V r[W];
#pragma GCC unroll 16
            for (int k = 0; k < W; ++k) r[k] = k < nc ? S::load_n(ws[c0 + k] + t0, n) : vzero;
            S::transpose(r);
            for (I64 t = 0; t < n; ++t) S::store(wt + (t0 + t) * W, r[t]);
        }
        // Zeros where no input pixel lands: the padded rows above and below the input rows,
        // and the padded columns beside them.
        const I64 in_lo = iy_lo + ph - row0, in_hi = iy_hi + ph - row0;  // buffer rows of input
        const I64 right = pw + w < cw ? pw + w : cw;                     // columns [pw, right) hold input
        for (I64 i = 0; i < in_lo * cw; ++i) S::store(buf + i * W, vzero);
        for (I64 i = (in_hi > in_lo ? in_hi : in_lo) * cw; i < nrows * cw; ++i) S::store(buf + i * W, vzero);
        for (I64 r = in_lo; r < in_hi; ++r) {
            T* row = buf + r * cw * W;
            for (I64 c = 0; c < pw && c < cw; ++c) S::store(row + c * W, vzero);
            for (I64 c = right; c < cw; ++c) S::store(row + c * W, vzero);
        }
        // Transpose in: W consecutive input pixels of the W channels at a time. A block
        // inside one input row whose pixels the taps all read (up to padded column cw - 1)
        // is stored as one run, its vectors indexed by constants; the others pixel by pixel
        // (which took the vectors through the stack: 144 channels at 56 x 56, 5x5 stride 2,
        // 256 bits, AMD EPYC Zen 4: 204 -> 175 us with this, 135 with dw_row_taps too).
        const I64 q_end = iy_hi * w, reach = cw - pw < w ? cw - pw : w;  // input columns read
        I64 x = 0;
        T* d = buf + ((iy_lo + ph - row0) * cw + pw) * W;  // input pixel (iy_lo, 0)
        for (I64 q = iy_lo * w; q < q_end; q += W) {
            const I64 n = q_end - q < W ? q_end - q : W;
            V r[W];
            if (n <= kTail) {  // a few pixels: gathered one at a time, not a whole transpose
                for (I64 j = 0; j < n; ++j) {
                    alignas(64) T lanes[W];
                    for (int k = 0; k < W; ++k) lanes[k] = k < nc ? xs[c0 + k][q + j] : T(0);
                    r[j] = S::load(lanes);
                }
            } else {
#pragma GCC unroll 16
                for (int k = 0; k < W; ++k) r[k] = k >= nc ? vzero : n == W ? S::load(xs[c0 + k] + q) : S::load_n(xs[c0 + k] + q, n);
                S::transpose(r);
            }
            if (n == W && x + W <= reach) {  // the whole block in one row, every pixel kept
#pragma GCC unroll 16
                for (int j = 0; j < W; ++j) S::store(d + j * W, r[j]);
                x += W;
                d += W * W;
                if (x == w) {
                    x = 0;
                    d += (cw - w) * W;
                }
                continue;
            }
            for (I64 j = 0; j < n; ++j) {
                if (x < reach) S::store(d, r[j]);
                d += W;
                if (++x == w) {
                    x = 0;
                    d += (cw - w) * W;
                }
            }
        }
        const V init = inits == nullptr ? vzero : S::load_n(inits + c0, nc);
        if (pl.runs) {
            dw_channel_runs<S, kSilu>(g, pl, buf, wt, init, nc, outs + c0 * ld, ld, p0, p1);
            continue;
        }
        // Blocks of W output pixels; the last one repeats its last pixel in the spare lanes.
        I64 ox = p0 % ow;
        const T* at = buf + (((p0 / ow) * sh - row0) * cw + ox * sw) * W;  // output pixel b's first tap
        const I64 next_row = (sh * cw - ow * sw) * W;
        for (I64 b = p0; b < p1; b += W) {
            const I64 n = p1 - b < W ? p1 - b : W;
            // A whole block inside one output row reads its pixels' taps at one pointer and
            // fixed offsets (dw_row_taps); the others through a pointer per pixel.
            const T* row_at = taps != 9 && n == W && ox + W <= ow && (sw == 1 || sw == 2) ? at : nullptr;
            const T* base[W];
            for (int j = 0; j < W; ++j) {
                base[j] = at;
                if (j < n) {
                    at += sw * W;
                    if (++ox == ow) {
                        ox = 0;
                        at += next_row;
                    }
                }
            }
            for (I64 j = n; j < W; ++j) base[j] = base[n - 1];
            if (n <= kTail) {  // a few pixels: kTail of them computed, stored lane by lane
                V o[kTail];
#pragma GCC unroll 4
                for (int j = 0; j < kTail; ++j) o[j] = init;
                for (I64 t = 0; t < taps; ++t) {
                    const V wv = S::load(wt + t * W);
#pragma GCC unroll 4
                    for (int j = 0; j < kTail; ++j) o[j] = S::fma(wv, S::load(base[j] + toff[t]), o[j]);
                }
#pragma GCC unroll 4
                for (int j = 0; j < kTail; ++j) o[j] = fin(o[j]);
                dw_store_lanes<S>(o, n, nc, outs + c0 * ld + (b - p0), ld);
                continue;
            }
            V o[W];
#pragma GCC unroll 16
            for (int j = 0; j < W; ++j) o[j] = init;
            if (row_at != nullptr) {
                if (sw == 1) dw_row_taps<S, 1>(row_at, toff, taps, wt, o);
                else dw_row_taps<S, 2>(row_at, toff, taps, wt, o);
            } else if (taps == 9) {  // a 3 x 3 filter: the nine weight vectors in registers
                V wv[9];
#pragma GCC unroll 9
                for (int t = 0; t < 9; ++t) wv[t] = S::load(wt + t * W);
#pragma GCC unroll 9
                for (int t = 0; t < 9; ++t)
#pragma GCC unroll 16
                    for (int j = 0; j < W; ++j) o[j] = S::fma(wv[t], S::load(base[j] + toff[t]), o[j]);
            } else {
                for (I64 t = 0; t < taps; ++t) {
                    const V wv = S::load(wt + t * W);
#pragma GCC unroll 16
                    for (int j = 0; j < W; ++j) o[j] = S::fma(wv, S::load(base[j] + toff[t]), o[j]);
                }
            }
#pragma GCC unroll 16
            for (int j = 0; j < W; ++j) o[j] = fin(o[j]);
            dw_store_rows<S>(o, n, nc, outs + c0 * ld + (b - p0), ld);
        }
    }
}

// Output pixels [p0, p1) of nch depthwise planes (depthwise.h, DwPlan): plane k from xs[k]
// with the filter ws[k], started from inits[k] (0 without inits), into outs + k * ld. Per
// band of output rows, the input rows the band reads are copied into pr x pc zero-padded
// phase planes of pitch wq (phase (a, b): padded input rows v * sh + a, columns u * sw + b;
// one plane for stride 1), so that tap (i, j) of output pixel (y, x) is element
// (y + i * dh / sh) * wq + x + j * dw / sw of phase ((i * dh) % sh, (j * dw) % sw): the
// band's pixels, read as one flat row q = y * wq + x, take one unit-stride vector load per
// tap. The taps accumulate in registers from init (dw_taps); the flat output's x >= ow
// lanes are computed and dropped when the rows are copied out.
template <class S>
void dw_planes(const Im2colShape& g, const DwPlan& pl, std::int64_t nch, const typename S::T* const* xs,
               const typename S::T* const* ws, const typename S::T* inits, typename S::T* outs, std::int64_t ld,
               std::int64_t p0, std::int64_t p1, typename S::T* scratch) {
    using T = typename S::T;
    using V = typename S::V;
    using I64 = std::int64_t;
    constexpr int W = S::W;
    if (p0 >= p1) return;
    if (pl.chan && 2 * nch >= W)
        return pl.silu ? dw_channels<S, true>(g, pl, nch, xs, ws, inits, outs, ld, p0, p1, scratch)
                       : dw_channels<S, false>(g, pl, nch, xs, ws, inits, outs, ld, p0, p1, scratch);
    const I64 wq = pl.wq, nph = pl.pr * pl.pc;
    T* band = scratch;
    T* flat = band + nph * pl.plane;
    const V vzero = S::zero();
    const DwFinish<S, false> fin(pl);      // the outputs' clamp
    const DwFinish<S, true> fin_silu(pl);  // and SiLU
    // Column phase b, element u: padded column u * sw + b, input column u * sw + b - pw;
    // span[b]: the u inside the input row, [lo, hi).
    struct Span { I64 lo, hi; };
    auto span_of = [&](I64 b) {
        const I64 off = b - g.pw;
        I64 lo = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
        I64 hi = g.w - 1 - off < 0 ? lo : (g.w - 1 - off) / g.sw + 1;
        lo = lo < wq ? lo : wq;
        hi = hi < wq ? hi : wq;
        return Span{lo, hi > lo ? hi : lo};
    };
    constexpr I64 kSpans = 8;
    Span span[kSpans];
    for (I64 b = 0; b < pl.pc && b < kSpans; ++b) span[b] = span_of(b);
    const T* x = xs[0];  // the plane being built, and its end
    const T* x_end = x;
    // One input row (or zeros outside the plane) into row dst of each column phase. Whole,
    // unmasked vector stores only (a masked store is slow on some cores): a row's last
    // vector runs over into the next row, written after it, or into the slack, zeroed after
    // the band's last row. The input is read straight from its rows, never from values just
    // stored (a load spanning several recent stores waits for them to retire); a row's last
    // vector may read on into the next input row (its lanes past the row zeroed), except
    // at the end of the plane.
    auto put_row = [&](I64 iy, T* dst) {
        const bool inside = iy >= 0 && iy < g.h;
        const T* src = inside ? x + iy * g.w : x;
        for (I64 b = 0; b < pl.pc; ++b) {
            T* d = dst + b * pl.plane;
            const Span sp = !inside ? Span{wq, wq} : b < kSpans ? span[b] : span_of(b);
            const T* s0 = src + (b - g.pw);  // s0[u * sw]: element u
            for (I64 u = 0; u < sp.lo; u += W) S::store(d + u, vzero);
            I64 u = sp.lo;
            if (g.sw == 1) {
                for (; u + W <= sp.hi; u += W) S::store(d + u, S::load(s0 + u));
                if (u < sp.hi) {
                    const V v = s0 + u + W <= x_end ? S::load(s0 + u) : S::load_n(s0 + u, sp.hi - u);
                    S::store(d + u, S::head(v, sp.hi - u));
                    u += W;
                }
            } else if (g.sw == 2) {
                // (load2 reads the odd element after the last one it keeps: not past the plane)
                for (; u + W <= sp.hi && s0 + 2 * (u + W) <= x_end; u += W) S::store(d + u, S::load2(s0 + 2 * u));
                if (u < sp.hi) {
                    V v;
                    if (s0 + 2 * (u + W) <= x_end) {
                        v = S::load2(s0 + 2 * u);
                    } else {  // at the end of the plane: the rest of it through a zeroed pair of vectors
                        alignas(64) T pair[2 * W];
                        const I64 left = x_end - (s0 + 2 * u);
                        S::store(pair, S::load_n(s0 + 2 * u, left < W ? left : W));
                        S::store(pair + W, S::load_n(s0 + 2 * u + W, left > W ? left - W : 0));
                        v = S::load2(pair);
                    }
                    S::store(d + u, S::head(v, sp.hi - u));
                    u += W;
                }
            } else {
                for (; u < sp.hi; ++u) d[u] = s0[u * g.sw];
            }
            for (; u < wq; u += W) S::store(d + u, vzero);
        }
    };
    // Tap (i, j) at band + row_off[i] + col_off[j]: the divisions once per call, not per band
    // (for the first kOffs filter rows and columns; larger filters compute the rest per band).
    constexpr I64 kOffs = 32;
    auto row_part = [&](I64 i) { return (i * g.dh % g.sh) * pl.pc * pl.plane + (i * g.dh / g.sh) * wq; };
    auto col_part = [&](I64 j) { return (j * g.dw % g.sw) * pl.plane + j * g.dw / g.sw; };
    I64 row_off[kOffs], col_off[kOffs];
    for (I64 i = 0; i < g.kh && i < kOffs; ++i) row_off[i] = row_part(i);
    for (I64 j = 0; j < g.kw && j < kOffs; ++j) col_off[j] = col_part(j);
    auto tap = [&](I64 i, I64 j) -> const T* {
        return band + (i < kOffs ? row_off[i] : row_part(i)) + (j < kOffs ? col_off[j] : col_part(j));
    };
    const I64 y_first = p0 / g.ow, y_last = (p1 - 1) / g.ow;
    // A 3 x 3 filter of stride 1 or 2 and padding 1 over whole output rows: straight from the
    // input plane (dw_direct3, dw_direct3s2), with a row of zeros in the scratch for the rows
    // outside it (zeros from scratch[0] on, so that the kernels may read one before a row).
    const bool direct = g.kh == 3 && g.kw == 3 && g.sh == g.sw && (g.sh == 1 || g.sh == 2) && g.dh == 1 && g.dw == 1 &&
                        g.ph == 1 && g.pw == 1 && g.ow == (g.w + g.sw - 1) / g.sw && g.ow >= W && p0 % g.ow == 0 &&
                        p1 % g.ow == 0;
    if (direct) {
        fill_n<S>(scratch, g.w + 2, T(0));
        const auto run = g.sh == 1 ? &dw_direct3<S> : &dw_direct3s2<S>;
        for (I64 k = 0; k < nch; ++k) {
            run(xs[k], g.h, g.w, g.ow, p0 / g.ow, p1 / g.ow, ws[k], inits != nullptr ? inits[k] : T(0), outs + k * ld,
                scratch + 1, T(pl.lo), T(pl.hi));
            if (pl.silu) dw_silu_row<S>(outs + k * ld, p1 - p0);  // the plane's rows, still in L1
        }
        return;
    }
    for (I64 k = 0; k < nch; ++k) {
        x = xs[k];
        x_end = x + g.h * g.w;
        const T* w = ws[k];
        const T init = inits != nullptr ? inits[k] : T(0);
        T* out = outs + k * ld;
        for (I64 y0 = y_first; y0 <= y_last; y0 += pl.rows) {
            const I64 nrows = pl.rows < y_last + 1 - y0 ? pl.rows : y_last + 1 - y0;
            const I64 n = (nrows - 1) * wq + g.ow;  // flat positions of the band's pixels
            const I64 brows = nrows + pl.oy;        // phase rows of the band
            for (I64 a = 0; a < pl.pr; ++a) {
                T* plane_a = band + a * pl.pc * pl.plane;
                for (I64 r = 0; r < brows; ++r) put_row((y0 + r) * g.sh + a - g.ph, plane_a + r * wq);
                for (I64 b = 0; b < pl.pc; ++b) fill_n<S>(plane_a + b * pl.plane + brows * wq, pl.slack, T(0));
            }
            if (pl.silu) dw_taps<S>(g, n, tap, w, init, flat, fin_silu);
            else dw_taps<S>(g, n, tap, w, init, flat, fin);
            for (I64 r = 0; r < nrows; ++r) {
                const I64 y = y0 + r;
                const I64 lo = p0 > y * g.ow ? p0 : y * g.ow, hi = p1 < (y + 1) * g.ow ? p1 : (y + 1) * g.ow;
                if (lo >= hi) continue;
                const T* f = flat + r * wq + (lo - y * g.ow);
                T* o = out + (lo - p0);
                // Whole vectors run over into the next row's outputs (written after this row),
                // never past p1.
                if (lo + (hi - lo + W - 1) / W * W > p1) {
                    copy_n<S>(f, hi - lo, o);
                    continue;
                }
                for (I64 i = 0; i < hi - lo; i += W) S::store(o + i, S::load(f + i));
            }
        }
    }
}

}  // namespace kiln::cpu::simd
