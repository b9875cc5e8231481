// The host's vector kernels for AVX2 + FMA (simd_kernels.h), compiled for that
// instruction set with function-level target options while the rest of the library stays
// generic x86-64; gemm.cpp selects them only when the CPU reports AVX2 and FMA.
//
// Register tiles: f32 6 x 16 (12 ymm accumulators), f64 6 x 8. Cache blocks: KC = 256
// (a 256 x 16 float panel of B is 16 KiB, half of a 32 KiB L1), MC = 144 rows of A (a 144 x
// 256 float block is 144 KiB, within a 512 KiB L2), NC = 1024 columns of B.
#include "src/core/scalar_ops.h"
#include "src/cpu/col_sum.h"
#include "src/cpu/conv_nchwc.h"
#include "src/cpu/gemm.h"
#include "src/cpu/vmath_coeffs.h"
#include "src/cpu/winograd.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

// Everything from here to the pop is compiled for AVX2 + FMA. Only code defined in this
// region (the traits and the kernel templates) is; the standard headers above are not.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
// The kernels' short store loops (a band row's zeros) stay stores, not calls of memset.
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#endif
#include "src/cpu/simd_kernels.h"
#include "src/cpu/simd_winograd.h"
#include "src/cpu/simd_nchwc.h"

namespace kiln::cpu {
namespace {

struct Avx2F32 {
    using T = float;
    using V = __m256;
    static constexpr int W = 8;
    static V zero() { return _mm256_setzero_ps(); }
    static V load(const T* p) { return _mm256_loadu_ps(p); }
    static void store(T* p, V v) { _mm256_storeu_ps(p, v); }
    static V bcast(const T* p) { return _mm256_broadcast_ss(p); }
    static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
    static V add(V a, V b) { return _mm256_add_ps(a, b); }
    static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
    static V set1(T x) { return _mm256_set1_ps(x); }
    static V load_lanes(const T* p, std::int64_t lo, std::int64_t hi) {  // 0 <= lo < hi <= W
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i in = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(lo)), lane),
                                               _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(hi)), lane));
        return _mm256_maskload_ps(p, in);
    }
    // p[4i + j] of p[0 .. 32) as vector j (j < 4): a 4 x 4 transpose
    // in each 128-bit lane (lane L: tiles L, L + 2, L + 4, L + 6), then the tiles in order.
    static void deint4(const T* p, V& j0, V& j1, V& j2, V& j3) {
        const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        const V v0 = load(p), v1 = load(p + 8), v2 = load(p + 16), v3 = load(p + 24);
        const V t0 = _mm256_unpacklo_ps(v0, v1), t1 = _mm256_unpackhi_ps(v0, v1);
        const V t2 = _mm256_unpacklo_ps(v2, v3), t3 = _mm256_unpackhi_ps(v2, v3);
        j0 = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)), order);
        j1 = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2)), order);
        j2 = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)), order);
        j3 = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2)), order);
    }
    static V load2(const T* p) {  // p[0], p[2], ..., p[14]
        const V lo = _mm256_loadu_ps(p), hi = _mm256_loadu_ps(p + 8);
        const V even = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));  // l0 l2 h0 h2 | l4 l6 h4 h6
        return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), _MM_SHUFFLE(3, 1, 2, 0)));
    }
    static __m256i first(std::int64_t n) {  // lanes i < n set (0 <= n <= W)
        return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    }
    static V load_n(const T* p, std::int64_t n) { return _mm256_maskload_ps(p, first(n)); }
    // p[0 .. n) (0 <= n <= 2W, zeros after) split: even[i] = p[2i], odd[i] = p[2i + 1].
    static void deint(const T* p, std::int64_t n, V& even, V& odd) {
        const V lo = n >= W ? load(p) : load_n(p, n), hi = n >= 2 * W ? load(p + W) : load_n(p + W, n > W ? n - W : 0);
        const V e = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)), o = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
        even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
        odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0)));
    }
    static V shift_in(V v, T s) {  // s, v[0], ..., v[W - 2]
        const V r = _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6));
        return _mm256_blend_ps(r, _mm256_set1_ps(s), 1);
    }
    static V load_from(const T* p, std::int64_t k) {  // zeros, then p[k .. W) (lanes below k not read)
        return _mm256_maskload_ps(p, _mm256_xor_si256(first(k), _mm256_set1_epi32(-1)));
    }
    static V head(V v, std::int64_t n) { return _mm256_and_ps(v, _mm256_castsi256_ps(first(n))); }  // lanes >= n zeroed
    static void store_n(T* p, V v, std::int64_t n) { _mm256_maskstore_ps(p, first(n), v); }
    static V clamp(V v, V lo, V hi) { return _mm256_min_ps(hi, _mm256_max_ps(lo, v)); }  // (gemm.h, DwPlan)
    // The bit operations of dw_silu (simd_depthwise.h): min(min_u32(bits, ub), ub_s32) on
    // the lanes' bits; 2^n from t = magic + 127 + n (its bits shifted left by 23); a division.
    static V min_bits(V x, std::uint32_t ub, std::int32_t sb) {
        const __m256i b = _mm256_min_epu32(_mm256_castps_si256(x), _mm256_set1_epi32(static_cast<int>(ub)));
        return _mm256_castsi256_ps(_mm256_min_epi32(b, _mm256_set1_epi32(sb)));
    }
    static V exp2_bits(V t) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t), 23)); }
    static V div(V a, V b) { return _mm256_div_ps(a, b); }
    static V maxnan(V a, V b) {  // max_ps gives b when either is NaN; a NaN a is kept
        return _mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    }
    [[gnu::always_inline]] static void transpose(V (&r)[W]) {  // r[i][j] -> r[j][i]
        // Pairs of rows interleaved (t), pairs of pairs (u: lane L of u[4q + c] holds column
        // 4L + c of rows 4q..4q+3), then the 128-bit lanes of u[c] and u[c + 4] paired.
        V t[W], u[W];
        #pragma GCC unroll 16
        for (int i = 0; i < W; i += 2) {
            t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
            t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
        }
        #pragma GCC unroll 16
        for (int i = 0; i < W; i += 4) {
            const __m256d a = _mm256_castps_pd(t[i]), b = _mm256_castps_pd(t[i + 1]);
            const __m256d c = _mm256_castps_pd(t[i + 2]), d = _mm256_castps_pd(t[i + 3]);
            u[i] = _mm256_castpd_ps(_mm256_unpacklo_pd(a, c));
            u[i + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(a, c));
            u[i + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(b, d));
            u[i + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(b, d));
        }
        #pragma GCC unroll 16
        for (int c = 0; c < 4; ++c) {
            r[c] = _mm256_permute2f128_ps(u[c], u[c + 4], 0x20);
            r[c + 4] = _mm256_permute2f128_ps(u[c], u[c + 4], 0x31);
        }
    }
};

