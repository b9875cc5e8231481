// Lowering of conv groups that start with a conv2d_nchwc (ops.def: the blocked channel
// layout, B channels per block) and its fused epilogue chain, as the loop nest of an
// implicit GEMM per sample n: for output channel block ob, output pixel p and lane l (the
// output channel o = ob * B + l),
//   C[o, p] = sum over kk of A[o, kk] * X(kk, p)
// with A[o, kk] = w[(ob * K + kk) * B + l] (the weight as the op lays it out: every (block,
// kk) a run of B output channels), kk = (c, i, j) over the K = CG * KH * KW taps (a
// depthwise conv: c = o, K = KH * KW), and X the input at channel c, row
// y * stride - pad + i * dilation, column likewise, 0 outside the image:
//   blocked input   x[(((n * Cb + c / B) * H + iy) * W + ix) * B + c % B]
//   NCHW input      x[((n * C + c) * H + iy) * W + ix]
// The epilogue stores C[o, p] (plus the bias b[o], then the chain) at [n, ob, p, l]: the
// lane is the innermost loop, so that the epilogue's loads and stores of one pixel are
// consecutive along it. An outer index is one block of channel blocks and one block of
// pixels of one sample. With f32 operands and output and blocks of cpu::kNchwcLanes the
// kernel carries a kir::NchwcConv describing the nest for a backend's blocked kernel.
#include "src/cpu/conv_nchwc.h"
#include "src/kir/lower_ctx.h"
#include "src/support/limits.h"

#include <algorithm>

