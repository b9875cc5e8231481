#pragma once
// The vector kernels of the host (gemm.h), written once over a traits type S that wraps one
// instruction set's intrinsics for one element type:
//   S::T (float, double), S::V (the vector), S::W (lanes), zero(), load(p), store(p, v),
//   bcast(p), fma(a, b, c) = a * b + c, add(a, b), load2(p) = {p[0], p[2], ..., p[2W-2]},
//   load_n(p, n) = {p[0], ..., p[n-1], 0, ...} and store_n(p, v, n) for 0 <= n <= W (masked:
//   nothing outside the n elements is touched), maxnan(a, b) (per lane: NaN if either is,
//   else the larger).
// Each simd_<isa>.cpp defines its traits and instantiates the kernels into its tables
// (gemm.h). It includes this header after every standard header and inside
// `#pragma GCC target(...)`, so that these templates, and nothing shared with the rest of
// the program, are compiled for that instruction set.
//
// The matrix tile keeps M x NV vector accumulators in registers over the whole depth kc:
// per step it loads NV vectors of B and broadcasts M values of A (a register tile of
// 6 x 16 floats on AVX2 uses 12 of the 16 ymm registers, 12 x 32 on AVX-512 24 of 32 zmm).
#include <cstdint>

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
        for (; x < n; ++x)
            for (int r = 0; r < M; ++r) {
                T sum = c[r * ldc + x];
                for (int u = 0; u < KU; ++u) sum += a[r * lda + k + u] * bk[u * ldb + x];
                c[r * ldc + x] = sum;
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

// One output row of a depthwise convolution: out[x] += sum over r < rows, j < kw of
// w[r][j] * in[r][x * STRIDE + j * dil] for x < n. Each vector of W outputs is loaded
// once, takes every tap and is stored once; four vectors at a time are independent chains
// of FMAs (one chain of kh * kw taps would wait on the FMA latency). K3: a 3 x 3 filter
// (rows and kw are 3), whose nine weights stay in registers. The last W outputs are one
// vector computed first from the outputs as they are, so no scalar tail is left; a row
// shorter than W is one masked vector. The input loads read whole vectors: up to 2W + 1
// elements past the last tap (dw_plane's band has that slack).
// W consecutive inputs (STRIDE 1) or every other one of 2W (STRIDE 2).
template <class S, int STRIDE> typename S::V dw_load(const typename S::T* p) {
    if constexpr (STRIDE == 1) return S::load(p);
    else return S::load2(p);
}

// acc[u] += the taps of outputs x + u * W .. x + u * W + W for u < U (the arguments of
// dw_row; w3: the 3 x 3 weights when K3).
template <class S, int STRIDE, bool K3, int U>
[[gnu::always_inline]] inline void dw_taps(typename S::V (&acc)[U], std::int64_t x, std::int64_t rows,
                                           const typename S::T* const* in, const typename S::T* const* w,
                                           const typename S::V (&w3)[3][3], std::int64_t kw, std::int64_t dil) {
    constexpr int W = S::W;
    if constexpr (K3) {
#pragma GCC unroll 3
        for (int r = 0; r < 3; ++r)
#pragma GCC unroll 3
            for (int j = 0; j < 3; ++j)
#pragma GCC unroll 4
                for (int u = 0; u < U; ++u)
                    acc[u] = S::fma(w3[r][j], dw_load<S, STRIDE>(in[r] + (x + u * W) * STRIDE + j * dil), acc[u]);
    } else {
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t j = 0; j < kw; ++j) {
                const typename S::V wv = S::bcast(w[r] + j);
#pragma GCC unroll 4
                for (int u = 0; u < U; ++u)
                    acc[u] = S::fma(wv, dw_load<S, STRIDE>(in[r] + (x + u * W) * STRIDE + j * dil), acc[u]);
            }
    }
}

