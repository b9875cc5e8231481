// The host's vector kernels for AVX-512F (simd_kernels.h), compiled for that
// instruction set with function-level target options while the rest of the library stays
// generic x86-64; gemm.cpp selects them only when the CPU and OS report AVX-512F.
//
// Register tiles: f32 12 x 32 (24 of the 32 zmm registers accumulate), f64 12 x 16. Cache
// blocks: KC = 256, MC = 144 rows of A, NC = 1024 columns of B (f32; half for f64).
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

// Everything from here to the pop is compiled for AVX-512F. Only code defined in this
// region (the traits and the kernel templates) is; the standard headers above are not.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f")
// The kernels' short store loops (a band row's zeros) stay stores, not calls of memset.
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#endif
#include "src/cpu/simd_kernels.h"
#include "src/cpu/simd_winograd.h"
#include "src/cpu/simd_nchwc.h"

namespace kiln::cpu {
namespace {

struct Avx512F32 {
    using T = float;
    using V = __m512;
    static constexpr int W = 16;
    static V zero() { return _mm512_setzero_ps(); }
    static V load(const T* p) { return _mm512_loadu_ps(p); }
    static void store(T* p, V v) { _mm512_storeu_ps(p, v); }
    static V bcast(const T* p) { return _mm512_set1_ps(*p); }
    static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
    static V add(V a, V b) { return _mm512_add_ps(a, b); }
    static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
    static V set1(T x) { return _mm512_set1_ps(x); }
    static V load_lanes(const T* p, std::int64_t lo, std::int64_t hi) {  // 0 <= lo < hi <= W
        return _mm512_maskz_loadu_ps(static_cast<__mmask16>(first(hi) & ~first(lo)), p);
    }
    // p[4i + j] of p[0 .. 64) as vector j (j < 4).
    static void deint4(const T* p, V& j0, V& j1, V& j2, V& j3) {
        const __m512i e = _mm512_set_epi32(29, 25, 21, 17, 13, 9, 5, 1, 28, 24, 20, 16, 12, 8, 4, 0);
        const __m512i o = _mm512_set_epi32(31, 27, 23, 19, 15, 11, 7, 3, 30, 26, 22, 18, 14, 10, 6, 2);
        const __m512i lo = _mm512_set_epi32(23, 22, 21, 20, 19, 18, 17, 16, 7, 6, 5, 4, 3, 2, 1, 0);
        const __m512i hi = _mm512_set_epi32(31, 30, 29, 28, 27, 26, 25, 24, 15, 14, 13, 12, 11, 10, 9, 8);
        const V v0 = load(p), v1 = load(p + 16), v2 = load(p + 32), v3 = load(p + 48);
        // a, c: columns 0 and 1 of tiles 0-7 and 8-15; b, d: columns 2 and 3.
        const V a = _mm512_permutex2var_ps(v0, e, v1), b = _mm512_permutex2var_ps(v0, o, v1);
        const V c = _mm512_permutex2var_ps(v2, e, v3), d = _mm512_permutex2var_ps(v2, o, v3);
        j0 = _mm512_permutex2var_ps(a, lo, c);
        j1 = _mm512_permutex2var_ps(a, hi, c);
        j2 = _mm512_permutex2var_ps(b, lo, d);
        j3 = _mm512_permutex2var_ps(b, hi, d);
    }
    static V load2(const T* p) {  // p[0], p[2], ..., p[30]
        const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
        return _mm512_permutex2var_ps(_mm512_loadu_ps(p), even, _mm512_loadu_ps(p + 16));
    }
    static __mmask16 first(std::int64_t n) { return static_cast<__mmask16>((1u << n) - 1); }  // 0 <= n <= W
    static V load_n(const T* p, std::int64_t n) { return _mm512_maskz_loadu_ps(first(n), p); }
    // p[0 .. n) (0 <= n <= 2W, zeros after) split: even[i] = p[2i], odd[i] = p[2i + 1].
    static void deint(const T* p, std::int64_t n, V& even, V& odd) {
        const V lo = n >= W ? load(p) : load_n(p, n), hi = n >= 2 * W ? load(p + W) : load_n(p + W, n > W ? n - W : 0);
        even = _mm512_permutex2var_ps(lo, _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0), hi);
        odd = _mm512_permutex2var_ps(lo, _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1), hi);
    }
    static V shift_in(V v, T s) {  // s, v[0], ..., v[W - 2]
        // (The masked form, all lanes: GCC 12 warns that the plain form's source is uninitialised.)
        const __m512i a = _mm512_castps_si512(v), b = _mm512_castps_si512(_mm512_set1_ps(s));
        return _mm512_castsi512_ps(_mm512_mask_alignr_epi32(a, static_cast<__mmask16>(0xffff), a, b, 15));
    }
    static V load_from(const T* p, std::int64_t k) {  // zeros, then p[k .. W) (lanes below k not read)
        return _mm512_maskz_loadu_ps(static_cast<__mmask16>(~first(k)), p);
    }
    static V head(V v, std::int64_t n) { return _mm512_maskz_mov_ps(first(n), v); }  // lanes >= n zeroed
    static void store_n(T* p, V v, std::int64_t n) { _mm512_mask_storeu_ps(p, first(n), v); }
    static V clamp(V v, V lo, V hi) {  // (gemm.h, DwPlan; masked: GCC 12 warns of the unmasked forms)
        return _mm512_mask_min_ps(hi, 0xFFFF, hi, _mm512_mask_max_ps(lo, 0xFFFF, lo, v));
    }
    // dw_silu's bit operations (as Avx2F32's; masked forms, as in clamp).
    static V min_bits(V x, std::uint32_t ub, std::int32_t sb) {
        const __m512i xb = _mm512_castps_si512(x);
        const __m512i b = _mm512_mask_min_epu32(xb, 0xFFFF, xb, _mm512_set1_epi32(static_cast<int>(ub)));
        return _mm512_castsi512_ps(_mm512_mask_min_epi32(b, 0xFFFF, b, _mm512_set1_epi32(sb)));
    }
    static V exp2_bits(V t) {
        const __m512i tb = _mm512_castps_si512(t);
        return _mm512_castsi512_ps(_mm512_mask_slli_epi32(tb, 0xFFFF, tb, 23));
    }
    static V div(V a, V b) { return _mm512_div_ps(a, b); }
    static V maxnan(V a, V b) {  // max_ps gives b when either is NaN (a NaN b stays); a NaN a is kept
        return _mm512_mask_mov_ps(_mm512_mask_max_ps(b, 0xFFFF, a, b), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a);
    }
    [[gnu::always_inline]] static void transpose(V (&r)[W]) {  // r[i][j] -> r[j][i]
        // (Unpacks and shuffles in their masked form, all lanes: GCC 12 warns that the plain
        // forms' undefined source is uninitialised.)
        // Pairs of rows interleaved (t), then pairs of pairs (u: lane L of u[4 * q + c] holds
        // column 4L + c of rows 4q..4q+3), then the 128-bit lanes gathered in two steps.
        V t[W], u[W];
        #pragma GCC unroll 16
        for (int i = 0; i < W; i += 2) {
            t[i] = _mm512_mask_unpacklo_ps(r[i], 0xFFFF, r[i], r[i + 1]);
            t[i + 1] = _mm512_mask_unpackhi_ps(r[i], 0xFFFF, r[i], r[i + 1]);
        }
        #pragma GCC unroll 16
        for (int i = 0; i < W; i += 4) {
            const __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
            const __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
            u[i] = _mm512_castpd_ps(_mm512_mask_unpacklo_pd(a, 0xFF, a, c));
            u[i + 1] = _mm512_castpd_ps(_mm512_mask_unpackhi_pd(a, 0xFF, a, c));
            u[i + 2] = _mm512_castpd_ps(_mm512_mask_unpacklo_pd(b, 0xFF, b, d));
            u[i + 3] = _mm512_castpd_ps(_mm512_mask_unpackhi_pd(b, 0xFF, b, d));
        }
        #pragma GCC unroll 16
        for (int q = 0; q < 8; q += 4)  // v: lanes 0, 2 (0x88) and 1, 3 (0xdd) of u[c], u[c + 4]
            #pragma GCC unroll 16
            for (int c = 0; c < 4; ++c) {
                t[2 * q + c] = _mm512_mask_shuffle_f32x4(u[2 * q + c], 0xFFFF, u[2 * q + c], u[2 * q + c + 4], 0x88);
                t[2 * q + c + 4] = _mm512_mask_shuffle_f32x4(u[2 * q + c], 0xFFFF, u[2 * q + c], u[2 * q + c + 4], 0xdd);
            }
        #pragma GCC unroll 16
        for (int c = 0; c < 4; ++c) {
            r[c] = _mm512_mask_shuffle_f32x4(t[c], 0xFFFF, t[c], t[c + 8], 0x88);
            r[c + 4] = _mm512_mask_shuffle_f32x4(t[c + 4], 0xFFFF, t[c + 4], t[c + 12], 0x88);
            r[c + 8] = _mm512_mask_shuffle_f32x4(t[c], 0xFFFF, t[c], t[c + 8], 0xdd);
            r[c + 12] = _mm512_mask_shuffle_f32x4(t[c + 4], 0xFFFF, t[c + 4], t[c + 12], 0xdd);
        }
    }
};