namespace kiln::kir::detail {

using ir::ValueId;

void lower_conv_nchwc(Lowering& L, const ir::Node& cn) {
    const ValueId cv = L.group.nodes.front();
    const ValueId out = L.group.outputs.front();
    const ValueId X = cn.inputs[0], Wt = cn.inputs[1];
    const DType dt = L.node(X).type.dtype;
    const bool blocked = cn.attrs.i("blocked_input") != 0, dw = cn.attrs.i("depthwise") != 0;
    if (cn.type.rank() != 5 || L.node(X).type.rank() != (blocked ? 5 : 4) || L.node(Wt).type.rank() != 5)
        throw Unsupported{"conv2d_nchwc ranks"};
    const Type t = compute_type(dt);
    const auto &stride = cn.attrs.ints("stride"), &padding = cn.attrs.ints("padding"), &dilation = cn.attrs.ints("dilation");

    auto dim = [&](ValueId v, std::size_t axis) { return L.known_dim(v, axis); };
    const ExprRef N = dim(X, 0), XC = dim(X, 1), H = dim(X, 2), Wd = dim(X, 3);
    const ExprRef Ob = dim(Wt, 0), CG = dim(Wt, 1), KH = dim(Wt, 2), KW = dim(Wt, 3), B = dim(Wt, 4);
    const ExprRef OH = dim(out, 2), OW = dim(out, 3);
    const ExprRef npix = imul(OH, OW), KHW = imul(KH, KW), K = dw ? KHW : imul(CG, KHW);
    std::int64_t b_c = 0;
    if (!const_value(B, &b_c) || b_c < 1) throw Unsupported{"conv2d_nchwc block"};
    // Outer indices of at most conv_row_block channels (rounded down to whole pairs of blocks,
    // the AVX-512 kernel's tiles), and of pixels as lower_conv.cpp cuts them: an image
    // of one block of channels and one of pixels is two outer indices, so that a second
    // thread can share it (mobilenet_v2's 14 x 14 and 28 x 28 layers at batch 1). Both in
    // units of one (a block of channels, a pixel), not of the kernels' tiles, so that two
    // threads get equal shares: mobilenet_v2's 7 x 7 layers of 10 and 20 blocks (160 and 320
    // channels) made row blocks of 6 (6 + 4, 6 + 6 + 6 + 2), its 14 x 14 projections pixel
    // blocks of 112 + 84; as 5 + 5 and 98 + 98, mobilenet_v2 at batch 1 on 2 threads ran 3-6%
    // faster (AMD EPYC Zen 4, 256 and 512 bits), on 1 thread as fast.
    const std::int64_t row_cap = std::max<std::int64_t>(limits::conv_row_block / b_c / 2 * 2, 2);
    const std::int64_t row_block = balanced_block(Ob, row_cap, 1);
    std::int64_t col_block = balanced_block(npix, limits::conv_col_block, 16);
    std::int64_t ob_c = 0;
    if (const_value(Ob, &ob_c) && ob_c <= row_block) col_block = two_blocks_if_one(npix, col_block, 1);
    const ExprRef rblocks = ceil_div(Ob, row_block), cblocks = ceil_div(npix, col_block);

    const int vb = L.new_var(), vo = L.new_var(), vj = L.new_var(), vl = L.new_var(), vk = L.new_var();
    const ExprRef nv = var(vb), obv = var(vo), pv = var(vj), lv = var(vl), kv = var(vk);
    const ExprRef ov = iadd(imul(obv, B), lv);  // the output channel
    const int xbuf = L.input_buffer(X, "a conv operand"), wbuf = L.input_buffer(Wt, "a conv operand");

    // X(kk, p)
    const ExprRef c = dw ? ov : idiv(kv, KHW), i = irem(idiv(kv, KW), KH), j = irem(kv, KW);
    const ExprRef y = idiv(pv, OW), xo = irem(pv, OW);
    const ExprRef iy = conv_coord(y, stride[0], padding[0], i, dilation[0]);
    const ExprRef ix = conv_coord(xo, stride[1], padding[1], j, dilation[1]);
    const ExprRef sample = imul(nv, imul(XC, imul(H, imul(Wd, blocked ? B : index_const(1)))));
    const ExprRef pix = iadd(imul(iy, Wd), ix);
    // (depthwise: c / B = ob and c % B = l)
    const ExprRef cblk = dw ? obv : idiv(c, B), clane = dw ? lv : irem(c, B);
    const ExprRef xidx = blocked ? iadd(sample, iadd(imul(iadd(imul(cblk, imul(H, Wd)), pix), B), clane))
                                 : iadd(sample, iadd(imul(c, imul(H, Wd)), pix));
    const ExprRef x_el = padded_load(xbuf, t, xidx, sample, iy, ix, H, Wd, padding[0], padding[1]);

    const int acc = L.new_temp(t);
    const ExprRef at = temp(acc, t);
    std::vector<StmtRef> lbody;
    lbody.push_back(assign(acc, constant(t, 0.0)));
    const ExprRef a_el = load(wbuf, t, iadd(imul(iadd(imul(obv, K), kv), B), lv));
    lbody.push_back(loop(vk, index_const(0), K, {assign(acc, binary(BinaryOp::add, at, binary(BinaryOp::mul, a_el, x_el)))}));

    // The epilogue: bias, then the chain, stored at [n, ob, p, l].
    Space sp = L.make_space(out, {0, 1, 2, 4}, {nv, obv, pv, lv});
    std::vector<StmtRef> epi;
    Phase ph{&sp, &epi, {}};
    // The conv's value: acc plus the bias; with `channels`, 0 for the channels past it.
    const std::int64_t channels = cn.attrs.has("channels") ? cn.attrs.i("channels") : -1;
    const int bbuf = cn.inputs.size() == 3 ? L.input_buffer(cn.inputs[2], "a conv operand") : -1;
    L.special[cv] = [at, bbuf, t, ov, channels](Phase&) {
        ExprRef v = bbuf >= 0 ? binary(BinaryOp::add, at, load(bbuf, t, ov)) : at;
        return channels >= 0 ? select(binary(BinaryOp::lt, ov, index_const(channels)), v, constant(t, 0.0)) : v;
    };
    L.store_outputs({out}, ph);
    for (const StmtRef& s : epi) lbody.push_back(s);  // (shared with the hint's epilogue)

    // outer -> (sample, channel block, pixel block).
    const ExprRef per_sample = imul(rblocks, cblocks);
    const ExprRef n0 = idiv(outer(), per_sample);
    const ExprRef row0 = imul(irem(idiv(outer(), cblocks), rblocks), index_const(row_block));
    const ExprRef col0 = imul(irem(outer(), cblocks), index_const(col_block));
    StmtRef ll = loop(vl, index_const(0), B, std::move(lbody));
    StmtRef pl = loop(vj, col0, imin(iadd(col0, index_const(col_block)), npix), {ll});
    StmtRef ol = loop(vo, row0, imin(iadd(row0, index_const(row_block)), Ob), {pl});
    L.k.body = {loop(vb, n0, iadd(n0, index_const(1)), {ol})};
    L.k.extent = imul(N, per_sample);

    std::int64_t cg_c = 0, kh_c = 0, kw_c = 0;
    bool f32 = true;
    for (ValueId v : {X, Wt, out}) f32 = f32 && L.node(v).type.dtype == DType::f32;
    if (!f32 || b_c != cpu::kNchwcLanes || !const_value(CG, &cg_c) || !const_value(KH, &kh_c) || !const_value(KW, &kw_c)) return;
    NchwcConv h;
    h.x = xbuf;
    h.w = wbuf;
    h.out = L.output_buffer(out);
    if (cn.inputs.size() == 3) h.bias = L.input_buffer(cn.inputs[2], "a conv operand");
    h.x_offset = sample;
    h.batch = N;
    h.blocks = Ob;
    h.npix = npix;
    h.depth = K;
    h.h = H;
    h.w_in = Wd;
    h.oh = OH;
    h.ow = OW;
    h.cin = cg_c;
    h.kh = kh_c;
    h.kw = kw_c;
    for (int d = 0; d < 2; ++d) {
        h.stride[d] = stride[static_cast<std::size_t>(d)];
        h.pad[d] = padding[static_cast<std::size_t>(d)];
        h.dilation[d] = dilation[static_cast<std::size_t>(d)];
    }
    h.blocked_input = blocked;
    h.depthwise = dw;
    if (channels >= 0) h.cout = channels;
    h.block_rows = row_block;
    h.col_block = col_block;
    h.batch_var = vb;
    h.block_var = vo;
    h.col_var = vj;
    h.lane_var = vl;
    h.acc_temp = acc;
    h.epilogue = std::move(epi);
    L.k.nchwc = std::move(h);
}

}  // namespace kiln::kir::detail
