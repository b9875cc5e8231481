#pragma once
// Column sums of f32 data in double: the kernel of the interpreter's sum and mean over
// middle axes (tiers/interp/reduce.cpp), such as the blocked layout's global average pool
// (a mean over the H and W of [N, Cb, H, W, 16]). Each column is summed from 0.0 in row
// order, the order of the interpreter's plain loop, so the results are the same bits; the
// vectors run across columns (several chains of additions at once), never along one.
#include "src/cpu/gemm.h"

#include <cstdint>

namespace kiln::cpu {

// out[i * b + j] = 0.0 + x[(i * r + 0) * b + j] + ... + x[(i * r + r - 1) * b + j] (in that
// order, in double) for i < a, j < b: x is a dense [a, r, b] array.
void col_sum_f32(CpuIsa isa, const float* x, std::int64_t a, std::int64_t r, std::int64_t b, double* out);

// One column of that sum: x[0], x[b], ..., x[(r - 1) * b] added in order to 0.0, in double
// (the portable kernel's every column, and the vector kernels' last b % W).
inline double col_sum_column(const float* x, std::int64_t r, std::int64_t b) {
    double s = 0.0;
    for (std::int64_t k = 0; k < r; ++k) s += static_cast<double>(x[k * b]);
    return s;
}

using ColSumFn = void (*)(const float* x, std::int64_t a, std::int64_t r, std::int64_t b, double* out);

// The per-instruction-set kernels (simd_avx2.cpp, simd_avx512.cpp); defined on x86-64 only.
extern const ColSumFn kAvx2ColSum, kAvx512ColSum;

}  // namespace kiln::cpu
