// conv2d (NCHW input, OIHW weight, grouped, strided, dilated, zero padded) and the 2-D
// pools.
//
// - conv2d has three paths, all starting the output from the bias (or 0). f16/bf16
//   compute in f32 and round once at the end; f32 accumulates in f32, f64 in f64 (with FMA
//   where the CPU has it).
//   * Depthwise (weight dim 1 is 1: groups == input channels, any multiplier): the direct
//     kernel of src/cpu/depthwise.h (vectorised over bands of a zero-padded copy of the
//     input rows), shared with tiers 1 and 2.
//   * 1x1 with stride 1 and no padding: per (sample, group, block of pixels) a GEMM of
//     the weights and the input planes, read in place.
//   * Otherwise per (sample, group, block of output pixels) im2col + GEMM (src/cpu/gemm.h, shared
//     with matmul), so the scratch column buffer stays bounded. The column block is
//     written in the GEMM's packed layout, so it is not copied again.
//   On every path the padding is zeros: with finite weights the result is the plain sum
//   over the real (unpadded) taps, and a NaN input reaches every output whose window
//   covers it (a non-finite weight over the padding gives NaN, 0 * inf).
// - Pools ignore padded positions: max_pool2d takes the max over the real elements of a
//   window (NaN propagates; f32 and f64 by the vector kernel of src/cpu/pool.h) and
//   avg_pool2d divides the double sum by the number of real elements (count_include_pad =
//   false). A window with no real element (only possible when H or W is 0) gives the
//   dtype's lowest value (-inf for floats) for max and NaN for avg; global_avg_pool2d over
//   an empty plane gives NaN (its double sum in eight interleaved parts).
#include "src/core/strided.h"
#include "src/support/check.h"
#include "src/cpu/depthwise.h"
#include "src/cpu/gemm.h"
#include "src/cpu/pool.h"
#include "src/cpu/im2col.h"
#include "tiers/interp/kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::interp {
namespace {

using I64 = std::int64_t;
using cpu::SimdKernels;
using cpu::simd_kernels;

struct Window {
    I64 k, s, p, d;
};

struct ConvShape {
    I64 n, cin, h, w, o, groups, cg, og, oh, ow;
    Window wh, ww;
};

I64 ceil_div(I64 a, I64 b) { return (a + b - 1) / b; }
I64 round_up(I64 a, I64 unit) { return ceil_div(a, unit) * unit; }

// Depthwise (each output channel reads one input channel: weight dim 1 is 1, any groups):
// the direct kernel of src/cpu/depthwise.h, one output plane per task.
template <class C>
void conv_depthwise(const ConvShape& cs, const SimdKernels<C>& kr, const C* px, const C* pw,
                    const std::vector<double>& bias, C* po) {
    const cpu::Im2colShape g{1, cs.h, cs.w, cs.ow, cs.wh.k, cs.ww.k, cs.wh.s, cs.ww.s, cs.wh.p, cs.ww.p, cs.wh.d, cs.ww.d};
    const cpu::DwPlan plan = cpu::depthwise_plan(g);
    const I64 npix = cs.oh * cs.ow;
    core::parallel_range(cs.n * cs.o, npix * cs.wh.k * cs.ww.k, [&](I64 lo, I64 hi) {
        std::vector<C> scratch(static_cast<std::size_t>(plan.scratch_elems));
        for (I64 t = lo; t < hi; ++t) {
            const I64 ni = t / cs.o, oc = t % cs.o, plane = ni * cs.cin + oc / cs.og;
            cpu::depthwise_plane<C>(kr.isa, g, plan, px + plane * cs.h * cs.w, pw + oc * cs.wh.k * cs.ww.k,
                                    static_cast<C>(bias[static_cast<std::size_t>(oc)]), po + t * npix, 0, npix,
                                    scratch.data());
        }
    });
}

// Every other conv2d as a GEMM per (sample, group, block of output pixels): weights
// [og x cg*kh*kw] times the im2col block, into the output block started from the bias.
// A 1x1 convolution with stride 1 and no padding reads the input planes as the GEMM's right
// operand directly (no im2col).
template <class C>
void conv_gemm(const ConvShape& cs, const SimdKernels<C>& kr, const C* px, const C* pw, const std::vector<double>& bias,
               C* po) {
    const I64 npix = cs.oh * cs.ow, ckk = cs.cg * cs.wh.k * cs.ww.k;
    const bool direct = cs.wh.k == 1 && cs.ww.k == 1 && cs.wh.s == 1 && cs.ww.s == 1 && cs.wh.p == 0 && cs.ww.p == 0;
    // Pixels per task: keep an im2col block near 2^18 elements; with several threads, split
    // each image into enough blocks for about four tasks per thread.
    I64 pb = direct ? npix : std::max<I64>(16, ((I64(1) << 18) / std::max<I64>(ckk, 1)) / 16 * 16);
    const int width = core::parallel_width();
    if (width > 1) {
        const I64 per_image = ceil_div(4 * width, cs.n * cs.groups);
        pb = std::min(pb, std::max<I64>(64, ceil_div(ceil_div(npix, per_image), 16) * 16));
    }
    pb = std::min(pb, npix);
    const I64 pblocks = ceil_div(npix, pb);
    const cpu::Im2colShape geometry{cs.cg, cs.h, cs.w, cs.ow, cs.wh.k, cs.ww.k, cs.wh.s, cs.ww.s,
                                    cs.wh.p, cs.ww.p, cs.wh.d, cs.ww.d};
    core::parallel_range(cs.n * cs.groups * pblocks, cs.og * std::max<I64>(ckk, 1) * pb, [&](I64 lo, I64 hi) {
        std::vector<C> col(direct ? 0 : static_cast<std::size_t>(ckk * round_up(pb, kr.nr)));
        for (I64 t = lo; t < hi; ++t) {
            const I64 ni = t / (cs.groups * pblocks), g = (t / pblocks) % cs.groups, p0 = (t % pblocks) * pb;
            const I64 np = std::min(pb, npix - p0);
            const C* src = px + (ni * cs.cin + g * cs.cg) * cs.h * cs.w;
            C* dst = po + (ni * cs.o + g * cs.og) * npix + p0;
            for (I64 oc = 0; oc < cs.og; ++oc)
                std::fill_n(dst + oc * npix, np, static_cast<C>(bias[static_cast<std::size_t>(g * cs.og + oc)]));
            if (direct) {
                cpu::gemm_acc<C>(kr.isa, cs.og, np, ckk, pw + g * cs.og * ckk, ckk, src + p0, npix, dst, npix);
            } else {
                cpu::im2col_packed(geometry, src, p0, np, kr.nr, col.data());
                cpu::gemm_acc_packed_b<C>(kr.isa, cs.og, np, ckk, pw + g * cs.og * ckk, ckk, col.data(), dst, npix);
            }
        }
    });
}

template <class C> bool is_nan(C v) {
    if constexpr (std::is_floating_point_v<C>) return std::isnan(v);
    else return false;
}

}  // namespace

