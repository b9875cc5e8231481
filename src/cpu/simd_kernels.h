#pragma once
// The vector kernels of the host (gemm.h), written once over a traits type S that wraps one
// instruction set's intrinsics for one element type:
//   S::T (float, double), S::V (the vector), S::W (lanes), zero(), load(p), store(p, v),
//   bcast(p), fma(a, b, c) = a * b + c, add(a, b), load2(p) = {p[0], p[2], ..., p[2W-2]}.
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
    constexpr int W = S::W, KU = M <= 2 ? 4 : 2;
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

// One output row of a depthwise convolution over the filter rows that fall inside the
// input (see DwRowFn in gemm.h): each vector of W outputs is loaded once, takes every tap
// and is stored once. K3: a 3 x 3 filter with its three rows inside (rows and kw are 3),
// whose nine weights stay in registers. The last W outputs are one vector, computed first
// from the outputs as they are, so no scalar tail is left (rows shorter than W are scalar).
// A stride-2 vector loads 2W inputs and keeps the even ones, so it reads one element past
// its last tap.
// W consecutive inputs (STRIDE 1) or every other one of 2W (STRIDE 2).
template <class S, int STRIDE> typename S::V dw_load(const typename S::T* p) {
    if constexpr (STRIDE == 1) return S::load(p);
    else return S::load2(p);
}

// out[x .. x + W) plus its taps (the arguments of dw_row; w3: the 3 x 3 weights when K3).
template <class S, int STRIDE, bool K3>
typename S::V dw_vector(std::int64_t x, std::int64_t rows, const typename S::T* const* in, const typename S::T* const* w,
                        const typename S::V (&w3)[3][3], std::int64_t kw, std::int64_t dil, const typename S::T* out) {
    typename S::V acc = S::load(out + x);
    if constexpr (K3) {
#pragma GCC unroll 3
        for (int r = 0; r < 3; ++r)
#pragma GCC unroll 3
            for (int j = 0; j < 3; ++j) acc = S::fma(w3[r][j], dw_load<S, STRIDE>(in[r] + x * STRIDE + j * dil), acc);
    } else {
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t j = 0; j < kw; ++j)
                acc = S::fma(S::bcast(w[r] + j), dw_load<S, STRIDE>(in[r] + x * STRIDE + j * dil), acc);
    }
    return acc;
}

template <class S, int STRIDE, bool K3>
void dw_row(std::int64_t n, std::int64_t rows_in, const typename S::T* const* in, const typename S::T* const* w,
            std::int64_t kw_in, std::int64_t dil, typename S::T* out) {
    using T = typename S::T;
    using V = typename S::V;
    constexpr int W = S::W;
    const std::int64_t rows = K3 ? 3 : rows_in, kw = K3 ? 3 : kw_in;
    V w3[3][3];
    if constexpr (K3) {
#pragma GCC unroll 3
        for (int r = 0; r < 3; ++r)
#pragma GCC unroll 3
            for (int j = 0; j < 3; ++j) w3[r][j] = S::bcast(w[r] + j);
    }
    std::int64_t x = 0;
    alignas(64) T last[W];
    const bool tail = n > W && n % W != 0;
    if (tail) S::store(last, dw_vector<S, STRIDE, K3>(n - W, rows, in, w, w3, kw, dil, out));
    for (; x + W <= n; x += W) S::store(out + x, dw_vector<S, STRIDE, K3>(x, rows, in, w, w3, kw, dil, out));
    if (tail)
        for (; x < n; ++x) out[x] = last[x - (n - W)];
    for (; x < n; ++x) {  // n < W
        T sum = out[x];
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t j = 0; j < kw; ++j) sum += w[r][j] * in[r][x * STRIDE + j * dil];
        out[x] = sum;
    }
}

// The table of one traits type: tiles of 1..MR rows of NV vectors, streamed rows 1..4,
// depthwise rows for strides 1 and 2 (any filter, and 3 x 3).
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
                 {nullptr, &dw_row<S, 1, false>, &dw_row<S, 2, false>},
                 {nullptr, &dw_row<S, 1, true>, &dw_row<S, 2, true>}};
}

}  // namespace kiln::cpu::simd