template <class S, int STRIDE, bool K3>
void dw_row(std::int64_t n, std::int64_t rows_in, const typename S::T* const* in, const typename S::T* const* w,
            std::int64_t kw_in, std::int64_t dil, typename S::T* out) {
    using T = typename S::T;
    using V = typename S::V;
    constexpr int W = S::W, U = 4;
    const std::int64_t rows = K3 ? 3 : rows_in, kw = K3 ? 3 : kw_in;
    V w3[3][3];
    if constexpr (K3) {
#pragma GCC unroll 3
        for (int r = 0; r < 3; ++r)
#pragma GCC unroll 3
            for (int j = 0; j < 3; ++j) w3[r][j] = S::bcast(w[r] + j);
    }
    if (n < W) {
        V v[1] = {S::load_n(out, n)};
        dw_taps<S, STRIDE, K3, 1>(v, 0, rows, in, w, w3, kw, dil);
        S::store_n(out, v[0], n);
        return;
    }
    std::int64_t x = 0;
    alignas(64) T last[W];
    const bool tail = n % W != 0;
    if (tail) {
        V v[1] = {S::load(out + n - W)};
        dw_taps<S, STRIDE, K3, 1>(v, n - W, rows, in, w, w3, kw, dil);
        S::store(last, v[0]);
    }
    for (; x + U * W <= n; x += U * W) {
        V v[U];
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u) v[u] = S::load(out + x + u * W);
        dw_taps<S, STRIDE, K3, U>(v, x, rows, in, w, w3, kw, dil);
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u) S::store(out + x + u * W, v[u]);
    }
    for (; x + W <= n; x += W) {
        V v[1] = {S::load(out + x)};
        dw_taps<S, STRIDE, K3, 1>(v, x, rows, in, w, w3, kw, dil);
        S::store(out + x, v[0]);
    }
    if (tail) S::store_n(out + x, S::load_n(last + (x - (n - W)), n - x), n - x);
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

