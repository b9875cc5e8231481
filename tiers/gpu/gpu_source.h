#pragma once
// The GPU tier's source printer: one group's kernel IR as CUDA C (NVRTC) or HIP (HIPRTC),
// one printer with a dialect switch. The source is header-free (f16/bf16 conversions are
// written inline; NVRTC has no standard headers by default) and deterministic: the same
// kernel and specialisation give the same bytes, which are part of the code-cache key.
//
// Launch ABI (what tiers/gpu/gpu_tier.cpp passes to cuLaunchKernel / hipModuleLaunchKernel):
// the entry is `extern "C" __global__ void <entry>(KilnArgs a)` with one by-value parameter
//     struct KilnArgs { void* buf[num_buffers]; long long param[num_params]; long long work; };
// (buffers: the kernel's inputs then outputs, device pointers, dense row-major; params: all
// of the kernel's params, bound or not, in order; `work`: the value of `work` below at these
// params). A kernel with no buffers or no params still has a one-element array (unused).
// The host launches a 1-D grid of `block` threads per block and any number of blocks; the
// kernel covers [0, work) itself with a grid-stride loop, so every grid size is correct.
#include "src/kir/kir.h"

#include <cstdint>
#include <string>

namespace kiln::tiers::gpu {

enum class Dialect : std::uint8_t { cuda, hip };

struct GpuSource {
    bool ok = false;
    std::string why;      // when !ok: what the printer cannot express (a bail-out, not an error)
    std::string code;     // the translation unit
    std::string entry;    // the kernel's name (extern "C")
    int block = 256;      // threads per block the code was written for (__launch_bounds__)
    kir::ExprRef work;    // an index expression of the params: the items the grid-stride loop covers
    int per_thread = 1;   // items a thread takes at a time (the launch needs work / per_thread threads)
    int num_buffers = 0;  // the ABI's array sizes (see above), as printed
    int num_params = 0;
};

// Prints kernel `k` with the params that `spec` binds as constants (spec may be empty: every
// param is then read from KilnArgs::param). Never throws for a kernel it cannot express.
GpuSource print_source(const kir::Kernel& k, const kir::Specialization& spec, Dialect dialect);

// Byte size of KilnArgs for these array sizes (each array has at least one element).
inline std::size_t args_bytes(int num_buffers, int num_params) {
    return 8u * static_cast<std::size_t>((num_buffers > 0 ? num_buffers : 1) + (num_params > 0 ? num_params : 1) + 1);
}

}  // namespace kiln::tiers::gpu
