#pragma once
// The vector kernels of the host (gemm.h), written once over a traits type S that wraps one
// instruction set's intrinsics for one element type:
//   S::T (float, double), S::V (the vector), S::W (lanes), zero(), load(p), store(p, v),
//   bcast(p), fma(a, b, c) = a * b + c, add(a, b), load2(p) = {p[0], p[2], ..., p[2W-2]},
//   load_n(p, n) = {p[0], ..., p[n-1], 0, ...} and store_n(p, v, n) for 0 <= n <= W (masked:
//   nothing outside the n elements is touched), head(v, n) (lanes >= n zeroed), maxnan(a, b)
//   (per lane: NaN if either is, else the larger), clamp(v, lo, hi) = min_ps(hi, max_ps(lo, v))
//   (x86's operand order: a NaN v stays NaN), transpose(V (&r)[W]) (r[i][j] <- r[j][i]);
//   the f32 vector traits also set1(x), sub(a, b), div(a, b), min_bits(v, ub, sb) (per lane,
//   the bits b: min_s32(min_u32(b, ub), sb)) and exp2_bits(t) (the bits of t shifted left
//   by 23), with which simd_depthwise.h's dw_silu computes SiLU.
// Each simd_<isa>.cpp defines its traits and instantiates the kernels into its tables
// (gemm.h). It includes this header after every standard header and inside
// `#pragma GCC target(...)`, so that these templates, and nothing shared with the rest of
// the program, are compiled for that instruction set.
//
// Here: the GEMM's register tile and rows kernel, the max pool, the column sums, and the
// tables; the depthwise kernels are in simd_depthwise.h, included below.
// The matrix tile keeps M x NV vector accumulators in registers over the whole depth kc:
// per step it loads NV vectors of B and broadcasts M values of A (a register tile of
// 6 x 16 floats on AVX2 uses 12 of the 16 ymm registers, 12 x 32 on AVX-512 24 of 32 zmm).
#include <cstdint>
#include <type_traits>

namespace kiln::cpu::simd {

// c[0..M) x [0..cols) += packed A panel (kc x MR) * B (kc rows of NV * W values, stride ldb).
template <class S, int MR, int NV, int M>
void tile(std::int64_t kc, const typename S::T* a, const typename S::T* b, std::int64_t ldb, typename S::T* c,
          std::int64_t ldc, int cols) {
    using T = typename S::T;
    using V = typename S::V;
    constexpr int W = S::W, NR = NV * W;
    // A tile of few rows has too few independent accumulators to hide the latency of the
    // FMAs (about 8 are needed): it keeps U sets, one per step of k modulo U, and adds them
    // at the end.
    constexpr int U = M * NV >= 8 ? 1 : (8 + M * NV - 1) / (M * NV);
    V acc[U][M][NV];
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u)
#pragma GCC unroll 16
        for (int r = 0; r < M; ++r)
#pragma GCC unroll 4
            for (int j = 0; j < NV; ++j) acc[u][r][j] = S::zero();
    auto step = [&](V(&sum)[M][NV]) {
        V bv[NV];
#pragma GCC unroll 4
        for (int j = 0; j < NV; ++j) bv[j] = S::load(b + j * W);
#pragma GCC unroll 16
        for (int r = 0; r < M; ++r) {
            const V av = S::bcast(a + r);
#pragma GCC unroll 4
            for (int j = 0; j < NV; ++j) sum[r][j] = S::fma(av, bv[j], sum[r][j]);
        }
        a += MR;
        b += ldb;
    };
    std::int64_t k = 0;
    for (; k + U <= kc; k += U)
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u) step(acc[u]);
    for (; k < kc; ++k) step(acc[0]);
#pragma GCC unroll 4
    for (int u = 1; u < U; ++u)
#pragma GCC unroll 16
        for (int r = 0; r < M; ++r)
#pragma GCC unroll 4
            for (int j = 0; j < NV; ++j) acc[0][r][j] = S::add(acc[0][r][j], acc[u][r][j]);
    if (cols == NR) {
#pragma GCC unroll 16
        for (int r = 0; r < M; ++r)
#pragma GCC unroll 4
            for (int j = 0; j < NV; ++j) {
                T* cv = c + r * ldc + j * W;
                S::store(cv, S::add(S::load(cv), acc[0][r][j]));
            }
        return;
    }
    alignas(64) T part[NR];
    // Unrolled like the loops above, so that acc is only ever indexed by constants and stays
    // in registers (a loop here would make GCC keep a copy of acc in memory on every step).
