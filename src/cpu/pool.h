#pragma once
// The max-pool kernel of the interpreter's max_pool2d (tier 0; pools are not lowered to the
// kernel IR): one output plane per call, vectorised (simd_kernels.h, max_pool).
#include "src/cpu/gemm.h"

#include <cstdint>

namespace kiln::cpu {

// out[y * g.ow + x] = the max of the input values under window (y, x) of the g.h x g.w plane
// `x` (padded positions ignored; -inf for a window over none); NaN propagates. `scratch`
// holds max_pool_scratch_elems(g) values. float and double.
template <class T> void max_pool_plane(CpuIsa isa, const PoolGeometry& g, const T* x, T* out, T* scratch);

std::int64_t max_pool_scratch_elems(const PoolGeometry& g);

}  // namespace kiln::cpu
