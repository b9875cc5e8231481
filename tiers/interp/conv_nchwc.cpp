// conv2d_nchwc (ops.def). f32 in blocks of 16 channels: src/cpu's blocked-layout kernel
// (src/cpu/conv_nchwc.h, shared with tier 2), one task per (sample, channel block, block of
// pixels). Other dtypes and blocks: as the op's definition reads: the operands unblocked
// into NCHW / OIHW (in the compute dtype), conv2d (conv_pool.cpp) on them, and its result
// blocked again; a dense conv reads the input's first CG channels, a depthwise one is
// conv2d with one group per channel of the padded channel count.
#include "src/core/strided.h"
#include "src/cpu/conv_nchwc.h"
#include "src/support/check.h"
#include "tiers/interp/kernels.h"

#include <algorithm>

namespace kiln::interp {
namespace {

using I64 = std::int64_t;

template <class C> const C* data_of(const Tensor& t) { return static_cast<const C*>(t.data()); }
template <class C> C* data_of(Tensor& t) { return static_cast<C*>(t.data()); }

// Pixels per task of the f32 kernel.
constexpr I64 kPixelBlock = 256;

Tensor blocked_f32(const ir::Node& node, const std::vector<Tensor>& in, const Shape& out_shape) {
    const Tensor x = in[0].contiguous(), w = in[1].contiguous(), b = in.size() == 3 ? in[2].contiguous() : Tensor();
    const auto &stride = node.attrs.ints("stride"), &padding = node.attrs.ints("padding"), &dilation = node.attrs.ints("dilation");
    cpu::NchwcGeometry g;
    g.blocked_input = node.attrs.i("blocked_input") != 0;
    g.depthwise = node.attrs.i("depthwise") != 0;
    g.cin = w.dim(1), g.kh = w.dim(2), g.kw = w.dim(3);
    g.h = x.dim(2), g.w = x.dim(3), g.oh = out_shape[2], g.ow = out_shape[3];
    g.sh = stride[0], g.sw = stride[1], g.ph = padding[0], g.pw = padding[1], g.dh = dilation[0], g.dw = dilation[1];
    const I64 n = x.dim(0), ob = out_shape[1], npix = g.oh * g.ow;
    const I64 x_sample = x.numel() / std::max<I64>(n, 1), o_sample = ob * npix * cpu::kNchwcLanes;
    Tensor out = Tensor::empty(out_shape, DType::f32);
    if (out.numel() == 0) return out;
    const I64 pblocks = (npix + kPixelBlock - 1) / kPixelBlock, taps = (g.depthwise ? 1 : g.cin) * g.kh * g.kw;
    const float *px = data_of<float>(x), *pw = data_of<float>(w), *pb = b.defined() ? data_of<float>(b) : nullptr;
    float* po = data_of<float>(out);
    const cpu::CpuIsa isa = cpu::kernel_cpu_isa();
    core::parallel_range(n * ob * pblocks, kPixelBlock * cpu::kNchwcLanes * taps, [&](I64 lo, I64 hi) {
        for (I64 t = lo; t < hi; ++t) {
            const I64 s = t / (ob * pblocks), blk = (t / pblocks) % ob, p0 = (t % pblocks) * kPixelBlock;
            const I64 p1 = std::min(npix, p0 + kPixelBlock);
            cpu::conv_nchwc_f32(isa, g, px + s * x_sample, pw, pb, po + s * o_sample + (blk * npix + p0) * cpu::kNchwcLanes,
                                npix * cpu::kNchwcLanes, blk, blk + 1, p0, p1);
        }
    });
    return out;
}

}  // namespace

Tensor conv2d_nchwc(const ir::Node& node, const std::vector<Tensor>& in, const Shape& out_shape) {
    const bool blocked = node.attrs.i("blocked_input") != 0, depthwise = node.attrs.i("depthwise") != 0;
    const Tensor &x = in[0], &w = in[1];
    KILN_CHECK(w.rank() == 5 && x.rank() == (blocked ? 5 : 4) && out_shape.size() == 5, "interp: conv2d_nchwc ranks");
    const I64 ob = w.dim(0), cg = w.dim(1), kh = w.dim(2), kw = w.dim(3), B = w.dim(4), O = ob * B;
    const I64 n = x.dim(0), h = x.dim(2), wd = x.dim(3);
    const I64 xc = blocked ? x.dim(1) * B : x.dim(1);  // the input's (padded) channels
    const I64 cin = depthwise ? O : cg;                // the channels conv2d reads
    KILN_USER_CHECK(cin <= xc, "conv2d_nchwc: the weight reads " << cin << " input channels, the input has " << xc);
    if (x.dtype() == DType::f32 && B == cpu::kNchwcLanes) return blocked_f32(node, in, out_shape);
    const DType ct = compute_dtype(x.dtype());
    const Tensor xd = dense_as(x, ct), wdn = dense_as(w, ct);
    Tensor xn = Tensor::empty({n, cin, h, wd}, ct), wn = Tensor::empty({O, cg, kh, kw}, ct), bn = Tensor::zeros({O}, ct);
    const Tensor bd = in.size() == 3 ? dense_as(in[2], ct) : Tensor();
    const I64 plane = h * wd, taps = cg * kh * kw;
    dispatch_floating(ct, "conv2d_nchwc", [&](auto tag) {
        using C = decltype(tag);
        if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
            const C* px = data_of<C>(xd);
            C* pxn = data_of<C>(xn);
            for (I64 s = 0; s < n; ++s)
                for (I64 c = 0; c < cin; ++c)
                    for (I64 p = 0; p < plane; ++p)
                        pxn[(s * cin + c) * plane + p] =
                            blocked ? px[((s * (xc / B) + c / B) * plane + p) * B + c % B] : px[(s * xc + c) * plane + p];
            const C* pw = data_of<C>(wdn);
            C* pwn = data_of<C>(wn);
            for (I64 o = 0; o < O; ++o)
                for (I64 t = 0; t < taps; ++t) pwn[o * taps + t] = pw[((o / B) * taps + t) * B + o % B];
            if (bd.defined()) std::copy_n(data_of<C>(bd), O, data_of<C>(bn));
        } else {
            KILN_UNREACHABLE("interp: conv2d_nchwc compute dtype");
        }
    });
    ir::Node conv;
    conv.op = ir::Op::conv2d;
    for (const char* a : {"dilation", "padding", "stride"}) conv.attrs.set(a, node.attrs.ints(a));
    conv.attrs.set("groups", depthwise ? O : I64{1});
    const I64 oh = out_shape[2], ow = out_shape[3], npix = oh * ow;
    const Tensor yn = conv2d(conv, {xn, wn, bn}, {n, O, oh, ow});
    Tensor out = Tensor::empty(out_shape, ct);
    dispatch_floating(ct, "conv2d_nchwc", [&](auto tag) {
        using C = decltype(tag);
        if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
            const C* py = data_of<C>(yn);
            C* po = data_of<C>(out);
            for (I64 s = 0; s < n; ++s)
                for (I64 o = 0; o < O; ++o)
                    for (I64 p = 0; p < npix; ++p) po[((s * ob + o / B) * npix + p) * B + o % B] = py[(s * O + o) * npix + p];
        }
    });
    return ct == x.dtype() ? out : out.astype(x.dtype());
}

}  // namespace kiln::interp