// Output pixels [p0, p1) of one depthwise plane (depthwise.h): for each band of output rows,
// the input rows it needs are copied into a zero-padded band of pitch wp, the taps run over
// it (one flat row, or row by row) into a flat output of the same pitch started from init,
// and the pixels inside [p0, p1) are copied out.
template <class S>
void dw_plane(const Im2colShape& g, const DwPlan& pl, const typename S::T* x, const typename S::T* w, typename S::T init,
              typename S::T* out, std::int64_t p0, std::int64_t p1, typename S::T* scratch) {
    using T = typename S::T;
    using I64 = std::int64_t;
    constexpr I64 kRowsPerCall = 16;  // filter rows per call of the row kernel (taller: several)
    if (p0 >= p1) return;
    T* band = scratch;
    T* flat = scratch + pl.band_elems;
    const T* in_rows[kRowsPerCall];
    const T* w_rows[kRowsPerCall];
    const bool k3 = g.kh == 3 && g.kw == 3;
    const I64 y_first = p0 / g.ow, y_last = (p1 - 1) / g.ow;
    for (I64 y0 = y_first; y0 <= y_last; y0 += pl.rows) {
        const I64 nrows = pl.rows < y_last + 1 - y0 ? pl.rows : y_last + 1 - y0;
        const I64 iy0 = y0 * g.sh - g.ph, brows = (nrows - 1) * g.sh + pl.ext;
        for (I64 r = 0; r < brows; ++r) {
            T* dst = band + r * pl.wp;
            const I64 iy = iy0 + r;
            fill_n<S>(dst, pl.wp, T(0));
            if (iy >= 0 && iy < g.h) copy_n<S>(x + iy * g.w, g.w, dst + g.pw);
        }
        fill_n<S>(band + brows * pl.wp, pl.slack, T(0));  // read by stride-2 loads past the last tap
        const I64 nflat = (nrows - 1) * pl.wp + g.ow;
        fill_n<S>(flat, nflat, init);
        for (I64 i0 = 0; i0 < g.kh; i0 += kRowsPerCall) {
            const I64 taps = g.kh - i0 < kRowsPerCall ? g.kh - i0 : kRowsPerCall;
            for (I64 i = 0; i < taps; ++i) w_rows[i] = w + (i0 + i) * g.kw;
            if (pl.flat) {
                for (I64 i = 0; i < taps; ++i) in_rows[i] = band + (i0 + i) * g.dh * pl.wp;
                if (g.sw == 1) {
                    if (k3) dw_row<S, 1, true>(nflat, 3, in_rows, w_rows, 3, g.dw, flat);
                    else dw_row<S, 1, false>(nflat, taps, in_rows, w_rows, g.kw, g.dw, flat);
                } else {
                    if (k3) dw_row<S, 2, true>(nflat, 3, in_rows, w_rows, 3, g.dw, flat);
                    else dw_row<S, 2, false>(nflat, taps, in_rows, w_rows, g.kw, g.dw, flat);
                }
                continue;
            }
            for (I64 r = 0; r < nrows; ++r) {
                for (I64 i = 0; i < taps; ++i) in_rows[i] = band + (r * g.sh + (i0 + i) * g.dh) * pl.wp;
                T* o = flat + r * pl.wp;
                if (g.sw == 1) {
                    dw_row<S, 1, false>(g.ow, taps, in_rows, w_rows, g.kw, g.dw, o);
                    continue;
                }
                if (g.sw == 2) {
                    if (k3) dw_row<S, 2, true>(g.ow, 3, in_rows, w_rows, 3, g.dw, o);
                    else dw_row<S, 2, false>(g.ow, taps, in_rows, w_rows, g.kw, g.dw, o);
                    continue;
                }
                for (I64 xo = 0; xo < g.ow; ++xo) {  // strides above 2 are rare: scalar
                    T acc = o[xo];
                    for (I64 i = 0; i < taps; ++i)
                        for (I64 j = 0; j < g.kw; ++j) acc += w_rows[i][j] * in_rows[i][xo * g.sw + j * g.dw];
                    o[xo] = acc;
                }
            }
        }
        for (I64 r = 0; r < nrows; ++r) {
            const I64 y = y0 + r;
            const I64 a = p0 > y * g.ow ? p0 : y * g.ow, b = p1 < (y + 1) * g.ow ? p1 : (y + 1) * g.ow;
            if (a < b) copy_n<S>(flat + r * pl.wp + (a - y * g.ow), b - a, out + (a - p0));
        }
    }
}

// One plane of a 2-D max pool (pool.h). Per output row: the window's input rows are
// reduced into one row (vertical max), placed between columns of -inf that stand for the
// padding and the windows' overhang; then each output is the max of kw neighbours of that
// row (horizontal max), vectorised over the outputs for strides 1 and 2. NaN propagates.
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
    T* row = scratch;                                  // tw + 2W + 1 values
    for (I64 y = 0; y < g.oh; ++y) {
        fill_n<S>(row, tw + 2 * W + 1, lowest);
        const I64 y0 = y * g.sh - g.ph;
        const I64 ya = y0 > 0 ? y0 : 0, yb = y0 + g.kh < g.h ? y0 + g.kh : g.h;
        T* r = row + g.pw;
        for (I64 iy = ya; iy < yb && n > 0; ++iy) {
            const T* src = x + iy * g.w;
            I64 i = 0;
            for (; i + W <= n; i += W) S::store(r + i, S::maxnan(S::load(src + i), S::load(r + i)));
            if (i < n) S::store_n(r + i, S::maxnan(S::load_n(src + i, n - i), S::load(r + i)), n - i);
        }
        T* o = out + y * g.ow;
        for (I64 xo = 0; xo < g.ow; xo += W) {
            V acc = vlow;
            if (g.sw == 1) {
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
                 &dw_plane<S>,
                 &max_pool<S>};
}

}  // namespace kiln::cpu::simd