Tensor conv2d(const ir::Node& node, const std::vector<Tensor>& in, const Shape& out_shape) {
    const Tensor &x = in[0], &w = in[1];
    KILN_CHECK(x.rank() == 4 && w.rank() == 4 && out_shape.size() == 4, "interp: conv2d ranks");
    const auto &stride = node.attrs.ints("stride"), &padding = node.attrs.ints("padding"),
               &dilation = node.attrs.ints("dilation");
    const I64 groups = node.attrs.i("groups");
    const I64 n = x.dim(0), cin = x.dim(1), h = x.dim(2), wd = x.dim(3);
    const I64 o = w.dim(0), cg = w.dim(1), kh = w.dim(2), kw = w.dim(3);
    KILN_USER_CHECK(cin == cg * groups, "conv2d: input has " << cin << " channels, expected weight dim 1 (" << cg
                                                             << ") * groups (" << groups << ")");
    KILN_CHECK(o % groups == 0 && out_shape[0] == n && out_shape[1] == o, "interp: conv2d output shape");
    if (in.size() == 3)
        KILN_USER_CHECK(in[2].rank() == 1 && in[2].dim(0) == o,
                        "conv2d: bias has shape " << shape_to_string(in[2].shape()) << ", expected [" << o << "]");
    ConvShape cs;
    cs.n = n, cs.cin = cin, cs.h = h, cs.w = wd, cs.o = o, cs.groups = groups, cs.cg = cg, cs.og = o / groups;
    cs.oh = out_shape[2], cs.ow = out_shape[3];
    cs.wh = {kh, stride[0], padding[0], dilation[0]};
    cs.ww = {kw, stride[1], padding[1], dilation[1]};
    const DType ct = compute_dtype(x.dtype());
    Tensor out = Tensor::empty(out_shape, ct);
    if (out.numel() == 0) return ct == x.dtype() ? out : out.astype(x.dtype());

    const Tensor xc = dense_as(x, ct), wc = dense_as(w, ct);
    const std::vector<double> bias = in.size() == 3 ? in[2].to_doubles() : std::vector<double>(static_cast<std::size_t>(o), 0.0);
    dispatch_floating(ct, "conv2d", [&](auto tag) {
        using C = decltype(tag);
        if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
            const C* px = static_cast<const C*>(xc.data());
            const C* pw = static_cast<const C*>(wc.data());
            C* po = static_cast<C*>(out.data());
            const SimdKernels<C>& kr = simd_kernels<C>(cpu::kernel_cpu_isa());
            if (cg == 1) conv_depthwise<C>(cs, kr, px, pw, bias, po);
            else conv_gemm<C>(cs, kr, px, pw, bias, po);
        } else {
            KILN_UNREACHABLE("interp: conv2d compute dtype");
        }
    });
    return ct == x.dtype() ? out : out.astype(x.dtype());
}

