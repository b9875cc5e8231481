#pragma once
// The host's compute kernels that the tiers' matmul, conv2d and max_pool2d share (the
// interpreter's, tier 1's, and tier 2's through callouts): the GEMM, the table of every
// vectorised kernel (the GEMM's, the depthwise plane's of depthwise.h, the max pool's of
// pool.h), and the choice of instruction set for them. Compiled ahead of time with the library (no JIT).
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
// most 16 rows a panel of B would be used too few times: B is then streamed row by row,
// unpacked, against those rows (a batch-1 dense layer is such a product).
#include "src/cpu/im2col.h"

#include <cstdint>
#include <limits>
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

// The largest register tile height of any kernel (AVX-512: 12 rows), and the most lanes of
// any kernel's vector (AVX-512 f32: 16).
inline constexpr int kMaxTileRows = 12;
inline constexpr int kMaxLanes = 16;

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
// gemm_acc streams B (rows kernels of up to kMaxStreamRows rows, kStreamDepth rows of B at a
// time) instead of packing it for products of at most kMaxStreamedRows rows.
inline constexpr int kMaxStreamedRows = 16;
inline constexpr std::int64_t kStreamDepth = 64;

// How a depthwise convolution of geometry g runs (depthwise.h, depthwise_plan; the kernel:
// simd_depthwise.h, dw_planes): output rows of pitch wq = ow + (kw - 1) * dw / sw in a flat
// buffer (flat elements), `rows` of them per band, read from pr x pc phase planes of the
// band's input rows (plane elements apart, rows of pitch wq, slack zeros after the last),
// oy rows more than the band's outputs. scratch_elems: the values of both.
// A small plane (chan) can instead run with the channels across the lanes: its padded input
// rows read, cw columns of them (the padded columns the taps reach), transposed into a
// pixel-major buffer of kMaxLanes values per pixel (dw_channels); scratch_elems covers that.
// Its 5-column filters of column stride 1 (runs) compute each output row in runs of
// kDwRun pixels into a second such buffer, the input rows kDwRun - 1 strides of zeros longer
// (cw counts them).
// The outputs are stored clamped to [lo, hi]: minimum(maximum(v, lo), hi) as
// src/core/scalar_ops.h takes them (a NaN v stays NaN; a v equal to a bound, -0 and +0
// included, stays v), a conv's relu6 or Clip applied as the kernel stores rather than in a
// pass of its own; the default bounds leave every value as it is. With `silu` the clamped
// value v is then stored as v / (1 + exp(-v)) (a conv's SiLU epilogue; the f32 vector
// kernels compute it as tier 2 does: simd_depthwise.h, dw_silu).
// The most filter taps of the channel-lane path (7 x 7: their offsets live on the stack).
inline constexpr std::int64_t kDwChanTaps = 49;
inline constexpr int kDwRun = 7;
struct DwPlan {
    std::int64_t wq = 0, oy = 0, pr = 1, pc = 1, rows = 0;
    std::int64_t slack = 0, plane = 0, flat = 0, scratch_elems = 0;
    bool chan = false, runs = false;
    std::int64_t cw = 0;
    double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
    bool silu = false;  // then SiLU, x / (1 + exp(-x)), of the clamped outputs
};

// depthwise.h's depthwise_planes for one instruction set (plan: depthwise_plan(g)).
template <class T>
using DwPlanesFn = void (*)(const Im2colShape& g, const DwPlan& plan, std::int64_t nch, const T* const* xs,
                            const T* const* ws, const T* inits, T* outs, std::int64_t ld, std::int64_t p0, std::int64_t p1,
                            T* scratch);

// One plane of a 2-D max pool (pool.h): input h x w, output oh x ow, window kh x kw,
// strides, zero padding (padded positions are ignored, not zeros).
struct PoolGeometry {
    std::int64_t h = 0, w = 0, oh = 0, ow = 0, kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
};
// Output rows per band of the max-pool kernel (simd_kernels.h, max_pool).
inline constexpr std::int64_t kPoolBandRows = 8;
template <class T> using MaxPoolFn = void (*)(const PoolGeometry& g, const T* x, T* out, T* scratch);

template <class T> struct SimdKernels {
    CpuIsa isa;
    int mr, nr;                        // register tile: rows of A, columns of B
    std::int64_t kc, mc, nc;           // cache blocks: depth, rows of A, columns of B
    TileFn<T> tile[kMaxTileRows + 1];  // tile[r]: the first r rows of the tile (1 <= r <= mr)
    RowsFn<T> rows[kMaxStreamRows + 1];  // rows[r]: r rows of A (1 <= r <= 4) against all of B
    DwPlanesFn<T> dw_planes;           // depthwise output planes (depthwise.h)
    MaxPoolFn<T> max_pool;             // a max-pool output plane (pool.h)
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
