// The ahead-of-time kernels that tier-2 GEMM and conv code calls (codegen.h): the rows
// kernel for blocks of fewer rows than a register tile (kRowsF32Symbol: cpu::gemm_acc, at
// most cpu::kMaxStreamedRows rows a call, so that it streams B instead of packing it), and
// the depthwise kernel (kDepthwiseF32Symbol: cpu::depthwise_planes), and the Winograd kernel
// (kWinogradF32Symbol: cpu::winograd_f32).
#include "tiers/llvm/codegen.h"

#include "src/cpu/depthwise.h"
#include "src/cpu/gemm.h"
#include "src/cpu/winograd.h"
#include "tiers/tier.h"

#include <algorithm>

namespace kiln::tiers::llvm_tier {
namespace {

// cpu::gemm_acc streams B (unpacked) against at most cpu::kMaxStreamedRows rows of A.
template <class T>
void rows_of(std::int64_t rows, std::int64_t n, std::int64_t kc, const T* a, std::int64_t lda, const T* b,
             std::int64_t ldb, T* c, std::int64_t ldc) noexcept {
    const cpu::CpuIsa isa = cpu::kernel_cpu_isa();
    for (std::int64_t r = 0; r < rows; r += cpu::kMaxStreamedRows)
        cpu::gemm_acc<T>(isa, std::min<std::int64_t>(cpu::kMaxStreamedRows, rows - r), n, kc, a + r * lda, lda, b, ldb,
                         c + r * ldc, ldc);
}

template <class T>
void depthwise_of(const std::int64_t* geo, std::int64_t nch, const T* const* xs, const T* const* ws, const T* inits,
                  T* out, std::int64_t ld, std::int64_t p0, std::int64_t p1, double lo, double hi,
                  std::int64_t silu) noexcept {
    const cpu::Im2colShape g{geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6], geo[7], geo[8], geo[9], geo[10], geo[11]};
    cpu::DwPlan plan = cpu::depthwise_plan(g);
    plan.lo = lo;
    plan.hi = hi;
    plan.silu = silu != 0;
    T* scratch = static_cast<T*>(kernel_scratch(plan.scratch_elems * static_cast<std::int64_t>(sizeof(T))));
    if (scratch == nullptr) {
        kernel_failed();
        return;
    }
    cpu::depthwise_planes<T>(cpu::kernel_cpu_isa(), g, plan, nch, xs, ws, inits, out, ld, p0, p1, scratch);
}

}  // namespace

void depthwise_f32(const std::int64_t* geo, std::int64_t nch, const float* const* xs, const float* const* ws, const float* inits,
                   float* out, std::int64_t ld, std::int64_t p0, std::int64_t p1, double lo, double hi,
                   std::int64_t silu) noexcept {
    depthwise_of(geo, nch, xs, ws, inits, out, ld, p0, p1, lo, hi, silu);
}

void depthwise_f64(const std::int64_t* geo, std::int64_t nch, const double* const* xs, const double* const* ws,
                   const double* inits, double* out, std::int64_t ld, std::int64_t p0, std::int64_t p1, double lo,
                   double hi, std::int64_t silu) noexcept {
    depthwise_of(geo, nch, xs, ws, inits, out, ld, p0, p1, lo, hi, silu);
}

float* winograd_f32(const std::int64_t* geo, std::int64_t cin, std::int64_t oh, const float* x, const float* u,
                    std::int64_t oc0, std::int64_t rows, std::int64_t og_tiles, std::int64_t ty0, std::int64_t ty1,
                    std::int64_t ldo) noexcept {
    const cpu::WinoGeometry g{cin, geo[1], geo[2], oh, geo[3], geo[8], geo[9]};
    const cpu::WinoLayout layout = cpu::winograd_layout(g, ty1 - ty0);
    // The raw output first, then the kernel's work (both 64-byte aligned: multiples of 16).
    const std::int64_t out_elems = (rows * ldo + 15) / 16 * 16;
    auto* out = static_cast<float*>(kernel_scratch((out_elems + layout.elems) * static_cast<std::int64_t>(sizeof(float))));
    if (out == nullptr) {
        kernel_failed();
        return nullptr;
    }
    const cpu::WinoBlock b{oc0, rows, og_tiles, ty0, ty1, ldo};
    if (!cpu::winograd_f32(cpu::kernel_cpu_isa(), g, x, u, b, out, out + out_elems, layout)) {
        kernel_failed();  // (no vector kernel: code never calls it then; see GemmGen::winograd_applies)
        return nullptr;
    }
    return out;
}

void gemm_rows_f32(std::int64_t rows, std::int64_t n, std::int64_t kc, const float* a, std::int64_t lda, const float* b,
                   std::int64_t ldb, float* c, std::int64_t ldc) noexcept {
    rows_of(rows, n, kc, a, lda, b, ldb, c, ldc);
}

void gemm_rows_f64(std::int64_t rows, std::int64_t n, std::int64_t kc, const double* a, std::int64_t lda,
                   const double* b, std::int64_t ldb, double* c, std::int64_t ldc) noexcept {
    rows_of(rows, n, kc, a, lda, b, ldb, c, ldc);
}

}  // namespace kiln::tiers::llvm_tier