Tensor pool2d(const ir::Node& node, const Tensor& x, const Shape& out_shape) {
    KILN_CHECK(x.rank() == 4 && out_shape.size() == 4, "interp: pool ranks");
    const bool is_max = node.op == ir::Op::max_pool2d;
    const auto &kernel = node.attrs.ints("kernel"), &stride = node.attrs.ints("stride"),
               &padding = node.attrs.ints("padding");
    const I64 h = x.dim(2), wd = x.dim(3), oh = out_shape[2], ow = out_shape[3];
    Tensor out = Tensor::empty(out_shape, x.dtype());
    if (out.numel() == 0) return out;
    const Tensor xc = x.contiguous();
    const I64 planes = x.dim(0) * x.dim(1);
    if (is_max && (x.dtype() == DType::f32 || x.dtype() == DType::f64)) {
        // The vector kernel (src/cpu/pool.h), one plane per task.
        const cpu::PoolGeometry g{h, wd, oh, ow, kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1]};
        auto run = [&](auto tag) {
            using T = decltype(tag);
            const T* px = static_cast<const T*>(xc.data());
            T* po = static_cast<T*>(out.data());
            core::parallel_range(planes, oh * ow * kernel[0] * kernel[1], [&](I64 lo, I64 hi) {
                std::vector<T> scratch(static_cast<std::size_t>(cpu::max_pool_scratch_elems(g)));
                for (I64 pl = lo; pl < hi; ++pl)
                    cpu::max_pool_plane<T>(cpu::kernel_cpu_isa(), g, px + pl * h * wd, po + pl * oh * ow, scratch.data());
            });
        };
        if (x.dtype() == DType::f32) run(float{});
        else run(double{});
        return out;
    }
    core::dispatch(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        using C = core::compute_t<T>;
        if constexpr (std::is_same_v<T, bool>) {
            KILN_UNREACHABLE("interp: pooling on bool");
        } else {
            const T* px = static_cast<const T*>(xc.data());
            T* po = static_cast<T*>(out.data());
            core::parallel_range(planes, oh * ow * kernel[0] * kernel[1], [&](I64 lo, I64 hi) {
                for (I64 pl = lo; pl < hi; ++pl) {
                    const T* src = px + pl * h * wd;
                    T* dst = po + pl * oh * ow;
                    for (I64 y = 0; y < oh; ++y) {
                        const I64 y0 = y * stride[0] - padding[0];
                        const I64 ya = std::max<I64>(y0, 0), yb = std::min(y0 + kernel[0], h);
                        for (I64 xo = 0; xo < ow; ++xo) {
                            const I64 x0 = xo * stride[1] - padding[1];
                            const I64 xa = std::max<I64>(x0, 0), xb = std::min(x0 + kernel[1], wd);
                            if (is_max) {
                                C best = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                                              : std::numeric_limits<C>::lowest();
                                bool nan = false;
                                for (I64 iy = ya; iy < yb && !nan; ++iy)
                                    for (I64 ix = xa; ix < xb; ++ix) {
                                        const C v = ld<T>(src[iy * wd + ix]);
                                        if (is_nan(v)) {
                                            best = v;
                                            nan = true;
                                            break;
                                        }
                                        if (v > best) best = v;
                                    }
                                dst[y * ow + xo] = st<T>(best);
                            } else {
                                double sum = 0;
                                for (I64 iy = ya; iy < yb; ++iy)
                                    for (I64 ix = xa; ix < xb; ++ix) sum += static_cast<double>(ld<T>(src[iy * wd + ix]));
                                const I64 count = std::max<I64>(yb - ya, 0) * std::max<I64>(xb - xa, 0);
                                dst[y * ow + xo] = core::convert<T>(count ? sum / static_cast<double>(count)
                                                                          : std::numeric_limits<double>::quiet_NaN());
                            }
                        }
                    }
                }
            });
        }
    });
    return out;
}

