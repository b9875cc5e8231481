// The GEMM driver (packing and cache blocking around the register-tile
// kernels), the portable kernels, and the run-time choice of instruction set (gemm.h).
#include "src/cpu/gemm.h"

#include "src/core/scalar_ops.h"
#include "src/cpu/col_sum.h"
#include "src/cpu/vmath_coeffs.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>
#include <utility>

// The portable kernels are the same templates as the vector ones, over GCC vector types of
// 16 bytes (SSE2 on x86-64, NEON on AArch64, scalar code elsewhere), compiled for the
// library's own target.
#include "src/cpu/simd_kernels.h"

namespace kiln::cpu {
namespace {

using I64 = std::int64_t;

template <class E> struct Portable {
    using T = E;
    static constexpr int W = static_cast<int>(16 / sizeof(E));
    typedef E V __attribute__((vector_size(16)));
    static V zero() { return V{}; }
    static V load(const T* p) {
        V v;
        std::memcpy(&v, p, sizeof v);
        return v;
    }
    static void store(T* p, V v) { std::memcpy(p, &v, sizeof v); }
    static V bcast(const T* p) { return V{} + *p; }
    static V fma(V a, V b, V c) { return a * b + c; }
    static V add(V a, V b) { return a + b; }
    static V load2(const T* p) {
        V v;
        for (int i = 0; i < W; ++i) v[i] = p[2 * i];
        return v;
    }
    static V load_n(const T* p, std::int64_t n) {  // p[0 .. n), zeros after (0 <= n <= W)
        V v{};
        for (std::int64_t i = 0; i < n; ++i) v[i] = p[i];
        return v;
    }
    // p[0 .. n) (0 <= n <= 2W, zeros after) split: even[i] = p[2i], odd[i] = p[2i + 1].
    static void deint(const T* p, std::int64_t n, V& even, V& odd) {
        V e{}, o{};
        for (int i = 0; i < W; ++i) {
            e[i] = 2 * i < n ? p[2 * i] : T(0);
            o[i] = 2 * i + 1 < n ? p[2 * i + 1] : T(0);
        }
        even = e;
        odd = o;
    }
    static V shift_in(V v, T s) {  // s, v[0], ..., v[W - 2]
        V r{};
        r[0] = s;
        for (int i = 1; i < W; ++i) r[i] = v[i - 1];
        return r;
    }
    static V load_from(const T* p, std::int64_t k) {  // zeros, then p[k .. W) (0 <= k <= W)
        V v{};
        for (std::int64_t i = k; i < W; ++i) v[i] = p[i];
        return v;
    }
    static void store_n(T* p, V v, std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i) p[i] = v[i];
    }
    static V head(V v, std::int64_t n) {  // lanes >= n zeroed
        for (std::int64_t i = n; i < W; ++i) v[i] = T(0);
        return v;
    }
    static V clamp(V v, V lo, V hi) {  // per lane: lo > v ? lo : v, then hi < that ? hi : that (as max_ps, min_ps)
        V r;
        for (int i = 0; i < W; ++i) {
            const T m = lo[i] > v[i] ? lo[i] : v[i];
            r[i] = hi[i] < m ? hi[i] : m;
        }
        return r;
    }
    static V maxnan(V a, V b) {  // per lane: NaN if either is, else the larger
        V r;
        for (int i = 0; i < W; ++i) r[i] = (a[i] != a[i] || a[i] > b[i]) ? a[i] : b[i];
        return r;
    }
    [[gnu::always_inline]] static void transpose(V (&r)[W]) {  // r[i][j] -> r[j][i]
        for (int i = 0; i < W; ++i)
            for (int j = i + 1; j < W; ++j) {
                const T v = r[i][j];
                r[i][j] = r[j][i];
                r[j][i] = v;
            }
    }
};

// Tiles of 4 x 8 floats and 4 x 4 doubles: 8 vector accumulators of the 16 SSE registers.
constexpr SimdKernels<float> kPortableF32 = simd::make_table<Portable<float>, 4, 2, SimdKernels<float>>(
    CpuIsa::portable, 256, 128, 1024, std::make_index_sequence<4>{});
constexpr SimdKernels<double> kPortableF64 = simd::make_table<Portable<double>, 4, 2, SimdKernels<double>>(
    CpuIsa::portable, 256, 64, 512, std::make_index_sequence<4>{});

CpuIsa detect_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
    // __builtin_cpu_supports also checks that the OS saves the ymm / zmm registers (XGETBV).
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return CpuIsa::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuIsa::avx2;
#endif
    return CpuIsa::portable;
}

// A per-thread scratch buffer, 64-byte aligned, grown on demand and kept for the next call
// (packing buffers are up to ~1 MiB: allocating them per call would cost page faults).
class Scratch {
public:
    Scratch() = default;
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    ~Scratch() { release(); }
    template <class T> T* get(I64 count) {
        const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(T);
        if (bytes > bytes_) {
            release();
            data_ = ::operator new(bytes, std::align_val_t{64});
            bytes_ = bytes;
        }
        return static_cast<T*>(data_);
    }

private:
    void release() {
        if (data_ != nullptr) ::operator delete(data_, std::align_val_t{64});
        data_ = nullptr;
        bytes_ = 0;
    }
    void* data_ = nullptr;
    std::size_t bytes_ = 0;
};

