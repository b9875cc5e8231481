// The depthwise convolution kernel (depthwise.h): the plan here, the bands in the
// per-instruction-set kernels (simd_kernels.h, dw_plane).
#include "src/cpu/depthwise.h"

#include <algorithm>

namespace kiln::cpu {
namespace {

using I64 = std::int64_t;

// Input values per band (the phase planes and the band's flat output stay in L1 on every
// x86-64 core).
constexpr I64 kBandElems = 4096;
// Zeros after each phase plane and the flat output: the last vectors of a band (4 at a time,
// up to 16 lanes each) read and write past its last pixel.
constexpr I64 kSlack = 64;

}  // namespace

DwPlan depthwise_plan(const Im2colShape& g) {
    DwPlan p;
    p.wq = g.ow + (g.kw - 1) * g.dw / g.sw;
    p.oy = (g.kh - 1) * g.dh / g.sh;
    p.pr = std::min<I64>(g.sh, (g.kh - 1) * g.dh + 1);
    p.pc = std::min<I64>(g.sw, (g.kw - 1) * g.dw + 1);
    const I64 per_row = std::max<I64>(p.pr * p.pc * p.wq, 1);
    p.rows = std::max<I64>(1, kBandElems / per_row - p.oy);
    p.slack = kSlack;
    p.plane = (p.rows + p.oy) * p.wq + kSlack;
    p.flat = p.rows * p.wq + kSlack;
    p.scratch_elems = p.pr * p.pc * p.plane + p.flat;
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
