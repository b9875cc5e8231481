// The ahead-of-time rows kernel that tier-2 GEMM code calls for blocks of fewer rows than a
// register tile (codegen.h, kRowsF32Symbol): src/cpu's streaming kernels, at most
// cpu::kMaxStreamRows rows a call.
#include "tiers/llvm/codegen.h"

#include "src/cpu/gemm.h"

#include <algorithm>

namespace kiln::tiers::llvm_tier {
namespace {

template <class T>
void rows_of(std::int64_t rows, std::int64_t n, std::int64_t kc, const T* a, std::int64_t lda, const T* b,
             std::int64_t ldb, T* c, std::int64_t ldc) noexcept {
    static const cpu::SimdKernels<T>& kernels = cpu::simd_kernels<T>(cpu::kernel_cpu_isa());
    for (std::int64_t r = 0; r < rows; r += cpu::kMaxStreamRows) {
        const auto part = static_cast<int>(std::min<std::int64_t>(cpu::kMaxStreamRows, rows - r));
        kernels.rows[part](n, kc, a + r * lda, lda, b, ldb, c + r * ldc, ldc);
    }
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
