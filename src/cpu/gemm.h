#pragma once
// The host's compute kernels that the interpreter's matmul and conv2d (tier 0) and tier 1's
// matmul and conv kernels share: the GEMM, the depthwise row kernel of conv2d, and the
// choice of instruction set for them. Compiled ahead of time with the library (no JIT).
//
// The library is compiled for generic x86-64, so the vector kernels are compiled per
// instruction set with function-level target options (simd_avx2.cpp: AVX2 + FMA;
// simd_avx512.cpp: AVX-512F) and chosen at run time from what the CPU reports
// (host_cpu_isa), with portable C++ kernels (gemm.cpp) as the fallback and on other
// architectures. Every entry point takes the instruction set as a parameter; the tiers use
// kernel_cpu_isa(), the host's capped by KILN_CPU_ISA.
//
// GEMM layout (as in BLIS / GotoBLAS): C += A * B for row-major blocks. For each block of
// KC rows of B and NC columns, B is packed into panels of NR columns (kc x NR, zero padded);
// for each block of MC rows of A, A is packed into panels of MR rows (kc x MR, interleaved);
// an MR x NR register tile of C accumulates a panel of A times a panel of B. When A has at
// most 4 rows a panel of B would be used once: B is then streamed row by row, unpacked,
// against those rows (a batch-1 dense layer is such a product).
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln::cpu {

enum class CpuIsa : std::uint8_t { portable, avx2, avx512 };

const char* cpu_isa_name(CpuIsa isa);   // "portable", "avx2", "avx512"
CpuIsa host_cpu_isa();                  // the best this CPU and OS run (asked once)
CpuIsa cap_cpu_isa(CpuIsa want);        // want, lowered to what the host runs
// A value of KILN_CPU_ISA as a cap: "auto" and "" -> avx512 (no cap), "avx2", "avx512";
// nullopt for anything else.
std::optional<CpuIsa> parse_cpu_isa_cap(std::string_view text);
// The instruction set every tier's CPU code uses (the interpreter's and tier 1's kernels,
// tier 1's and tier 2's generated code): host_cpu_isa() capped by the KILN_CPU_ISA
// environment variable, read once per process (a malformed value caps nothing here;
// kiln::Options::from_env reports it).
CpuIsa kernel_cpu_isa();

// The largest register tile height of any kernel (AVX-512: 12 rows).
inline constexpr int kMaxTileRows = 12;

// c[r * ldc + j] += sum_k a[k * MR + r] * b[k * ldb + j] for r < rows (the function's own
// row count), j < cols; a is one packed panel of A (MR values per k, MR = the kernel set's
// mr), b holds NR readable values per k (zero beyond the real columns).
template <class T>
using TileFn = void (*)(std::int64_t kc, const T* a, const T* b, std::int64_t ldb, T* c, std::int64_t ldc, int cols);

// c[r * ldc + x] += sum_k a[r * lda + k] * b[k * ldb + x] for r < rows (the function's own
// row count, 1 to 4), x < n, k < kc: the product of a few rows of A, streaming B in order.
template <class T>
using RowsFn = void (*)(std::int64_t n, std::int64_t kc, const T* a, std::int64_t lda, const T* b, std::int64_t ldb,
                        T* c, std::int64_t ldc);
inline constexpr int kMaxStreamRows = 4;

// out[x] += sum_{r < rows, j < kw} w[r][j] * in[r][x * stride + j * dil] for x < n: one
// output row of a depthwise convolution over the filter rows that fall inside the input
// (the stride is the function's own, 1 or 2). Reads nothing outside
// in[r][0 .. (n - 1) * stride + (kw - 1) * dil + stride - 1] (stride 2 reads one element
// past the last tap).
template <class T>
using DwRowFn = void (*)(std::int64_t n, std::int64_t rows, const T* const* in, const T* const* w, std::int64_t kw,
                         std::int64_t dil, T* out);

template <class T> struct SimdKernels {
    CpuIsa isa;
    int mr, nr;                        // register tile: rows of A, columns of B
    std::int64_t kc, mc, nc;           // cache blocks: depth, rows of A, columns of B
    TileFn<T> tile[kMaxTileRows + 1];  // tile[r]: the first r rows of the tile (1 <= r <= mr)
    RowsFn<T> rows[kMaxStreamRows + 1];  // rows[r]: r rows of A (1 <= r <= 4) against all of B
    DwRowFn<T> dw_row[3];              // dw_row[s]: stride s (1 or 2); [0] is unused
    DwRowFn<T> dw_row_3x3[3];          // the same for rows == kw == 3 (weights kept in registers)
};

// The kernels of one instruction set (cap_cpu_isa(isa) is applied), for float and double.
template <class T> const SimdKernels<T>& simd_kernels(CpuIsa isa);

// C += A * B for row-major blocks (A: m x k, lda; B: k x n, ldb; C: m x n, ldc), on the
// calling thread, with the kernels of `isa`. Instantiated for float and double. NaN and
// Inf propagate as in the plain sum of products: a NaN in row i of A makes row i of C NaN.
template <class T>
void gemm_acc(CpuIsa isa, std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, const T* b,
              std::int64_t ldb, T* c, std::int64_t ldc);

// The same with B already packed, as gemm_acc packs it but over the whole depth: panel p
// (columns p * nr .. p * nr + nr, nr = simd_kernels<T>(isa).nr) at bp + p * k * nr holds k
// rows of nr values, zero beyond n. conv2d's im2col writes this layout directly.
template <class T>
void gemm_acc_packed_b(CpuIsa isa, std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda,
                       const T* bp, T* c, std::int64_t ldc);

// How to split one m x n x k product into row parts x column parts for `threads` threads
// (1 x 1 for one thread): parts are multiples of any register tile, and the split packs
// the fewest extra copies of A and B.
struct GemmSplit {
    std::int64_t rows_per_part, cols_per_part, row_parts, col_parts;
};
GemmSplit split_gemm(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t parts_wanted);

// The per-instruction-set tables (simd_avx2.cpp, simd_avx512.cpp); defined on x86-64 only.
extern const SimdKernels<float> kAvx2F32, kAvx512F32;
extern const SimdKernels<double> kAvx2F64, kAvx512F64;

}  // namespace kiln::cpu