struct Avx512F64 {
    using T = double;
    using V = __m512d;
    static constexpr int W = 8;
    static V zero() { return _mm512_setzero_pd(); }
    static V load(const T* p) { return _mm512_loadu_pd(p); }
    static V load_f32(const float* p) { return _mm512_maskz_cvtps_pd(0xFF, _mm256_loadu_ps(p)); }  // W floats, widened (maskz: GCC 12 warns on the unmasked form)
    static void store(T* p, V v) { _mm512_storeu_pd(p, v); }
    static V bcast(const T* p) { return _mm512_set1_pd(*p); }
    static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
    static V add(V a, V b) { return _mm512_add_pd(a, b); }
    static V load2(const T* p) {  // p[0], p[2], ..., p[14]
        const __m512i even = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
        return _mm512_permutex2var_pd(_mm512_loadu_pd(p), even, _mm512_loadu_pd(p + 8));
    }
    static __mmask8 first(std::int64_t n) { return static_cast<__mmask8>((1u << n) - 1); }  // 0 <= n <= W
    static V load_n(const T* p, std::int64_t n) { return _mm512_maskz_loadu_pd(first(n), p); }
    // p[0 .. n) (0 <= n <= 2W, zeros after) split: even[i] = p[2i], odd[i] = p[2i + 1].
    static void deint(const T* p, std::int64_t n, V& even, V& odd) {
        const V lo = n >= W ? load(p) : load_n(p, n), hi = n >= 2 * W ? load(p + W) : load_n(p + W, n > W ? n - W : 0);
        even = _mm512_permutex2var_pd(lo, _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), hi);
        odd = _mm512_permutex2var_pd(lo, _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1), hi);
    }
    static V shift_in(V v, T s) {  // s, v[0], ..., v[W - 2]
        const __m512i a = _mm512_castpd_si512(v), b = _mm512_castpd_si512(_mm512_set1_pd(s));
        return _mm512_castsi512_pd(_mm512_mask_alignr_epi64(a, static_cast<__mmask8>(0xff), a, b, 7));
    }
    static V load_from(const T* p, std::int64_t k) {  // zeros, then p[k .. W) (lanes below k not read)
        return _mm512_maskz_loadu_pd(static_cast<__mmask8>(~first(k)), p);
    }
    static V head(V v, std::int64_t n) { return _mm512_maskz_mov_pd(first(n), v); }
    static void store_n(T* p, V v, std::int64_t n) { _mm512_mask_storeu_pd(p, first(n), v); }
    static V clamp(V v, V lo, V hi) { return _mm512_mask_min_pd(hi, 0xFF, hi, _mm512_mask_max_pd(lo, 0xFF, lo, v)); }
    static V maxnan(V a, V b) {
        return _mm512_mask_mov_pd(_mm512_mask_max_pd(b, 0xFF, a, b), _mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q), a);
    }
    [[gnu::always_inline]] static void transpose(V (&r)[W]) {  // r[i][j] -> r[j][i]
        // t: lane L of t[2p + c] holds column 2L + c of rows 2p, 2p + 1; then the 128-bit
        // lanes gathered in two steps.
        V t[W], v[W];
        #pragma GCC unroll 16
        for (int i = 0; i < W; i += 2) {
            t[i] = _mm512_mask_unpacklo_pd(r[i], 0xFF, r[i], r[i + 1]);
            t[i + 1] = _mm512_mask_unpackhi_pd(r[i], 0xFF, r[i], r[i + 1]);
        }
        #pragma GCC unroll 16
        for (int c = 0; c < 2; ++c) {
            v[c] = _mm512_mask_shuffle_f64x2(t[c], 0xFF, t[c], t[c + 2], 0x88);
            v[c + 2] = _mm512_mask_shuffle_f64x2(t[c], 0xFF, t[c], t[c + 2], 0xdd);
            v[c + 4] = _mm512_mask_shuffle_f64x2(t[c + 4], 0xFF, t[c + 4], t[c + 6], 0x88);
            v[c + 6] = _mm512_mask_shuffle_f64x2(t[c + 4], 0xFF, t[c + 4], t[c + 6], 0xdd);
        }
        #pragma GCC unroll 16
        for (int c = 0; c < 2; ++c) {
            r[c] = _mm512_mask_shuffle_f64x2(v[c], 0xFF, v[c], v[c + 4], 0x88);
            r[c + 2] = _mm512_mask_shuffle_f64x2(v[c + 2], 0xFF, v[c + 2], v[c + 6], 0x88);
            r[c + 4] = _mm512_mask_shuffle_f64x2(v[c], 0xFF, v[c], v[c + 4], 0xdd);
            r[c + 6] = _mm512_mask_shuffle_f64x2(v[c + 2], 0xFF, v[c + 2], v[c + 6], 0xdd);
        }
    }
};

}  // namespace

constinit const SimdKernels<float> kAvx512F32 = simd::make_table<Avx512F32, 12, 2, SimdKernels<float>>(
    CpuIsa::avx512, 256, 144, 1024, std::make_index_sequence<12>{});
// Winograd F(4x4, 3x3): register tiles of 12 tiles x 32 channels (24 accumulators).
constinit const WinogradFn kAvx512Winograd = &simd::winograd43<Avx512F32, 12>;
constinit const SimdKernels<double> kAvx512F64 = simd::make_table<Avx512F64, 12, 2, SimdKernels<double>>(
    CpuIsa::avx512, 256, 72, 512, std::make_index_sequence<12>{});

// The blocked-layout convolution (conv_nchwc.h).
constinit const NchwcFn kAvx512Nchwc = &simd::nchwc_conv<Avx512F32>;

// Column sums in double (col_sum.h).
constinit const ColSumFn kAvx512ColSum = &simd::col_sum<Avx512F64>;

}  // namespace kiln::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
