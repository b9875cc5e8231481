#pragma once
// The blocked-layout convolution kernels (conv_nchwc.h) over a traits type S of f32 vectors
// (simd_kernels.h's conventions: S::V, S::W, zero, load, store, bcast, fma). Included by
// simd_<isa>.cpp inside its target region, after simd_kernels.h.
//
// A block of 16 channels is VPB = 16 / W vectors. Dense convs keep R x NB x VPB accumulators
// (R pixels, NB blocks): 12 x 2 x 1 zmm on AVX-512, 6 x 1 x 2 ymm on AVX2, so that each
// broadcast input value feeds two vectors of weights. Depthwise ones keep DR = 8 pixels of
// one vector (a block's VPB vectors one after the other) and load one input vector per
// pixel and tap. A dense conv's last block, where channels lie past g.cout, runs TAIL
// variants: FMAs only for the vectors below it.
#include "src/cpu/conv_nchwc.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

namespace kiln::cpu::simd {

template <class S> struct NchwcShape {
    static constexpr int VPB = int(kNchwcLanes) / S::W;
    static constexpr int R = S::W == 16 ? 12 : 6;   // pixels of a dense run
    static constexpr int NB = S::W == 16 ? 2 : 1;   // blocks of a dense run
    static constexpr int DR = 8;                    // pixels of a depthwise run (of one vector)
};

// What every run of one call reads: the geometry, the sample's tensors, the depth and strides.
struct NchwcArgs {
    const NchwcGeometry* g;
    const float* x;
    const float* w;
    const float* bias;
    float* out;        // block ob0's pixel p0
    std::int64_t ldb;  // elements from one block to the next in out
    std::int64_t ob0, p0;
    std::int64_t k;  // taps per output channel: cin * kh * kw (depthwise: kh * kw)
    bool clamp;      // g->lo or g->hi is finite
};

// The accumulators' starting values: the bias of the blocks, or 0.
// (The accumulators' helpers are always inlined: out of line, once enough kernels call
// them, they took the accumulators through memory: depthwise convs 10-17% slower.)
// v0: the accumulators' first vector within block ob (a depthwise run of one vector of a
// block: acc[r][0] holds its vector v0).
template <class S, int N, int Q>
[[gnu::always_inline]] inline void nchwc_init(const NchwcArgs& a, std::int64_t ob, typename S::V (&acc)[N][Q], int v0 = 0) {
    constexpr int VPB = NchwcShape<S>::VPB;
#pragma GCC unroll 16
    for (int q = 0; q < Q; ++q) {
        const typename S::V b = a.bias ? S::load(a.bias + ob * kNchwcLanes + ((q + v0) / VPB) * kNchwcLanes + ((q + v0) % VPB) * S::W)
                                       : S::zero();
#pragma GCC unroll 16
        for (int r = 0; r < N; ++r) acc[r][q] = b;
    }
}

// The accumulators of blocks [ob, ob + Q / VPB) with the channels at or past g->cout (the
// last block's padding) set to 0, before the epilogue (conv_nchwc.h).
template <class S, int N, int Q>
[[gnu::always_inline]] inline void nchwc_past_cout(const NchwcArgs& a, std::int64_t ob, typename S::V (&acc)[N][Q]) {
    constexpr int VPB = NchwcShape<S>::VPB;
#pragma GCC unroll 4
    for (int q = 0; q < Q; ++q) {
        const std::int64_t n = std::clamp<std::int64_t>(a.g->cout - (ob + q / VPB) * kNchwcLanes - (q % VPB) * S::W, 0, S::W);
#pragma GCC unroll 16
        for (int r = 0; r < N; ++r) acc[r][q] = S::head(acc[r][q], n);
    }
}

// (Every address from locals: the stores' vector types may alias anything, so a field of `a`
// read between two stores is read again after each; computed from a's fields per store, the
// addresses took more instructions than the FMAs of a depthwise run.)
template <class S, int N, int Q>
[[gnu::always_inline]] inline void nchwc_store(const NchwcArgs& a, std::int64_t ob, std::int64_t p, typename S::V (&acc)[N][Q],
                                             int v0 = 0) {
    constexpr int VPB = NchwcShape<S>::VPB;
    const std::int64_t ldb = a.ldb, at = (ob - a.ob0) * ldb + (p - a.p0) * kNchwcLanes;
    auto offset = [&](int r, int q) { return at + ((q + v0) / VPB) * ldb + r * kNchwcLanes + ((q + v0) % VPB) * S::W; };
    float* const out = a.out;
    const NchwcGeometry& g = *a.g;
    if (const float* res = g.residual) {
#pragma GCC unroll 16
        for (int r = 0; r < N; ++r)
#pragma GCC unroll 4
            for (int q = 0; q < Q; ++q) acc[r][q] = S::add(acc[r][q], S::load(res + offset(r, q)));
    }
    if (a.clamp) {
        const typename S::V lo = S::set1(static_cast<float>(g.lo)), hi = S::set1(static_cast<float>(g.hi));
#pragma GCC unroll 16
        for (int r = 0; r < N; ++r)
#pragma GCC unroll 4
            for (int q = 0; q < Q; ++q) acc[r][q] = S::clamp(acc[r][q], lo, hi);
    }
#pragma GCC unroll 16
    for (int r = 0; r < N; ++r)
#pragma GCC unroll 4
        for (int q = 0; q < Q; ++q) S::store(out + offset(r, q), acc[r][q]);
}

// The filter rows [i0, i1) of output row y that lie inside the image (all of them but at
// the top and bottom borders; none where the padding is wider than the filter's reach).
inline std::pair<std::int64_t, std::int64_t> nchwc_rows_inside(const NchwcGeometry& g, std::int64_t y) {
    const std::int64_t iy = y * g.sh - g.ph;
    if (iy >= 0 && iy + (g.kh - 1) * g.dh < g.h) return {0, g.kh};  // (no divisions in the rows inside)
    const std::int64_t i0 = iy >= 0 ? 0 : (-iy + g.dh - 1) / g.dh;
    const std::int64_t i1 = iy > g.h - 1 ? 0 : std::min(g.kh, (g.h - 1 - iy) / g.dh + 1);
    return {i0, std::max(i0, i1)};
}

// How a dense run finds its pixels' inputs: kGeneric, `sw` apart; kUnitStride, consecutive
// (stride 1 along the row); kPointwise, a 1x1 conv of stride 1 without padding, the image
// read as one row (y = 0, x0 = p) and the channels walked block by block.
enum NchwcMode : int { kGeneric, kUnitStride, kPointwise };

// Dense: N output pixels from (y, x0) on (consecutive x), output pixel p onwards, blocks
// [ob, ob + NB), every tap column inside the image (the filter rows outside it skipped).
// TAIL (0: none): the blocks hold g->cout, their first TAIL vectors its channels below it;
// only those take FMAs, and the channels past it are 0 before the epilogue.
template <class S, int N, int NB, bool BLK, int MODE, int TAIL>
void nchwc_dense_run(const NchwcArgs& a, std::int64_t ob, std::int64_t y, std::int64_t x0, std::int64_t p) {
    using V = typename S::V;
    constexpr int VPB = NchwcShape<S>::VPB, Q = NB * VPB;
    const NchwcGeometry& g = *a.g;
    constexpr std::int64_t E = BLK ? kNchwcLanes : 1;  // elements per input pixel of a channel's block
    const std::int64_t plane = g.h * g.w, ps = MODE == kGeneric ? g.sw * E : E, wstride = a.k * kNchwcLanes;
    constexpr int QA = TAIL > 0 ? TAIL : Q;  // the vectors that take FMAs
    V acc[N][Q];
    nchwc_init<S>(a, ob, acc);
    const float* wk = a.w + ob * wstride;  // walks the taps in order: (c, i, j)
    auto tap = [&](const float* xp) {
        V wv[QA];
#pragma GCC unroll 4
        for (int q = 0; q < QA; ++q) wv[q] = S::load(wk + (q / VPB) * wstride + (q % VPB) * S::W);
#pragma GCC unroll 16
        for (int r = 0; r < N; ++r) {
            const V xv = S::bcast(xp + r * ps);
#pragma GCC unroll 4
            for (int q = 0; q < QA; ++q) acc[r][q] = S::fma(xv, wv[q], acc[r][q]);
        }
        wk += kNchwcLanes;
    };
    if constexpr (MODE == kPointwise) {
        if constexpr (BLK) {
            // The call's first run of these blocks also fetches the next NB blocks' weights
            // into L2, a line per block and tap, while its FMAs run: the run after it takes
            // them from there rather than from L3 or memory. (mobilenet_v2's 1x1 groups at 7 x 7
            // and 14 x 14, whose weights are 10-77 KB a block and whose 9-33 runs a block
            // read them from L2 after the first: 1.02-1.21x faster at 256 bits, the model's
            // batch-1 call 2.7-4% on 1 thread, 1.7% on 2; AMD EPYC Zen 4.)
            const bool ahead = p == a.p0;
            for (std::int64_t c0 = 0; c0 < g.cin; c0 += kNchwcLanes) {
                const float* xb = a.x + ((c0 / kNchwcLanes) * plane + x0) * kNchwcLanes;
                const std::int64_t n = std::min<std::int64_t>(kNchwcLanes, g.cin - c0);
                if (ahead)
#pragma GCC unroll 1
                    for (std::int64_t l = 0; l < n * NB; ++l)
                        __builtin_prefetch(wk + (NB + l % NB) * wstride + (l / NB) * kNchwcLanes, 0, 2);
                for (std::int64_t l = 0; l < n; ++l) tap(xb + l);
            }
        } else {
            for (std::int64_t c = 0; c < g.cin; ++c) tap(a.x + c * plane + x0);
        }
    } else {
        const auto [i0, i1] = nchwc_rows_inside(g, y);
        const float* w0 = wk;
        for (std::int64_t c = 0; c < g.cin; ++c) {
            const float* xc = BLK ? a.x + (c / kNchwcLanes) * plane * kNchwcLanes + c % kNchwcLanes : a.x + c * plane;
            wk = w0 + (c * g.kh + i0) * g.kw * kNchwcLanes;  // (the taps of rows [i0, i1) are consecutive)
            for (std::int64_t i = i0; i < i1; ++i) {
                const float* xr = xc + ((y * g.sh - g.ph + i * g.dh) * g.w + x0 * g.sw - g.pw) * E;
                for (std::int64_t j = 0; j < g.kw; ++j) tap(xr + j * g.dw * E);
            }
        }
    }
    if constexpr (TAIL > 0) nchwc_past_cout<S>(a, ob, acc);
    nchwc_store<S>(a, ob, p, acc);
}

// f(i, j, iy * w + ix) for the taps (i, j) of output pixel (y, x) that lie inside the image
// (the pixels at the borders, one at a time).
template <class F>
inline void nchwc_inside_taps(const NchwcGeometry& g, std::int64_t y, std::int64_t x, F f) {
    for (std::int64_t i = 0; i < g.kh; ++i) {
        const std::int64_t iy = y * g.sh - g.ph + i * g.dh;
        if (iy < 0 || iy >= g.h) continue;
        for (std::int64_t j = 0; j < g.kw; ++j) {
            const std::int64_t ix = x * g.sw - g.pw + j * g.dw;
            if (ix >= 0 && ix < g.w) f(i, j, iy * g.w + ix);
        }
    }
}

// Dense, one output pixel (y, x) = p, each tap checked against the image (TAIL: as for
// nchwc_dense_run).
template <class S, int NB, bool BLK, int TAIL>
void nchwc_dense_pixel(const NchwcArgs& a, std::int64_t ob, std::int64_t y, std::int64_t x, std::int64_t p) {
    using V = typename S::V;
    constexpr int VPB = NchwcShape<S>::VPB, Q = NB * VPB;
    const NchwcGeometry& g = *a.g;
    const std::int64_t plane = g.h * g.w, wstride = a.k * kNchwcLanes;
    V acc[1][Q];
    nchwc_init<S>(a, ob, acc);
    const float* wb = a.w + ob * wstride;
    nchwc_inside_taps(g, y, x, [&](std::int64_t i, std::int64_t j, std::int64_t pix) {
        for (std::int64_t c = 0; c < g.cin; ++c) {
            const float* xp = BLK ? a.x + ((c / kNchwcLanes) * plane + pix) * kNchwcLanes + c % kNchwcLanes : a.x + c * plane + pix;
            const float* wk = wb + ((c * g.kh + i) * g.kw + j) * kNchwcLanes;
            const V xv = S::bcast(xp);
#pragma GCC unroll 4
            for (int q = 0; q < (TAIL > 0 ? TAIL : Q); ++q)
                acc[0][q] = S::fma(xv, S::load(wk + (q / VPB) * wstride + (q % VPB) * S::W), acc[0][q]);
        }
    });
    if constexpr (TAIL > 0) nchwc_past_cout<S>(a, ob, acc);
    nchwc_store<S>(a, ob, p, acc);
}

// Depthwise: N output pixels from (y, x0) on, block ob, every tap inside the image; one
// vector of the block after the other (N accumulators at a time, see nchwc_dw_row_run).
template <class S, int N>
void nchwc_dw_run(const NchwcArgs& a, std::int64_t ob, std::int64_t y, std::int64_t x0, std::int64_t p) {
    using V = typename S::V;
    constexpr int VPB = NchwcShape<S>::VPB;
    const NchwcGeometry& g = *a.g;
    const float* xb = a.x + ob * g.h * g.w * kNchwcLanes;
    const float* wb = a.w + ob * a.k * kNchwcLanes;
    const std::int64_t ps = g.sw * kNchwcLanes;
    const auto [i0, i1] = nchwc_rows_inside(g, y);
    for (int v = 0; v < VPB; ++v) {
        V acc[N][1];
        nchwc_init<S>(a, ob, acc, v);
        for (std::int64_t i = i0; i < i1; ++i) {
            const float* xr = xb + (y * g.sh - g.ph + i * g.dh) * g.w * kNchwcLanes + v * S::W;
            for (std::int64_t j = 0; j < g.kw; ++j) {
                const float* xp = xr + (x0 * g.sw - g.pw + j * g.dw) * kNchwcLanes;
                const V wv = S::load(wb + (i * g.kw + j) * kNchwcLanes + v * S::W);
#pragma GCC unroll 16
                for (int r = 0; r < N; ++r) acc[r][0] = S::fma(S::load(xp + r * ps), wv, acc[r][0]);
            }
        }
        nchwc_store<S>(a, ob, p, acc, v);
    }
}

// Depthwise with a filter row of KW taps at column stride SW (dilation 1): N output pixels
// from (y, x0) on, block ob, one vector of the block after the other. Each input vector of
// a filter row is loaded once and feeds every output pixel whose window covers it
// ((N - 1) SW + KW loads per row instead of N KW), the row's KW weight vectors held in
// registers. Filter rows outside the image are skipped; with CLIP (the runs that reach the
// left or right border) so are the input columns outside it, else every tap column lies
// inside. (A clipped run costs 0.9-1.2 other runs: a branch per column, predicted; loading
// no lanes for the columns outside instead, or copying the columns with zeros first, made
// the depthwise kernels up to 20% and 46% slower.) One vector at a time rather than the
// block's VPB together: at 256 bits, runs of 8 pixels of one vector (8 accumulators, each
// taking its KH KW FMAs in a chain) rather than 4 pixels of both, whose weights and
// accumulators filled the registers: with the stores' addresses from locals (nchwc_store)
// the 3x3 kernel went from 3.44 to 2.47 ns an output vector of 8, the 5x5 one from 6.81 to
// 4.34 (144 channels at 56 x 56, stride 1, in cache; AMD EPYC Zen 4).
template <class S, int N, int KW, int SW, bool CLIP>
void nchwc_dw_row_run(const NchwcArgs& a, std::int64_t ob, std::int64_t y, std::int64_t x0, std::int64_t p) {
    using V = typename S::V;
    constexpr int VPB = NchwcShape<S>::VPB, T = (N - 1) * SW + KW;
    const NchwcGeometry& g = *a.g;
    const float* xb = a.x + ob * g.h * g.w * kNchwcLanes;
    const float* wb = a.w + ob * a.k * kNchwcLanes;
    const auto [i0, i1] = nchwc_rows_inside(g, y);
    // Input column x0 SW - pw + t for t in [0, T); with CLIP, those in [t0, t1) lie inside.
    const std::int64_t ix0 = x0 * SW - g.pw;
    const std::int64_t t0 = CLIP ? std::max<std::int64_t>(0, -ix0) : 0, t1 = CLIP ? std::min<std::int64_t>(T, g.w - ix0) : T;
    // Input column ix0 + t at xr + (off + t) * 16: inside the image (no CLIP), xr points at
    // column ix0 (constant offsets from one pointer); with CLIP at the row's start.
    const std::int64_t off = CLIP ? ix0 : 0;
    for (int v = 0; v < VPB; ++v) {
        V acc[N][1];
        nchwc_init<S>(a, ob, acc, v);
        for (std::int64_t i = i0; i < i1; ++i) {
            const float* xr = xb + ((y * g.sh - g.ph + i * g.dh) * g.w + ix0 - off) * kNchwcLanes + v * S::W;
            const float* wr = wb + i * KW * kNchwcLanes + v * S::W;
            V wv[KW];
#pragma GCC unroll 8
            for (int j = 0; j < KW; ++j) wv[j] = S::load(wr + j * kNchwcLanes);
#pragma GCC unroll 32
            for (int t = 0; t < T; ++t) {
                if (CLIP && (t < t0 || t >= t1)) continue;
                const V xv = S::load(xr + (off + t) * kNchwcLanes);
#pragma GCC unroll 8
                for (int j = 0; j < KW; ++j)
                    if ((t - j) % SW == 0 && t - j >= 0 && (t - j) / SW < N)
                        acc[(t - j) / SW][0] = S::fma(xv, wv[j], acc[(t - j) / SW][0]);
            }
        }
        nchwc_store<S>(a, ob, p, acc, v);
    }
}

template <class S>
void nchwc_dw_pixel(const NchwcArgs& a, std::int64_t ob, std::int64_t y, std::int64_t x, std::int64_t p) {
    using V = typename S::V;
    constexpr int VPB = NchwcShape<S>::VPB;
    const NchwcGeometry& g = *a.g;
    V acc[1][VPB];
    nchwc_init<S>(a, ob, acc);
    const float* xb = a.x + ob * g.h * g.w * kNchwcLanes;
    const float* wb = a.w + ob * a.k * kNchwcLanes;
    nchwc_inside_taps(g, y, x, [&](std::int64_t i, std::int64_t j, std::int64_t pix) {
        const float* xp = xb + pix * kNchwcLanes;
        const float* wk = wb + (i * g.kw + j) * kNchwcLanes;
#pragma GCC unroll 4
        for (int v = 0; v < VPB; ++v) acc[0][v] = S::fma(S::load(xp + v * S::W), S::load(wk + v * S::W), acc[0][v]);
    });
    nchwc_store<S>(a, ob, p, acc);
}

using NchwcRunFn = void (*)(const NchwcArgs&, std::int64_t, std::int64_t, std::int64_t, std::int64_t);

// Runs of 1 .. R pixels: table[n] for n in [1, R].
template <class S, int NB, bool BLK, int MODE, int TAIL, std::size_t... I>
constexpr auto nchwc_dense_runs(std::index_sequence<I...>) {
    return std::array<NchwcRunFn, sizeof...(I) + 1>{nullptr, &nchwc_dense_run<S, int(I) + 1, NB, BLK, MODE, TAIL>...};
}
// The runs and the pixel kernels of NB blocks for TAIL = 1, 2, ...: table[TAIL - 1].
template <class S, int NB, bool BLK, int MODE, std::size_t... T>
constexpr auto nchwc_dense_tail_runs(std::index_sequence<T...>) {
    using Seq = std::make_index_sequence<NchwcShape<S>::R>;
    // (the type spelled out: from one element, std::array{...} would copy that inner array)
    return std::array<std::array<NchwcRunFn, NchwcShape<S>::R + 1>, sizeof...(T)>{nchwc_dense_runs<S, NB, BLK, MODE, int(T) + 1>(Seq{})...};
}
template <class S, int NB, bool BLK, std::size_t... T>
constexpr auto nchwc_dense_tail_pixels(std::index_sequence<T...>) {
    return std::array<NchwcRunFn, sizeof...(T)>{&nchwc_dense_pixel<S, NB, BLK, int(T) + 1>...};
}
template <class S, std::size_t... I>
constexpr auto nchwc_dw_runs(std::index_sequence<I...>) {
    return std::array<NchwcRunFn, sizeof...(I) + 1>{nullptr, &nchwc_dw_run<S, int(I) + 1>...};
}
template <class S, int KW, int SW, bool CLIP, std::size_t... I>
constexpr auto nchwc_dw_row_runs(std::index_sequence<I...>) {
    return std::array<NchwcRunFn, sizeof...(I) + 1>{nullptr, &nchwc_dw_row_run<S, int(I) + 1, KW, SW, CLIP>...};
}

// Output pixels [p0, p1) of blocks [ob, ob + nb) with the runs in `runs` (runs[n]: n pixels,
// n <= R; in the rows at the top and bottom borders they skip the filter rows outside the
// image), and where tap columns leave the image at the left and right borders, the runs in
// `edges` (the same, skipping those columns too) or, without them, `pixel` one at a time.
// With `merge`, a run of `edges` is any run of the row that reaches a border, else the
// border pixels take runs of their own.
// Runs of at most R covering [x0, x1), f(x, n): greedy (R, R, ..., the rest), or with EVEN
// as even as they come: 49 pixels at R = 6 as 5, 5, 5, 5, 5, 6, 6, 6, 6 rather than eight 6s
// and a 1. At 256 bits a short run keeps too few accumulators to hide the FMAs' latency and
// costs nearly what a full one does (mobilenet_v2's 7 x 7 pointwise convs at 256 bits, 1
// thread, AMD EPYC Zen 4: 5-7% faster even); at 512 bits a full run of 12 pixels takes long
// enough that a short one is cheap, and the runs of 10 that even makes were 2-3% slower.
template <int R, bool EVEN, class F>
inline void nchwc_runs(std::int64_t x0, std::int64_t x1, F f) {
    if (!EVEN) {
        for (std::int64_t x = x0; x < x1; x += R) f(x, std::min<std::int64_t>(R, x1 - x));
        return;
    }
    const std::int64_t n = x1 - x0, k = (n + R - 1) / R;
    for (std::int64_t i = 0, x = x0; i < k; ++i) {
        const std::int64_t len = n / k + (i >= k - n % k ? 1 : 0);
        f(x, len);
        x += len;
    }
}

template <int R, bool EVEN>
void nchwc_pixels(const NchwcArgs& a, std::int64_t ob, std::int64_t p0, std::int64_t p1, const NchwcRunFn* runs,
                  const NchwcRunFn* edges, NchwcRunFn pixel, bool linear, bool merge = false) {
    const NchwcGeometry& g = *a.g;
    if (linear) {  // a 1x1 conv of stride 1 without padding: the image as one row
        nchwc_runs<R, EVEN>(p0, p1, [&](std::int64_t p, std::int64_t n) { runs[n](a, ob, 0, p, p); });
        return;
    }
    // Output columns whose taps all lie inside the image's columns: [xlo, xhi).
    const std::int64_t span_w = (g.kw - 1) * g.dw;
    const std::int64_t xlo = (g.pw + g.sw - 1) / g.sw;
    const std::int64_t xhi = g.w - 1 + g.pw - span_w < 0 ? 0 : (g.w - 1 + g.pw - span_w) / g.sw + 1;
    auto border = [&](std::int64_t y, std::int64_t x0, std::int64_t x1) {
        if (edges != nullptr) {
            for (std::int64_t x = x0; x < x1; x += R) edges[std::min<std::int64_t>(R, x1 - x)](a, ob, y, x, y * g.ow + x);
        } else {
            for (std::int64_t x = x0; x < x1; ++x) pixel(a, ob, y, x, y * g.ow + x);
        }
    };
    for (std::int64_t y = p0 / g.ow; y * g.ow < p1; ++y) {
        const std::int64_t xs = std::max<std::int64_t>(0, p0 - y * g.ow), xe = std::min(g.ow, p1 - y * g.ow);
        if (edges != nullptr && merge) {
            // The row as one sequence of runs, those that reach a border clipped: the border
            // pixels ride in a full run rather than in runs of their own (a run of 1 takes
            // nearly the time of a run of R; mobilenet_v2's 7 x 7 rows were 4 runs, now 2).
            nchwc_runs<R, EVEN>(xs, xe, [&](std::int64_t x, std::int64_t n) {
                (x < xlo || x + n > xhi ? edges : runs)[n](a, ob, y, x, y * g.ow + x);
            });
            continue;
        }
        const std::int64_t a0 = std::clamp(xlo, xs, xe), a1 = std::clamp(xhi, a0, xe);
        border(y, xs, a0);
        nchwc_runs<R, EVEN>(a0, a1, [&](std::int64_t x, std::int64_t n) { runs[n](a, ob, y, x, y * g.ow + x); });
        border(y, a1, xe);
    }
}

// SiLU (g.silu) over the n pixels just stored of blocks [ob, ob + nb), while they are in
// cache: a pass of its own rather than in the runs' stores, whose registers it would take.
template <class S>
inline void nchwc_silu(const NchwcArgs& a, std::int64_t ob, int nb, std::int64_t n) {
    if (!a.g->silu || n <= 0) return;
    for (int q = 0; q < nb; ++q) dw_silu_row<S>(a.out + (ob + q - a.ob0) * a.ldb, n * kNchwcLanes);
}

template <class S>
void nchwc_conv(const NchwcGeometry& g, const float* x, const float* w, const float* bias, float* out, std::int64_t ldb,
                std::int64_t ob0, std::int64_t ob1, std::int64_t p0, std::int64_t p1) {
    using Shape = NchwcShape<S>;
    const bool clamp = g.lo > -std::numeric_limits<double>::infinity() || g.hi < std::numeric_limits<double>::infinity();
    const NchwcArgs a{&g, x, w, bias, out, ldb, ob0, p0, (g.depthwise ? 1 : g.cin) * g.kh * g.kw, clamp};
    if (g.depthwise) {
        using Seq = std::make_index_sequence<Shape::DR>;
        static constexpr auto runs = nchwc_dw_runs<S>(Seq{});
        // The row runs of 3 and 5 taps at strides 1 and 2, inside and clipped at the borders.
        static constexpr std::array<std::array<NchwcRunFn, Shape::DR + 1>, 8> rows{
            nchwc_dw_row_runs<S, 3, 1, false>(Seq{}), nchwc_dw_row_runs<S, 3, 1, true>(Seq{}),
            nchwc_dw_row_runs<S, 3, 2, false>(Seq{}), nchwc_dw_row_runs<S, 3, 2, true>(Seq{}),
            nchwc_dw_row_runs<S, 5, 1, false>(Seq{}), nchwc_dw_row_runs<S, 5, 1, true>(Seq{}),
            nchwc_dw_row_runs<S, 5, 2, false>(Seq{}), nchwc_dw_row_runs<S, 5, 2, true>(Seq{})};
        const NchwcRunFn *r = runs.data(), *edges = nullptr;
        if (g.dw == 1 && (g.kw == 3 || g.kw == 5) && (g.sw == 1 || g.sw == 2)) {
            const std::size_t k = (g.kw == 5 ? 4 : 0) + (g.sw == 2 ? 2 : 0);
            r = rows[k].data(), edges = rows[k + 1].data();
        }
        // Border pixels in the full runs where a clipped run of DR pixels keeps its weights
        // and accumulators in registers, or the rows are short (when runs of 4 pixels held
        // both vectors of a block at 256 bits, a 5-tap row's 10 weight vectors and 8
        // accumulators did not fit, and its clipped runs spilled: efficientnet_b0's 5 x 5
        // stride-2 convs, 1 thread, AMD EPYC Zen 4, at 56 x 56 17% slower than runs of their
        // own for the border pixels, at 14 x 14 5-8% faster).
        const bool merge = g.kw + Shape::DR <= 14 || g.ow <= 2 * Shape::DR;
        for (std::int64_t ob = ob0; ob < ob1; ++ob) {
            nchwc_pixels<Shape::DR, S::W == 8>(a, ob, p0, p1, r, edges, &nchwc_dw_pixel<S>, false, merge);
            nchwc_silu<S>(a, ob, 1, p1 - p0);
        }
        return;
    }
    const bool linear = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
    // The blocks that hold g.cout, if any (it is in the last one): TAIL runs for them.
    const std::int64_t tail_ob = g.cout < ob1 * kNchwcLanes ? g.cout / kNchwcLanes : ob1;
    auto blocks = [&](auto blk, auto mode) {
        constexpr bool B = decltype(blk)::value;
        constexpr int M = decltype(mode)::value;
        constexpr int NB = Shape::NB, VPB = Shape::VPB;
        using Seq = std::make_index_sequence<Shape::R>;
        static constexpr auto wide = nchwc_dense_runs<S, NB, B, M, 0>(Seq{});
        static constexpr auto one = nchwc_dense_runs<S, 1, B, M, 0>(Seq{});
        // [TAIL - 1]: the TAIL runs (and pixels) of NB blocks, and of one.
        static constexpr auto wide_tail = nchwc_dense_tail_runs<S, NB, B, M>(std::make_index_sequence<NB * VPB>{});
        static constexpr auto one_tail = nchwc_dense_tail_runs<S, 1, B, M>(std::make_index_sequence<VPB>{});
        static constexpr auto wide_tail_pixel = nchwc_dense_tail_pixels<S, NB, B>(std::make_index_sequence<NB * VPB>{});
        static constexpr auto one_tail_pixel = nchwc_dense_tail_pixels<S, 1, B>(std::make_index_sequence<VPB>{});
        // Which TAIL table for blocks from ob on: the number of their vectors that hold channels
        // below g.cout, less 1 (at least one vector: a block wholly past g.cout comes out 0).
        auto tail_index = [&](std::int64_t ob, std::int64_t vectors) {
            return std::clamp<std::int64_t>((g.cout - ob * kNchwcLanes + S::W - 1) / S::W, 1, vectors) - 1;
        };
        std::int64_t ob = ob0;
        for (; ob + NB <= ob1; ob += NB) {
            if (ob + NB > tail_ob) {
                const std::int64_t q = tail_index(ob, NB * VPB);
                nchwc_pixels<Shape::R, S::W == 8>(a, ob, p0, p1, wide_tail[q].data(), nullptr, wide_tail_pixel[q], linear);
            } else {
                nchwc_pixels<Shape::R, S::W == 8>(a, ob, p0, p1, wide.data(), nullptr, &nchwc_dense_pixel<S, NB, B, 0>, linear);
            }
            nchwc_silu<S>(a, ob, NB, p1 - p0);
        }
        for (; ob < ob1; ++ob) {
            if (ob >= tail_ob) {
                const std::int64_t q = tail_index(ob, VPB);
                nchwc_pixels<Shape::R, S::W == 8>(a, ob, p0, p1, one_tail[q].data(), nullptr, one_tail_pixel[q], linear);
            } else {
                nchwc_pixels<Shape::R, S::W == 8>(a, ob, p0, p1, one.data(), nullptr, &nchwc_dense_pixel<S, 1, B, 0>, linear);
            }
            nchwc_silu<S>(a, ob, 1, p1 - p0);
        }
    };
    auto modes = [&](auto blk) {
        if (linear) blocks(blk, std::integral_constant<int, kPointwise>{});
        else if (g.sw == 1) blocks(blk, std::integral_constant<int, kUnitStride>{});
        else blocks(blk, std::integral_constant<int, kGeneric>{});
    };
    if (g.blocked_input) modes(std::true_type{});
    else modes(std::false_type{});
}

}  // namespace kiln::cpu::simd