#pragma GCC unroll 16
    for (int r = 0; r < M; ++r) {
#pragma GCC unroll 4
        for (int j = 0; j < NV; ++j) S::store(part + j * W, acc[0][r][j]);
        for (int j = 0; j < cols; ++j) c[r * ldc + j] += part[j];
    }
}

// c[r][x] += sum_k a[r][k] * b[k][x] for r < M (row r of A at a + r * lda, of C at
// c + r * ldc), x < n, k < kc, reading B row by row: the product of a few rows of A, where a
// packed panel of B would be used only once. Each step takes KU rows of B, so that a
// vector of C is loaded and stored once per KU FMAs; B streams through in order.
template <class S, int M>
void rows(std::int64_t n, std::int64_t kc, const typename S::T* a, std::int64_t lda, const typename S::T* b,
          std::int64_t ldb, typename S::T* c, std::int64_t ldc) {
    using T = typename S::T;
    using V = typename S::V;
    // KU * M broadcast registers: 16 of AVX-512's 32 registers at 4 rows, 8 of AVX2's 16.
    constexpr int W = S::W, KU = M <= 2 || sizeof(typename S::V) >= 64 ? 4 : 2;
    std::int64_t k = 0;
    for (; k + KU <= kc; k += KU) {
        V av[KU][M];
#pragma GCC unroll 4
        for (int u = 0; u < KU; ++u)
#pragma GCC unroll 4
            for (int r = 0; r < M; ++r) av[u][r] = S::bcast(a + r * lda + k + u);
        const T* bk = b + k * ldb;
        std::int64_t x = 0;
        for (; x + W <= n; x += W) {
            V acc[M];
#pragma GCC unroll 4
            for (int r = 0; r < M; ++r) acc[r] = S::load(c + r * ldc + x);
#pragma GCC unroll 4
            for (int u = 0; u < KU; ++u) {
                const V bv = S::load(bk + u * ldb + x);
#pragma GCC unroll 4
                for (int r = 0; r < M; ++r) acc[r] = S::fma(av[u][r], bv, acc[r]);
            }
#pragma GCC unroll 4
            for (int r = 0; r < M; ++r) S::store(c + r * ldc + x, acc[r]);
        }
        // The last n mod W columns in masked vectors (a classifier's 10 columns ran as
        // scalars: mlp 1024 -> 10 at batch 8 took 27 us, AMD EPYC Zen 4).
        if (x < n) {
            const std::int64_t left = n - x;
            V acc[M];
#pragma GCC unroll 4
            for (int r = 0; r < M; ++r) acc[r] = S::load_n(c + r * ldc + x, left);
#pragma GCC unroll 4
            for (int u = 0; u < KU; ++u) {
                const V bv = S::load_n(bk + u * ldb + x, left);
#pragma GCC unroll 4
                for (int r = 0; r < M; ++r) acc[r] = S::fma(av[u][r], bv, acc[r]);
            }
#pragma GCC unroll 4
            for (int r = 0; r < M; ++r) S::store_n(c + r * ldc + x, acc[r], left);
        }
    }
    for (; k < kc; ++k)
        for (int r = 0; r < M; ++r) {
            const T ak = a[r * lda + k];
            const T* bk = b + k * ldb;
            T* cr = c + r * ldc;
            for (std::int64_t x = 0; x < n; ++x) cr[x] += ak * bk[x];
        }
}

// n values from src to dst (vectors, the last one overlapping when n > W; masked below W,
// so that vector loads of dst later are forwarded from whole stores).
template <class S>
[[gnu::always_inline]] inline void copy_n(const typename S::T* src, std::int64_t n, typename S::T* dst) {
    constexpr int W = S::W;
    if (n < W) {
        S::store_n(dst, S::load_n(src, n), n);
        return;
    }
    std::int64_t i = 0;
    for (; i + W <= n; i += W) S::store(dst + i, S::load(src + i));
    if (i < n) S::store(dst + n - W, S::load(src + n - W));
}

// n copies of v at dst (vectors, the last one overlapping when n > W).
template <class S>
[[gnu::always_inline]] inline void fill_n(typename S::T* dst, std::int64_t n, typename S::T v) {
    constexpr int W = S::W;
    const typename S::V vv = S::bcast(&v);
    if (n < W) {
        S::store_n(dst, vv, n);
        return;
    }
    std::int64_t i = 0;
    for (; i + W <= n; i += W) S::store(dst + i, vv);
    if (i < n) S::store(dst + n - W, vv);
}

}  // namespace kiln::cpu::simd

