// The ahead-of-time rows kernel that tier-2 GEMM code calls for blocks of fewer rows than a
// register tile (codegen.h, kRowsF32Symbol): cpu::gemm_acc, at most cpu::kMaxStreamRows rows
// a call (so that it streams B instead of packing it).
#include "tiers/llvm/codegen.h"

#include "src/cpu/gemm.h"

#include <algorithm>

namespace kiln::tiers::llvm_tier {
namespace {

// cpu::gemm_acc streams B (unpacked) against at most cpu::kMaxStreamRows rows of A.
template <class T>
void rows_of(std::int64_t rows, std::int64_t n, std::int64_t kc, const T* a, std::int64_t lda, const T* b,
             std::int64_t ldb, T* c, std::int64_t ldc) noexcept {
    const cpu::CpuIsa isa = cpu::kernel_cpu_isa();
    for (std::int64_t r = 0; r < rows; r += cpu::kMaxStreamRows)
        cpu::gemm_acc<T>(isa, std::min<std::int64_t>(cpu::kMaxStreamRows, rows - r), n, kc, a + r * lda, lda, b, ldb,
                         c + r * ldc, ldc);
}

}  // namespace

void gemm_rows_f32(std::int64_t rows, std::int64_t n, std::int64_t kc, const float* a, std::int64_t lda, const float* b,
                   std::int64_t ldb, float* c, std::int64_t ldc) noexcept {
    rows_of(rows, n, kc, a, lda, b, ldb, c, ldc);
}

void gemm_rows_f64(std::int64_t rows, std::int64_t n, std::int64_t kc, const double* a, std::int64_t lda,
                   const double* b, std::int64_t ldb, double* c, std::int64_t ldc) noexcept {
    rows_of(rows, n, kc, a, lda, b, ldb, c, ldc);
}

}  // namespace kiln::tiers::llvm_tier
