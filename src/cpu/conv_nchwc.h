#pragma once
// The blocked-layout convolution (ops.def's conv2d_nchwc with blocks of kNchwcLanes = 16
// channels) for f32, vectorised along the 16 output channels of a block: no transposes, no
// lanes wasted on a small image. Per sample:
//   out[(ob * npix + p) * 16 + l] = bias[ob * 16 + l] + sum over (c, i, j) of
//                                   w[(ob * K + (c * kh + i) * kw + j) * 16 + l] * X(c, iy, ix)
// with npix = oh * ow, K = cin * kh * kw, (iy, ix) = (y * sh - ph + i * dh, x * sw - pw + j * dw)
// for p = y * ow + x, the sum over taps inside the image (zero padding), and X the input:
// blocked, x[((c / 16 * h + iy) * w + ix) * 16 + c % 16]; NCHW, x[(c * h + iy) * w + ix].
// A depthwise conv (cin = 1) reads channel ob * 16 + l of a blocked input for lane l, as a
// vector: X = x[((ob * h + iy) * w + ix) * 16 + l].
//
// Register tiles: a run of R consecutive output pixels of one row (of the image, for a 1x1
// conv of stride 1 without padding) times one or two blocks; every tap loads the blocks'
// weight vectors once and broadcasts one input value per pixel (dense), or loads one input
// vector per pixel (depthwise). Runs skip the filter rows that leave the image (the top and
// bottom borders); where tap columns leave it (the left and right borders) the depthwise
// row kernels run as runs that skip those columns too, the others one pixel at a time with
// each tap checked.
// The tiers call it per (sample, blocks of channel blocks, block of pixels); the bias may be
// null (0: the caller's epilogue adds it). A residual may be added to the results, which
// may then be clamped and put through SiLU, as they are stored (a conv's residual add,
// relu6 or SiLU epilogue).
#include "src/cpu/gemm.h"

#include <cstdint>
#include <limits>

namespace kiln::cpu {

inline constexpr std::int64_t kNchwcLanes = 16;

struct NchwcGeometry {
    std::int64_t cin = 1;  // input channels read (depthwise: 1)
    std::int64_t h = 0, w = 0, oh = 0, ow = 0, kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
    bool blocked_input = true, depthwise = false;
    // Dense: the output channels computed; those at or past it (the padding of a last block,
    // whose weights the layout pass made 0) are 0 before the epilogue, whatever the inputs, and
    // the vectors of them cost no FMAs (24 channels at 256 bits: 3 vectors of the 2 blocks' 4).
    std::int64_t cout = std::numeric_limits<std::int64_t>::max();
    // The epilogue the kernel applies as it stores, in this order: a residual (null: none)
    // added to each result, laid out as the output (block ob's pixel p at
    // residual + (ob - ob0) * ldb + (p - p0) * 16); the clamp; SiLU.
    const float* residual = nullptr;
    // Each result clamped to [lo, hi] as it is stored (min(hi, max(lo, v)): a NaN stays NaN);
    // -inf and inf: not at all.
    double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
    // Then SiLU, v / (1 + exp(-v)), of each (clamped) result: the vector kernels compute it
    // as the depthwise kernels do (simd_depthwise.h, dw_silu), over each block's outputs of
    // the call once they are stored, still in cache.
    bool silu = false;
};

// Output channel blocks [ob0, ob1) and output pixels [p0, p1) of one sample: x at the
// sample's input, w the whole weight, bias (null: 0) the whole bias; block ob's pixel p at
// out + (ob - ob0) * ldb + (p - p0) * 16 (the sample's output: out at block ob0's pixel p0,
// ldb = oh * ow * 16; or a tile of the caller's).
using NchwcFn = void (*)(const NchwcGeometry& g, const float* x, const float* w, const float* bias, float* out,
                         std::int64_t ldb, std::int64_t ob0, std::int64_t ob1, std::int64_t p0, std::int64_t p1);

// The kernel of `isa` (cap_cpu_isa applied; portable code where the host has neither).
void conv_nchwc_f32(CpuIsa isa, const NchwcGeometry& g, const float* x, const float* w, const float* bias, float* out,
                    std::int64_t ldb, std::int64_t ob0, std::int64_t ob1, std::int64_t p0, std::int64_t p1);

// The per-instruction-set kernels (simd_avx2.cpp, simd_avx512.cpp); defined on x86-64 only.
extern const NchwcFn kAvx2Nchwc, kAvx512Nchwc;

}  // namespace kiln::cpu
