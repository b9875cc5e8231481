// The depthwise convolution kernel (depthwise.h): the plan here, the bands in the
// per-instruction-set kernels (simd_depthwise.h, dw_planes).
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
// Planes whose padded input (the rows and columns the taps reach) has at most this many
// pixels run with the channels across the lanes (dw_channels): 16 channels x 1024 pixels
// of f32 is 64 KiB, an L2-resident buffer; mobilenet's planes of 28 x 28 and smaller. A
// larger plane keeps the pixels across the lanes, where its rows fill the vectors. A filter
// of more than 9 taps runs on the channels up to kChanPixelsWide: the band kernel's loop
// over such taps is the slower one (efficientnet_b0's 5x5 depthwise of stride 2 over 144
// channels at 56 x 56, SiLU: 0.29 -> 0.17-0.24 ms alone, 0.27 -> 0.20 ms in the model at
// 512 bits and 0.29 -> 0.26 at 256; 1 thread, AMD EPYC Zen 4), while a 3 x 3 filter there has
// the direct kernels (dw_direct3: 144 channels at 56 x 56 ran slower on the channels).
constexpr I64 kChanPixels = 1024;
constexpr I64 kChanPixelsWide = 4096;

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
    const I64 oh = (g.h + 2 * g.ph - (g.kh - 1) * g.dh - 1) / g.sh + 1;
    const I64 ch = (oh - 1) * g.sh + (g.kh - 1) * g.dh + 1;  // padded rows the taps reach
    p.cw = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1;
    p.chan = oh > 0 && g.ow > 0 && ch * p.cw <= (g.kh * g.kw > 9 ? kChanPixelsWide : kChanPixels) &&
             g.kh * g.kw <= kDwChanTaps;
    // Runs of output pixels with each input vector loaded once per filter row (dw_run) for
    // 5-column filters of stride 1: the kernel alone (min of 4 runs of 300 calls, 1 thread,
    // AMD EPYC Zen 4, f32), efficientnet_b0's 5 x 5 depthwise convs ran 11-19% faster (672
    // channels at 14 x 14: 123 -> 105 us at 512 bits, 149 -> 120 at 256; 1152 at 7 x 7: 62 ->
    // 55, 72 -> 59; 240 at 28 x 28: 166 -> 138, 201 -> 164). At stride 2 they ran 7% faster at
    // 256 bits but 3% faster to 5% slower at 512; 3 x 3 filters (9 weight vectors in registers
    // across blocks of W pixels) 3-6% slower at 512 bits: those stay in blocks.
    p.runs = p.chan && g.kw == 5 && g.dw == 1 && g.sw == 1;
    if (p.runs) p.cw += (kDwRun - 1) * g.sw;
    if (p.chan)
        p.scratch_elems =
            std::max(p.scratch_elems, (ch * p.cw + kDwChanTaps + (p.runs ? oh * (g.ow + kDwRun) : 0)) * kMaxLanes);
    return p;
}

template <class T>
void depthwise_planes(CpuIsa isa, const Im2colShape& g, const DwPlan& plan, std::int64_t nch, const T* const* xs,
                      const T* const* ws, const T* inits, T* outs, std::int64_t ld, std::int64_t p0, std::int64_t p1,
                      T* scratch) {
    simd_kernels<T>(isa).dw_planes(g, plan, nch, xs, ws, inits, outs, ld, p0, p1, scratch);
}

template <class T>
void depthwise_plane(CpuIsa isa, const Im2colShape& g, const DwPlan& plan, const T* x, const T* w, T init, T* out,
                     std::int64_t p0, std::int64_t p1, T* scratch) {
    simd_kernels<T>(isa).dw_planes(g, plan, 1, &x, &w, &init, out, 0, p0, p1, scratch);
}

#define KILN_DEPTHWISE(T)                                                                                           \
    template void depthwise_planes<T>(CpuIsa, const Im2colShape&, const DwPlan&, std::int64_t, const T* const*,     \
                                      const T* const*, const T*, T*, std::int64_t, std::int64_t, std::int64_t, T*); \
    template void depthwise_plane<T>(CpuIsa, const Im2colShape&, const DwPlan&, const T*, const T*, T, T*,         \
                                     std::int64_t, std::int64_t, T*);
KILN_DEPTHWISE(float)
KILN_DEPTHWISE(double)
#undef KILN_DEPTHWISE

}  // namespace kiln::cpu