Tensor global_avg_pool2d(const Tensor& x, const Shape& out_shape) {
    KILN_CHECK(x.rank() == 4, "interp: global_avg_pool2d rank");
    Tensor out = Tensor::empty(out_shape, x.dtype());
    if (out.numel() == 0) return out;
    const Tensor xc = x.contiguous();
    const I64 plane = x.dim(2) * x.dim(3);
    dispatch_floating(x.dtype(), "global_avg_pool2d", [&](auto tag) {
        using T = decltype(tag);
        const T* px = static_cast<const T*>(xc.data());
        T* po = static_cast<T*>(out.data());
        core::parallel_range(out.numel(), std::max<I64>(plane, 1), [&](I64 lo, I64 hi) {
            for (I64 i = lo; i < hi; ++i) {
                // Eight partial sums (elements k mod 8) in four pairs of doubles (GCC's vector
                // extension: an SSE2 register each on generic x86-64), added at the end:
                // independent additions, not one chain (a plane of 112 x 112 took 0.9 ns per
                // element).
                typedef double D2 __attribute__((vector_size(2 * sizeof(double))));
                auto pair = [](const T* e) { return D2{static_cast<double>(ld<T>(e[0])), static_cast<double>(ld<T>(e[1]))}; };
                const T* src = px + i * plane;
                D2 a0 = {}, a1 = {}, a2 = {}, a3 = {};
                I64 k = 0;
                for (; k + 8 <= plane; k += 8) {
                    a0 += pair(src + k);
                    a1 += pair(src + k + 2);
                    a2 += pair(src + k + 4);
                    a3 += pair(src + k + 6);
                }
                const D2 t = (a0 + a1) + (a2 + a3);
                double sum = t[0] + t[1];
                for (; k < plane; ++k) sum += static_cast<double>(ld<T>(src[k]));
                po[i] = core::convert<T>(plane ? sum / static_cast<double>(plane) : std::numeric_limits<double>::quiet_NaN());
            }
        });
    });
    return out;
}

}  // namespace kiln::interp
