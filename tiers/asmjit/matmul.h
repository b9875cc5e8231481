#pragma once
// Internal to tiers/asmjit: tier 1's matmul and conv kernels (no asmjit here).
//
// A matmul or conv group's kernel (kir::MatmulHint) runs as a driver compiled ahead of
// time around the host's GEMM (src/cpu/gemm.h: packed, cache-blocked, vector register
// tiles for AVX2 and AVX-512), plus the group's epilogue (bias, activation, residual,
// store) as asmjit code. For each outer index range [begin, end) the driver takes the row
// blocks of each batch entry (and column block) together, and for each chunk of at most
// a few hundred rows and columns:
//   1. computes the chunk of A * B into a tile in the calling thread's kernel scratch
//      (a convolution's B is its im2col matrix, packed straight from the input image:
//      src/cpu/im2col.h; a 1x1 convolution with stride 1 and no padding reads the input
//      planes in place; a depthwise one, one input channel per group, runs the direct row
//      kernels of src/cpu/gemm.h over a zero-padded copy of its plane instead of a GEMM);
//   2. runs the epilogue kernel over the chunk: generated from the group's own epilogue
//      statements (kir::MatmulHint::epilogue), it reads each dot product from the tile, so
//      the chain is fused and its loop over columns is a vector loop like any tier-1 loop.
// The code is generic in every dim (like all tier-1 code): one kernel serves every shape.
//
// The epilogue kernel (epilogue_kernel) is the hint's statements inside three loops:
//   for batch_var in [P, P + 1): for row_var in [P+1, P+2): for col_var in [P+3, P+4):
//     t<acc> = tile[(row_var - P1) * (P4 - P3) + (col_var - P3)]; <epilogue>
// with P = the kernel's param count: params P..P+4 are appended (batch entry, rows
// [r0, r1), columns [c0, c1)), and the tile is an input buffer appended after the
// kernel's buffers. Its extent is 1.
//
// Requires: supported() is empty for the kernel; the epilogue code compiled from
// epilogue_kernel(k). Ensures: run_matmul computes what the kernel's loop nest computes
// (within the tolerance of a reordered sum), or calls tiers::kernel_failed() and returns
// when scratch memory cannot be had (never a wrong answer).
// Tests: tests/test_matmul_tier.cpp, tests/test_conv_tier.cpp (every compiling tier).
#include "tiers/tier.h"

#include <cstdint>
#include <memory>
#include <string>

namespace kiln::tiers::asmjit_tier {

// Why tier 1 leaves this matmul kernel alone ("" when it takes it): f16/bf16 operands
// (the GEMM runs on f32 and f64 arrays), malformed hints.
std::string matmul_unsupported(const kir::Kernel& k);

// The epilogue of a matmul kernel as a kernel of its own (above).
kir::Kernel epilogue_kernel(const kir::Kernel& k);

struct MatmulPlan;
struct MatmulPlanDeleter {
    void operator()(MatmulPlan* p) const;
};
using MatmulPlanPtr = std::unique_ptr<MatmulPlan, MatmulPlanDeleter>;

// The plan of one kernel: its hint with the dims as expressions of the params, and the
// epilogue's code. `vector_bytes` chooses the GEMM's instruction set (64: AVX-512 where the
// host has it, 32: AVX2, 0: the portable kernels).
MatmulPlanPtr make_matmul_plan(const kir::Kernel& k, KernelFn epilogue, int vector_bytes);

// The kernel's entry, with the plan as its first argument (the code of a matmul kernel is
// a forwarder that supplies it: codegen.h).
void run_matmul(const MatmulPlan* plan, void* const* buffers, const std::int64_t* params, std::int64_t begin,
                std::int64_t end);

}  // namespace kiln::tiers::asmjit_tier
