// The depthwise convolution kernel (depthwise.h): the plan here, the bands in the
// per-instruction-set kernels (simd_kernels.h, dw_plane).
#include "src/cpu/depthwise.h"

#include <algorithm>

namespace kiln::cpu {
namespace {

using I64 = std::int64_t;

// Input values per band (the band and its flat output stay in L1 on every x86-64 core).
constexpr I64 kBandElems = 4096;
// Slack after the band and the flat output: the row kernel's stride-2 loads read one
// element past their last tap.
constexpr I64 kSlack = 64;

}  // namespace

DwPlan depthwise_plan(const Im2colShape& g) {
    DwPlan p;
    p.wp = std::max<I64>(g.w + 2 * g.pw, (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1);
    p.ext = (g.kh - 1) * g.dh + 1;
    const I64 band_rows = std::max<I64>(kBandElems / std::max<I64>(p.wp, 1), p.ext);
    p.rows = std::max<I64>(1, (band_rows - p.ext) / g.sh + 1);
    // Flat: pixel q = r * wp + x read at q * s lands on row r * s only when both strides
    // are s; stride 2 computes the x >= ow half of each row too, so only narrow planes.
    p.flat = g.sh == g.sw && (g.sw == 1 || (g.sw == 2 && g.ow < 12));
    p.slack = kSlack;
    p.band_elems = ((p.rows - 1) * g.sh + p.ext) * p.wp + kSlack;
    p.scratch_elems = p.band_elems + p.rows * p.wp + kSlack;
    return p;
}

template <class T>
void depthwise_plane(CpuIsa isa, const Im2colShape& g, const DwPlan& plan, const T* x, const T* w, T init, T* out,
                     std::int64_t p0, std::int64_t p1, T* scratch) {
    simd_kernels<T>(isa).dw_plane(g, plan, x, w, init, out, p0, p1, scratch);
}

template void depthwise_plane<float>(CpuIsa, const Im2colShape&, const DwPlan&, const float*, const float*, float, float*,
                                     std::int64_t, std::int64_t, float*);
template void depthwise_plane<double>(CpuIsa, const Im2colShape&, const DwPlan&, const double*, const double*, double,
                                      double*, std::int64_t, std::int64_t, double*);

}  // namespace kiln::cpu