struct Avx2F64 {
    using T = double;
    using V = __m256d;
    static constexpr int W = 4;
    static V zero() { return _mm256_setzero_pd(); }
    static V load(const T* p) { return _mm256_loadu_pd(p); }
    static V load_f32(const float* p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }  // W floats, widened
    static void store(T* p, V v) { _mm256_storeu_pd(p, v); }
    static V bcast(const T* p) { return _mm256_broadcast_sd(p); }
    static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
    static V add(V a, V b) { return _mm256_add_pd(a, b); }
    static V load2(const T* p) {  // p[0], p[2], p[4], p[6]
        const V lo = _mm256_loadu_pd(p), hi = _mm256_loadu_pd(p + 4);
        // unpacklo: l0 h0 l2 h2; the permutation puts it in order: l0 l2 h0 h2.
        return _mm256_permute4x64_pd(_mm256_unpacklo_pd(lo, hi), _MM_SHUFFLE(3, 1, 2, 0));
    }
    static __m256i first(std::int64_t n) {  // lanes i < n set (0 <= n <= W)
        return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3));
    }
    static V load_n(const T* p, std::int64_t n) { return _mm256_maskload_pd(p, first(n)); }
    // p[0 .. n) (0 <= n <= 2W, zeros after) split: even[i] = p[2i], odd[i] = p[2i + 1].
    static void deint(const T* p, std::int64_t n, V& even, V& odd) {
        const V lo = n >= W ? load(p) : load_n(p, n), hi = n >= 2 * W ? load(p + W) : load_n(p + W, n > W ? n - W : 0);
        even = _mm256_permute4x64_pd(_mm256_unpacklo_pd(lo, hi), _MM_SHUFFLE(3, 1, 2, 0));
        odd = _mm256_permute4x64_pd(_mm256_unpackhi_pd(lo, hi), _MM_SHUFFLE(3, 1, 2, 0));
    }
    static V shift_in(V v, T s) {  // s, v[0], ..., v[W - 2]
        return _mm256_blend_pd(_mm256_permute4x64_pd(v, _MM_SHUFFLE(2, 1, 0, 3)), _mm256_set1_pd(s), 1);
    }
    static V load_from(const T* p, std::int64_t k) {  // zeros, then p[k .. W) (lanes below k not read)
        return _mm256_maskload_pd(p, _mm256_xor_si256(first(k), _mm256_set1_epi64x(-1)));
    }
    static V head(V v, std::int64_t n) { return _mm256_and_pd(v, _mm256_castsi256_pd(first(n))); }
    static void store_n(T* p, V v, std::int64_t n) { _mm256_maskstore_pd(p, first(n), v); }
    static V clamp(V v, V lo, V hi) { return _mm256_min_pd(hi, _mm256_max_pd(lo, v)); }
    static V maxnan(V a, V b) {
        return _mm256_blendv_pd(_mm256_max_pd(a, b), a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
    }
    [[gnu::always_inline]] static void transpose(V (&r)[W]) {  // r[i][j] -> r[j][i]
        const V t0 = _mm256_unpacklo_pd(r[0], r[1]), t1 = _mm256_unpackhi_pd(r[0], r[1]);
        const V t2 = _mm256_unpacklo_pd(r[2], r[3]), t3 = _mm256_unpackhi_pd(r[2], r[3]);
        r[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
        r[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
        r[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
        r[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
    }
};

}  // namespace

constinit const SimdKernels<float> kAvx2F32 =
    simd::make_table<Avx2F32, 6, 2, SimdKernels<float>>(CpuIsa::avx2, 256, 144, 1024, std::make_index_sequence<6>{});
// Winograd F(4x4, 3x3): register tiles of 6 tiles x 16 channels (12 accumulators).
constinit const WinogradFn kAvx2Winograd = &simd::winograd43<Avx2F32, 6>;
constinit const SimdKernels<double> kAvx2F64 =
    simd::make_table<Avx2F64, 6, 2, SimdKernels<double>>(CpuIsa::avx2, 256, 72, 512, std::make_index_sequence<6>{});

// The blocked-layout convolution (conv_nchwc.h).
constinit const NchwcFn kAvx2Nchwc = &simd::nchwc_conv<Avx2F32>;

// Column sums in double (col_sum.h).
constinit const ColSumFn kAvx2ColSum = &simd::col_sum<Avx2F64>;

}  // namespace kiln::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
