// conv2d_nchwc (ops.def). f32 in blocks of 16 channels: src/cpu's blocked-layout kernel
// (src/cpu/conv_nchwc.h, shared with tier 2), one task per (sample, channel block, block of
// pixels). Other dtypes and blocks: as the op's definition reads: the operands unblocked
// into NCHW / OIHW (in the compute dtype), conv2d (conv_pool.cpp) on them, and its result
// blocked again; a dense conv reads the input's first CG channels, a depthwise one is
// conv2d with one group per channel of the padded channel count; channels past `channels`
// are 0.
#include "src/core/strided.h"
#include "src/cpu/conv_nchwc.h"
#include "src/support/check.h"
#include "tiers/interp/kernels.h"

#include <algorithm>

namespace kiln::interp {
namespace {

using I64 = std::int64_t;

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
    if (node.attrs.has("channels")) g.cout = node.attrs.i("channels");
    const I64 n = x.dim(0), ob = out_shape[1], npix = g.oh * g.ow;
    const I64 x_sample = x.numel() / std::max<I64>(n, 1), o_sample = ob * npix * cpu::kNchwcLanes;
    Tensor out = Tensor::empty(out_shape, DType::f32);
    if (out.numel() == 0) return out;
    const I64 pblocks = (npix + kPixelBlock - 1) / kPixelBlock, taps = (g.depthwise ? 1 : g.cin) * g.kh * g.kw;
    const float *px = x.data_as<float>(), *pw = w.data_as<float>(), *pb = b.defined() ? b.data_as<float>() : nullptr;
    float* po = out.data_as<float>();
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
    // The definition, with tensor views: x as NCHW [n, xc, h, w] (its first cin channels),
    // w as OIHW [O, cg, kh, kw], b as [O]; conv2d; its [n, O, oh, ow] result blocked.
    const DType ct = compute_dtype(x.dtype());
    const Tensor xd = x.astype(ct);
    const Tensor xn = (blocked ? xd.permute({0, 1, 4, 2, 3}).reshape({n, xc, h, wd}) : xd).slice(1, 0, cin).contiguous();
    const Tensor wn = w.astype(ct).permute({0, 4, 1, 2, 3}).reshape({O, cg, kh, kw}).contiguous();
    const Tensor bn = in.size() == 3 ? in[2].astype(ct).reshape({O}) : Tensor::zeros({O}, ct);
    ir::Node conv;
    conv.op = ir::Op::conv2d;
    for (const char* a : {"dilation", "padding", "stride"}) conv.attrs.set(a, node.attrs.ints(a));
    conv.attrs.set("groups", depthwise ? O : I64{1});
    const I64 oh = out_shape[2], ow = out_shape[3];
    const Tensor yn = conv2d(conv, {xn, wn, bn}, {n, O, oh, ow});
    const I64 real = node.attrs.has("channels") ? node.attrs.i("channels") : O;
    if (real < O) yn.slice(1, real, O).copy_from(Tensor::zeros({n, O - real, oh, ow}, ct));  // the channels past it: 0
    const Tensor out = yn.reshape({n, ob, B, oh, ow}).permute({0, 1, 3, 4, 2}).contiguous();
    return ct == x.dtype() ? out : out.astype(x.dtype());
}

}  // namespace kiln::interp
