// Column sums (col_sum.h): the choice of kernel, and the portable one.
#include "src/cpu/col_sum.h"

namespace kiln::cpu {
namespace {

void portable(const float* x, std::int64_t a, std::int64_t r, std::int64_t b, double* out) {
    for (std::int64_t i = 0; i < a; ++i)
        for (std::int64_t j = 0; j < b; ++j) out[i * b + j] = col_sum_column(x + i * r * b + j, r, b);
}

}  // namespace

void col_sum_f32(CpuIsa isa, const float* x, std::int64_t a, std::int64_t r, std::int64_t b, double* out) {
#if defined(__x86_64__) && defined(__GNUC__)
    switch (cap_cpu_isa(isa)) {
    case CpuIsa::avx512: return kAvx512ColSum(x, a, r, b, out);
    case CpuIsa::avx2: return kAvx2ColSum(x, a, r, b, out);
    case CpuIsa::portable: break;
    }
#endif
    portable(x, a, r, b, out);
}

}  // namespace kiln::cpu