thread_local Scratch t_pack_a, t_pack_b;

I64 round_up(I64 v, I64 unit) { return (v + unit - 1) / unit * unit; }
I64 ceil_div(I64 v, I64 d) { return (v + d - 1) / d; }

// A[0..mc) x [0..kc) into panels of mr rows: panel q holds rows q*mr.., value (kk, r) at
// kk * mr + r. Rows past mc in the last panel are left unwritten (the tile of fewer rows
// never reads them).
template <class T> void pack_a(I64 mc, I64 kc, const T* a, I64 lda, T* dst, int mr) {
    for (I64 i0 = 0; i0 < mc; i0 += mr, dst += kc * mr) {
        const int rows = static_cast<int>(std::min<I64>(mr, mc - i0));
        for (int r = 0; r < rows; ++r) {
            const T* src = a + (i0 + r) * lda;
            for (I64 kk = 0; kk < kc; ++kk) dst[kk * mr + r] = src[kk];
        }
    }
}

// B[0..kc) x [0..nc) into panels of nr columns: panel p holds columns p*nr.., row kk at
// kk * nr, zero beyond nc. Reads B row by row (in order), writing one row of each panel.
template <class T> void pack_b(I64 kc, I64 nc, const T* b, I64 ldb, T* dst, int nr) {
    const I64 full = nc / nr * nr;
    for (I64 kk = 0; kk < kc; ++kk) {
        const T* src = b + kk * ldb;
        T* row = dst + kk * nr;
        for (I64 j0 = 0; j0 < full; j0 += nr, row += kc * nr)
            std::memcpy(row, src + j0, static_cast<std::size_t>(nr) * sizeof(T));
        if (full < nc) {
            std::memcpy(row, src + full, static_cast<std::size_t>(nc - full) * sizeof(T));
            std::fill(row + (nc - full), row + nr, T(0));
        }
    }
}

// C[0..m) x [0..nc) += A[0..m) x [0..kc) * B, with B given as packed panels of nr columns
// (panel p at panels + p * panel_stride, kc rows of nr): packs A block by block into ap
// (mc x kc) and runs the register tiles.
template <class T>
void multiply_block(const SimdKernels<T>& kr, I64 m, I64 nc, I64 kc, const T* a, I64 lda, const T* panels,
                    I64 panel_stride, T* c, I64 ldc, T* ap) {
    const int mr = kr.mr, nr = kr.nr;
    for (I64 ic = 0; ic < m; ic += kr.mc) {
        const I64 mc = std::min(kr.mc, m - ic);
        pack_a(mc, kc, a + ic * lda, lda, ap, mr);
        for (I64 jr = 0; jr < nc; jr += nr) {
            const int cols = static_cast<int>(std::min<I64>(nr, nc - jr));
            const T* panel = panels + (jr / nr) * panel_stride;
            for (I64 ir = 0; ir < mc; ir += mr) {
                const int rows = static_cast<int>(std::min<I64>(mr, mc - ir));
                kr.tile[rows](kc, ap + (ir / mr) * kc * mr, panel, nr, c + (ic + ir) * ldc + jr, ldc, cols);
            }
        }
    }
}

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
    switch (isa) {
    case CpuIsa::portable: return "portable";
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::avx512: return "avx512";
    }
    return "?";
}

CpuIsa host_cpu_isa() {
    static const CpuIsa isa = detect_isa();
    return isa;
}

CpuIsa cap_cpu_isa(CpuIsa want) { return std::min(want, host_cpu_isa()); }

std::optional<CpuIsa> parse_cpu_isa_cap(std::string_view text) {
    if (text.empty() || text == "auto" || text == "avx512") return CpuIsa::avx512;
    if (text == "avx2") return CpuIsa::avx2;
    return std::nullopt;
}

CpuIsa kernel_cpu_isa() {
    static const CpuIsa isa = [] {
        const char* v = std::getenv("KILN_CPU_ISA");
        return cap_cpu_isa(parse_cpu_isa_cap(v ? v : "").value_or(CpuIsa::avx512));
    }();
    return isa;
}

template <class T> const SimdKernels<T>& simd_kernels(CpuIsa isa) {
    [[maybe_unused]] const CpuIsa use = cap_cpu_isa(isa);
    if constexpr (std::is_same_v<T, float>) {
#if defined(__x86_64__) && defined(__GNUC__)
        if (use == CpuIsa::avx512) return kAvx512F32;
        if (use == CpuIsa::avx2) return kAvx2F32;
#endif
        return kPortableF32;
    } else {
#if defined(__x86_64__) && defined(__GNUC__)
        if (use == CpuIsa::avx512) return kAvx512F64;
        if (use == CpuIsa::avx2) return kAvx2F64;
#endif
        return kPortableF64;
    }
}

