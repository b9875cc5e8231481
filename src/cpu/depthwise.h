#pragma once
// The depthwise convolution kernel every CPU tier runs (the interpreter's conv2d, tier 1's
// and tier 2's conv code): one output plane, or a run of its pixels, of a convolution whose
// output channel reads one input channel (weight dim 1 is 1), from the unpadded input plane.
//
// The input rows a band of output rows needs are copied into zero-padded phase planes in
// the scratch (a few KiB, so they stay in L1): one plane for stride 1, sh x sw planes of
// every other row and column for stride 2 (and so on). On the phase planes of pitch wq every
// tap of output pixel (y, x) is an element at (y + oy) * wq + x + ox of one plane, so the
// band's pixels, read as one flat row q = y * wq + x, take one unit-stride vector load per
// tap whatever the stride, however narrow the plane (a 7 x 7 plane fills 16-lane vectors
// too); the x >= ow lanes between rows are computed and dropped. A 3 x 3 filter keeps its
// nine weights in registers (simd_depthwise.h, dw_planes). A 3 x 3 filter of stride 1 or 2 and
// padding 1 over whole output rows reads the plane straight instead, with no band
// (simd_depthwise.h, dw_direct3, dw_direct3s2).
#include "src/cpu/gemm.h"
#include "src/cpu/im2col.h"

#include <cstdint>

namespace kiln::cpu {

// How geometry g runs (gemm.h, DwPlan), and the scratch it needs (plan.scratch_elems:
// a few thousand values plus a few padded rows of the plane). Made once per convolution,
// not per plane.
DwPlan depthwise_plan(const Im2colShape& g);

// out[p - p0] = init + sum over i < kh, j < kw of w[i * kw + j] * x(y * sh - ph + i * dh,
// xo * sw - pw + j * dw) for the output pixels p = y * g.ow + xo in [p0, p1), x() being
// zero outside the g.h x g.w plane `x` (g.c is ignored). `plan` is depthwise_plan(g);
// `scratch` holds plan.scratch_elems values. float and double; NaN and Inf propagate as in
// the plain sum (a NaN tap makes the outputs it touches NaN).
template <class T>
void depthwise_plane(CpuIsa isa, const Im2colShape& g, const DwPlan& plan, const T* x, const T* w, T init, T* out,
                     std::int64_t p0, std::int64_t p1, T* scratch);

// depthwise_plane for nch planes of one geometry: plane k reads xs[k] with the filter
// ws[k], starts from inits[k] (0 without inits) and writes outs + k * ld (the scratch and the
// plan's setup shared).
template <class T>
void depthwise_planes(CpuIsa isa, const Im2colShape& g, const DwPlan& plan, std::int64_t nch, const T* const* xs,
                      const T* const* ws, const T* inits, T* outs, std::int64_t ld, std::int64_t p0, std::int64_t p1,
                      T* scratch);

}  // namespace kiln::cpu
