// The max-pool kernel (pool.h).
#include "src/cpu/pool.h"

namespace kiln::cpu {

std::int64_t max_pool_scratch_elems(const PoolGeometry& g) {
    // A band of rows, each the covered row and the two vectors and one element the stride-2
    // loads read past it (simd_kernels.h, max_pool).
    return kPoolBandRows * ((g.ow - 1) * g.sw + g.kw + 2 * kMaxLanes + 1);
}

template <class T> void max_pool_plane(CpuIsa isa, const PoolGeometry& g, const T* x, T* out, T* scratch) {
    if (g.oh <= 0 || g.ow <= 0) return;
    simd_kernels<T>(isa).max_pool(g, x, out, scratch);
}

template void max_pool_plane<float>(CpuIsa, const PoolGeometry&, const float*, float*, float*);
template void max_pool_plane<double>(CpuIsa, const PoolGeometry&, const double*, double*, double*);

}  // namespace kiln::cpu