template <class T>
void gemm_acc(CpuIsa isa, I64 m, I64 n, I64 k, const T* a, I64 lda, const T* b, I64 ldb, T* c, I64 ldc) {
    if (m <= 0 || n <= 0 || k <= 0) return;
    const SimdKernels<T>& kr = simd_kernels<T>(isa);
    const int mr = kr.mr, nr = kr.nr;
    const I64 kc_max = std::min(kr.kc, k), mc_max = std::min(kr.mc, round_up(m, mr));
    const I64 nc_max = std::min(kr.nc, round_up(n, nr));
    if (m <= kMaxStreamedRows) {
        // Too few rows to reuse a packed panel of B much: stream B against them, kStreamDepth
        // rows of B at a time (a block stays in L2 while each group of kMaxStreamRows rows
        // of A reads it, and the rows of C stay in cache between steps).
        for (I64 pc = 0; pc < k; pc += kStreamDepth) {
            const I64 kc = std::min(kStreamDepth, k - pc);
            for (I64 r = 0; r < m; r += kMaxStreamRows) {
                const I64 rows = std::min<I64>(kMaxStreamRows, m - r);
                kr.rows[rows](n, kc, a + r * lda + pc, lda, b + pc * ldb, ldb, c + r * ldc, ldc);
            }
        }
        return;
    }
    T* ap = t_pack_a.get<T>(mc_max * kc_max);
    T* bp = t_pack_b.get<T>(nc_max * kc_max);
    for (I64 jc = 0; jc < n; jc += kr.nc) {
        const I64 nc = std::min(kr.nc, n - jc);
        for (I64 pc = 0; pc < k; pc += kr.kc) {
            const I64 kc = std::min(kr.kc, k - pc);
            pack_b(kc, nc, b + pc * ldb + jc, ldb, bp, nr);
            multiply_block(kr, m, nc, kc, a + pc, lda, bp, kc * nr, c + jc, ldc, ap);
        }
    }
}

template <class T>
void gemm_acc_packed_b(CpuIsa isa, I64 m, I64 n, I64 k, const T* a, I64 lda, const T* bp, T* c, I64 ldc) {
    if (m <= 0 || n <= 0 || k <= 0) return;
    const SimdKernels<T>& kr = simd_kernels<T>(isa);
    const int nr = kr.nr;
    T* ap = t_pack_a.get<T>(std::min(kr.mc, round_up(m, kr.mr)) * std::min(kr.kc, k));
    for (I64 jc = 0; jc < n; jc += kr.nc)
        for (I64 pc = 0; pc < k; pc += kr.kc) {
            const I64 kc = std::min(kr.kc, k - pc);
            multiply_block(kr, m, std::min(kr.nc, n - jc), kc, a + pc, lda, bp + (jc / nr) * k * nr + pc * nr, k * nr,
                           c + jc, ldc, ap);
        }
}

template const SimdKernels<float>& simd_kernels<float>(CpuIsa);
template const SimdKernels<double>& simd_kernels<double>(CpuIsa);
template void gemm_acc<float>(CpuIsa, I64, I64, I64, const float*, I64, const float*, I64, float*, I64);
template void gemm_acc<double>(CpuIsa, I64, I64, I64, const double*, I64, const double*, I64, double*, I64);
template void gemm_acc_packed_b<float>(CpuIsa, I64, I64, I64, const float*, I64, const float*, float*, I64);
template void gemm_acc_packed_b<double>(CpuIsa, I64, I64, I64, const double*, I64, const double*, double*, I64);

GemmSplit split_gemm(I64 m, I64 n, I64 k, I64 parts_wanted) {
    // Parts are multiples of 12 rows and 32 columns (every kernel's tile divides them).
    constexpr I64 kRowUnit = 12, kColUnit = 32;
    const I64 max_rp = std::max<I64>(1, ceil_div(m, kRowUnit)), max_cp = std::max<I64>(1, ceil_div(n, kColUnit));
    parts_wanted = std::max<I64>(1, parts_wanted);
    // The most parts up to parts_wanted; among those, the fewest extra packed copies
    // (each row part packs its columns of B, each column part its rows of A).
    I64 best_rp = 1, best_cp = 1, best_parts = 1;
    double best_cost = std::numeric_limits<double>::infinity();
    for (I64 rp = 1; rp <= std::min(max_rp, parts_wanted); ++rp) {
        const I64 cp = std::min(max_cp, ceil_div(parts_wanted, rp));
        const I64 parts = std::min(rp * cp, parts_wanted);
        const double cost = double(rp) * double(n) * double(k) + double(cp) * double(m) * double(k);
        if (parts > best_parts || (parts == best_parts && cost < best_cost)) {
            best_rp = rp;
            best_cp = cp;
            best_parts = parts;
            best_cost = cost;
        }
    }
    GemmSplit s{};
    s.rows_per_part = round_up(ceil_div(std::max<I64>(m, 1), best_rp), kRowUnit);
    s.cols_per_part = round_up(ceil_div(std::max<I64>(n, 1), best_cp), kColUnit);
    s.row_parts = std::max<I64>(1, ceil_div(m, s.rows_per_part));
    s.col_parts = std::max<I64>(1, ceil_div(n, s.cols_per_part));
    return s;
}

}  // namespace kiln::cpu