// The depthwise kernels (they use copy_n and fill_n above).
#include "src/cpu/simd_depthwise.h"

namespace kiln::cpu::simd {

// One plane of a 2-D max pool (pool.h). Per output row: the window's input rows are
// reduced into one row (vertical max), placed between columns of -inf that stand for the
// padding and the windows' overhang; then each output is the max of kw neighbours of that
// row (horizontal max), vectorised over the outputs for strides 1 and 2. NaN propagates.
// The vertical rows of a band of kPoolBandRows output rows are made before their horizontal
// maxima: a row's unaligned loads right after its stores waited on store forwarding (a load
// spanning two recent stores), which made the kernel ~5x slower than its instruction count
// (squeezenet's 64 x 111 x 111 pool, AMD EPYC Zen 4). A row's columns are max'ed over the
// window's input rows in registers, each stored once.
template <class S>
void max_pool(const PoolGeometry& g, const typename S::T* x, typename S::T* out, typename S::T* scratch) {
    using T = typename S::T;
    using V = typename S::V;
    using I64 = std::int64_t;
    constexpr int W = S::W;
    const T lowest = -__builtin_huge_val();
    const V vlow = S::bcast(&lowest);
    const I64 tw = (g.ow - 1) * g.sw + g.kw;           // row positions the windows cover
    const I64 n = g.w < tw - g.pw ? g.w : tw - g.pw;   // input columns inside them
    static_assert(W <= kMaxLanes, "pool.cpp sizes the scratch for kMaxLanes");
    const I64 pitch = tw + 2 * kMaxLanes + 1;          // a row: tw + 2W + 1 values used
    for (I64 band = 0; band < g.oh; band += kPoolBandRows) {
        const I64 band_end = band + kPoolBandRows < g.oh ? band + kPoolBandRows : g.oh;
        for (I64 y = band; y < band_end; ++y) {
            T* row = scratch + (y - band) * pitch;
            const I64 y0 = y * g.sh - g.ph;
            const I64 ya = y0 > 0 ? y0 : 0, yb = y0 + g.kh < g.h ? y0 + g.kh : g.h;
            T* r = row + g.pw;
            if (ya >= yb || n <= 0) {  // a window over no input row
                fill_n<S>(row, tw + 2 * W + 1, lowest);
                continue;
            }
            if (g.pw > 0) fill_n<S>(row, g.pw, lowest);
            if (n >= W) {
                // Each vector of columns max'ed over the window's input rows in registers and
                // stored once; the last vector ends at column n, over columns already done
                // (the same values again): no masked loads and stores, which are slow on AMD
                // cores (vmaskmovps), and no load of a row just stored.
                // (Windows of 2 and 3 rows, straight-line: the loops over them, two trips
                // each, were the hottest code of the kernel's profile.)
                const T* x0 = x + ya * g.w;
                const I64 rows = yb - ya, w = g.w;
                auto column = [&](I64 i) {
                    V v = S::load(x0 + i);
                    if (rows == 3) {
                        v = S::maxnan(S::load(x0 + 2 * w + i), S::maxnan(S::load(x0 + w + i), v));
                    } else if (rows == 2) {
                        v = S::maxnan(S::load(x0 + w + i), v);
                    } else {
                        for (I64 iy = 1; iy < rows; ++iy) v = S::maxnan(S::load(x0 + iy * w + i), v);
                    }
                    S::store(r + i, v);
                };
                for (I64 i = 0; i + W < n; i += W) column(i);
                column(n - W);
            } else {
                // The first input row copied; the next ones max'ed in.
                S::store_n(r, S::load_n(x + ya * g.w, n), n);
                for (I64 iy = ya + 1; iy < yb; ++iy) S::store_n(r, S::maxnan(S::load_n(x + iy * g.w, n), S::load(r)), n);
            }
            fill_n<S>(r + n, tw + 2 * W + 1 - g.pw - n, lowest);
        }
        for (I64 y = band; y < band_end; ++y) {
            const T* row = scratch + (y - band) * pitch;
            T* o = out + y * g.ow;
            for (I64 xs = 0; xs < g.ow; xs += W) {
                // A last vector of outputs past the row's end starts early instead (its first
                // outputs again), where the row has a whole vector.
                const I64 xo = xs + W > g.ow && g.ow >= W ? g.ow - W : xs;
                V acc = vlow;
                if (g.sw == 1 && g.kw == 3) {  // (straight-line, as the rows above)
                    acc = S::maxnan(S::load(row + xo + 2), S::maxnan(S::load(row + xo + 1), S::load(row + xo)));
                } else if (g.sw == 2 && g.kw == 3) {
                    acc = S::maxnan(S::load2(row + 2 * xo + 2), S::maxnan(S::load2(row + 2 * xo + 1), S::load2(row + 2 * xo)));
                } else if (g.sw == 1) {
                    for (I64 j = 0; j < g.kw; ++j) acc = S::maxnan(S::load(row + xo + j), acc);
                } else if (g.sw == 2) {
                    for (I64 j = 0; j < g.kw; ++j) acc = S::maxnan(S::load2(row + 2 * xo + j), acc);
                } else {
                    alignas(64) T lanes[W];
                    for (int l = 0; l < W; ++l) {
                        T m = lowest;
                        for (I64 j = 0; j < g.kw && (xo + l) < g.ow; ++j) {
                            const T v = row[(xo + l) * g.sw + j];
                            m = (v != v || v > m) ? v : m;
                        }
                        lanes[l] = m;
                    }
                    acc = S::load(lanes);
                }
                if (xo + W <= g.ow) S::store(o + xo, acc);
                else S::store_n(o + xo, acc, g.ow - xo);
            }
        }
    }
}

// Column sums in double of f32 data (col_sum.h), for the f64 traits D (load_f32(p): W floats
// widened). N columns of W lanes at once, each its own chain of additions in row order.
template <class D, int N>
void col_sum_units(const float* const* base, double* const* dst, std::int64_t r, std::int64_t b) {
    typename D::V acc[N];
#pragma GCC unroll 8
    for (int u = 0; u < N; ++u) acc[u] = D::zero();
    for (std::int64_t k = 0; k < r; ++k)
#pragma GCC unroll 8
        for (int u = 0; u < N; ++u) acc[u] = D::add(acc[u], D::load_f32(base[u] + k * b));
#pragma GCC unroll 8
    for (int u = 0; u < N; ++u) D::store(dst[u], acc[u]);
}

// out[i * b + j] = the sum over k < r of x[(i * r + k) * b + j], from 0.0 in order of k; the
// vectors of W columns of every i are taken eight at a time (across i where b is small:
// the blocked layout's b = 16 is 4 or 2 vectors), the last b % W columns one by one.
template <class D> void col_sum(const float* x, std::int64_t a, std::int64_t r, std::int64_t b, double* out) {
    constexpr int W = D::W, kUnits = 8;
    const float* base[kUnits];
    double* dst[kUnits];
    int n = 0;
    auto flush = [&] {
        switch (n) {
        case 1: col_sum_units<D, 1>(base, dst, r, b); break;
        case 2: col_sum_units<D, 2>(base, dst, r, b); break;
        case 3: col_sum_units<D, 3>(base, dst, r, b); break;
        case 4: col_sum_units<D, 4>(base, dst, r, b); break;
        case 5: col_sum_units<D, 5>(base, dst, r, b); break;
        case 6: col_sum_units<D, 6>(base, dst, r, b); break;
        case 7: col_sum_units<D, 7>(base, dst, r, b); break;
        case 8: col_sum_units<D, 8>(base, dst, r, b); break;
        default: break;
        }
        n = 0;
    };
    for (std::int64_t i = 0; i < a; ++i) {
        const float* xi = x + i * r * b;
        std::int64_t j = 0;
        for (; j + W <= b; j += W) {
            base[n] = xi + j;
            dst[n] = out + i * b + j;
            if (++n == kUnits) flush();
        }
        for (; j < b; ++j) out[i * b + j] = col_sum_column(xi + j, r, b);
    }
    flush();
}

// The table of one traits type: tiles of 1..MR rows of NV vectors, streamed rows 1..4,
// the depthwise plane.
template <class S, int MR, int NV, class Table, std::size_t... R>
constexpr Table make_table(CpuIsa isa, std::int64_t kc, std::int64_t mc, std::int64_t nc, std::index_sequence<R...>) {
    return Table{isa,
                 MR,
                 NV * S::W,
                 kc,
                 mc,
                 nc,
                 {nullptr, &tile<S, MR, NV, int(R) + 1>...},
                 {nullptr, &rows<S, 1>, &rows<S, 2>, &rows<S, 3>, &rows<S, 4>},
                 &dw_planes<S>,
                 &max_pool<S>};
}

}  // namespace kiln::cpu::simd
