// Lowering of conv groups (see lower.h): a conv2d (NCHW input, OIHW weight, optional bias,
// grouped, strided, dilated, zero padded) and its fused epilogue chain, as an implicit GEMM.
// For each batch entry b = (sample n, group g) the output block [og, oh * ow] is
//   C[oc, p] = sum over kk in [0, cg * kh * kw) of W[g * og + oc, kk] * im2col(x)[kk, p]
// so the kernel is the matmul loop nest of kir.h with A the weight (dense [og, k] at
// offset g * og * k), B the im2col matrix that kir::Im2col describes (never built: the naive
// nest computes each element with a select, a blocked backend packs it straight from x),
// and an outer index that covers a block of output channels and a block of output pixels
// (MatmulHint::col_block), so that threads split the pixels of one image.
#include "src/cpu/winograd.h"
#include "src/kir/lower_ctx.h"
#include "src/support/limits.h"

#include <algorithm>
#include <sstream>

namespace kiln::kir::detail {
namespace {

using ir::ValueId;

// The most output channels and output pixels per outer index; static counts are split into
// equal blocks (balanced_block), so that threads split an image evenly.
constexpr std::int64_t kRowBlock = limits::conv_row_block;
constexpr std::int64_t kColBlock = limits::conv_col_block;
constexpr std::int64_t kDwColBlock = limits::conv_dw_col_block;
// Weights packed for channel lanes (see lower_conv): the channels of a tile (two AVX-512
// vectors of f32), and the most output pixels of an image for which they are packed (from
// 28 x 28 on, vectors along the pixels waste few lanes and the LLVM tier's cost model keeps
// them: the copy, as large as the weights, would go unused).
constexpr std::int64_t kPackLanes = 32;
constexpr std::int64_t kPackPixels = 256;
// Winograd F(4x4, 3x3) (src/cpu/winograd.h, MatmulHint::winograd) for 3x3 convs of stride 1
// with constant weights whose output is at least kWinoMinSide pixels a side and whose
// channels are at least kWinoMinChannels each way (fewer: the transforms cost more than the
// multiplications they save; 7 x 7: 4 tiles, and resnet18's 512-channel weights, 38 MB
// transformed, read from memory per image). At 13 x 13 it is about even (squeezenet's 48 ->
// 192: 0.29 ms either way; 64 -> 256: 0.51 -> 0.45 ms; AMD EPYC Zen 4, 1 thread). Row blocks
// of whole tiles of cpu::kWinoLanes channels, at most kWinoRowBlock; column blocks of whole
// bands of 4 output rows.
constexpr std::int64_t kWinoMinSide = 12;
constexpr std::int64_t kWinoMinChannels = 16;
constexpr std::int64_t kWinoRowBlock = 128;

}  // namespace

const ir::Node& checked_conv(Lowering& L) {
    const ir::Node& cn = L.node(L.group.nodes.front());
    if (cn.op != ir::Op::conv2d && cn.op != ir::Op::conv2d_nchwc) throw Unsupported{"the group does not start with a conv2d"};
    if (L.group.outputs.size() != 1) throw Unsupported{"a conv group with more than one output"};
    const DType dt = L.node(cn.inputs[0]).type.dtype;
    for (ValueId v : cn.inputs)
        if (!is_floating(dt) || L.node(v).type.dtype != dt) {
            std::ostringstream os;
            os << ir::op_name(cn.op) << " of " << L.node(v).type.dtype << " is not lowered (floating dtypes only)";
            throw Unsupported{os.str()};
        }
    if (L.node(L.group.outputs.front()).type.dims != cn.type.dims) throw Unsupported{"the epilogue changes the conv's shape"};
    return cn;
}

void lower_conv(Lowering& L) {
    const ValueId cv = L.group.nodes.front();
    const ir::Node& cn = checked_conv(L);
    if (cn.op == ir::Op::conv2d_nchwc) return lower_conv_nchwc(L, cn);
    const ValueId out = L.group.outputs.front();
    const ValueId X = cn.inputs[0], Wt = cn.inputs[1];
    const DType dt = L.node(X).type.dtype;
    const auto& od = cn.type.dims;
    if (od.size() != 4 || L.node(X).type.rank() != 4 || L.node(Wt).type.rank() != 4) throw Unsupported{"conv2d ranks"};
    const Type t = compute_type(dt);
    const auto &stride = cn.attrs.ints("stride"), &padding = cn.attrs.ints("padding"), &dilation = cn.attrs.ints("dilation");
    const std::int64_t groups = cn.attrs.i("groups");
    if (stride.size() != 2 || padding.size() != 2 || dilation.size() != 2 || groups < 1)
        throw Unsupported{"conv2d attributes"};

    auto dim = [&](ValueId v, std::size_t axis) { return L.known_dim(v, axis); };
    const ExprRef N = dim(X, 0), Cin = dim(X, 1), H = dim(X, 2), Wd = dim(X, 3);
    const ExprRef O = dim(Wt, 0), CG = dim(Wt, 1), KH = dim(Wt, 2), KW = dim(Wt, 3);
    const ExprRef OH = dim(out, 2), OW = dim(out, 3);
    const ExprRef G = index_const(groups);
    const ExprRef og = idiv(O, G), npix = imul(OH, OW), KHW = imul(KH, KW), K = imul(CG, KHW);
    const ExprRef batch = imul(N, G);
    // A depthwise convolution (one input channel per group) is cheap per pixel: its blocks
    // are whole planes up to kDwColBlock pixels (the channels are what threads split).
    std::int64_t cg = 0;
    const bool depthwise = const_value(CG, &cg) && cg == 1;
    // Weights that are a graph constant, of a conv whose image is small, are also packed for
    // vectors along the output channels (kir::Derived; a backend's channel-lane path reads
    // them): tiles of kPackLanes channels, so the row blocks are whole tiles.
    std::int64_t og_c = 0, k_c = 0, npix_c = 0, kh_c = 0, kw_c = 0, oh_c = 0, ow_c = 0;
    const bool const_w = L.node(Wt).op == ir::Op::constant;
    const bool wino = cpu::winograd_allowed() && !depthwise && groups == 1 && dt == DType::f32 && const_w &&
                      const_value(KH, &kh_c) && kh_c == 3 && const_value(KW, &kw_c) && kw_c == 3 && stride[0] == 1 &&
                      stride[1] == 1 && dilation[0] == 1 && dilation[1] == 1 && const_value(og, &og_c) &&
                      og_c >= kWinoMinChannels && cg >= kWinoMinChannels && const_value(OH, &oh_c) &&
                      oh_c >= kWinoMinSide && const_value(OW, &ow_c) && ow_c >= kWinoMinSide;
    const bool pack_a = !wino && !depthwise && dt == DType::f32 && const_w && const_value(og, &og_c) && og_c >= kPackLanes &&
                        const_value(K, &k_c) && const_value(npix, &npix_c) && npix_c <= kPackPixels;
    const std::int64_t row_block = wino ? balanced_block(og, kWinoRowBlock, cpu::kWinoLanes)
                                        : balanced_block(og, kRowBlock, pack_a ? kPackLanes : 8);
    // (Winograd: bands of 4 output rows as the unit, as many as fit in kColBlock pixels.)
    const std::int64_t col_unit = wino ? 4 * ow_c : 16;
    std::int64_t col_block = wino ? balanced_block(npix, std::max(col_unit, kColBlock / col_unit * col_unit), col_unit)
                                  : balanced_block(npix, depthwise ? kDwColBlock : kColBlock, 16);
    // An image whose output channels are one row block and whose pixels one column block
    // would be one outer index, which no second thread can share at batch 1 (mobilenet_v2's
    // 14 x 14 projections: 96 channels, 196 pixels): its pixels make two column blocks.
    std::int64_t og_n = 0;
    if (!depthwise && const_value(og, &og_n) && og_n <= row_block) col_block = two_blocks_if_one(npix, col_block, col_unit);
    const ExprRef rblocks = ceil_div(og, row_block), cblocks = ceil_div(npix, col_block);

    const int vb = L.new_var(), vi = L.new_var(), vj = L.new_var(), vk = L.new_var();
    const ExprRef bv = var(vb), iv = var(vi), jv = var(vj), kv = var(vk);
    const ExprRef n_idx = idiv(bv, G), g_idx = irem(bv, G);
    const ExprRef aoff = imul(g_idx, imul(og, K));
    const ExprRef xoff = imul(iadd(imul(n_idx, Cin), imul(g_idx, CG)), imul(H, Wd));
    const int xbuf = L.input_buffer(X, "a conv operand"), wbuf = L.input_buffer(Wt, "a conv operand");

    // B[kk, p]: kk = (c, i, j), p = (y, xo).
    const ExprRef c = idiv(kv, KHW), i = irem(idiv(kv, KW), KH), j = irem(kv, KW);
    const ExprRef y = idiv(jv, OW), xo = irem(jv, OW);
    const ExprRef iy = conv_coord(y, stride[0], padding[0], i, dilation[0]);
    const ExprRef ix = conv_coord(xo, stride[1], padding[1], j, dilation[1]);
    const ExprRef xidx = iadd(xoff, iadd(imul(iadd(imul(c, H), iy), Wd), ix));
    // (every (iy, ix) of an unpadded conv lies inside the plane; with padding the nest loads
    // x[x_offset] for padded positions too, the value unused: fine, since no kernel runs on
    // an empty x, kir::Im2col)
    const ExprRef b_el = padded_load(xbuf, t, xidx, xoff, iy, ix, H, Wd, padding[0], padding[1]);

    // The dot product.
    const int acc = L.new_temp(t);
    const ExprRef at = temp(acc, t);
    std::vector<StmtRef> jbody;
    jbody.push_back(assign(acc, constant(t, 0.0)));
    const ExprRef a_el = load(wbuf, t, iadd(aoff, iadd(imul(iv, K), kv)));
    jbody.push_back(loop(vk, index_const(0), K, {assign(acc, binary(BinaryOp::add, at, binary(BinaryOp::mul, a_el, b_el)))}));

    // The epilogue: bias, then the chain, stored at (n, g * og + oc, p).
    const ExprRef chan = iadd(imul(g_idx, og), iv);
    Space sp = L.make_space(out, {0, 1, 2}, {n_idx, chan, jv});
    std::vector<StmtRef> epi;
    Phase ph{&sp, &epi, {}};
    if (cn.inputs.size() == 3) {
        const int bbuf = L.input_buffer(cn.inputs[2], "a conv operand");
        L.special[cv] = [at, bbuf, t, chan](Phase&) { return binary(BinaryOp::add, at, load(bbuf, t, chan)); };
    } else {
        L.special[cv] = [at](Phase&) { return at; };
    }
    L.store_outputs({out}, ph);
    for (const StmtRef& s : epi) jbody.push_back(s);

    // outer -> (batch entry, row block, column block).
    const ExprRef per_batch = imul(rblocks, cblocks);
    const ExprRef ob = idiv(outer(), per_batch);
    const ExprRef row0 = imul(irem(idiv(outer(), cblocks), rblocks), index_const(row_block));
    const ExprRef col0 = imul(irem(outer(), cblocks), index_const(col_block));
    StmtRef jl = loop(vj, col0, imin(iadd(col0, index_const(col_block)), npix), std::move(jbody));
    StmtRef il = loop(vi, row0, imin(iadd(row0, index_const(row_block)), og), {jl});
    L.k.body = {loop(vb, ob, iadd(ob, index_const(1)), {il})};
    L.k.extent = imul(batch, per_batch);

    MatmulHint h;
    h.a = wbuf;
    h.b = xbuf;
    h.out = L.output_buffer(out);
    h.type = t;
    h.m = og;
    h.n = npix;
    h.k = K;
    h.batch = batch;
    h.row_block = row_block;
    h.col_block = col_block;
    h.batch_var = vb;
    h.row_var = vi;
    h.col_var = vj;
    h.acc_temp = acc;
    h.a_offset = aoff;
    h.b_offset = xoff;
    h.epilogue = std::move(epi);
    Im2col im;
    im.x = xbuf;
    im.x_offset = xoff;
    im.h = H;
    im.w = Wd;
    im.kh = KH;
    im.kw = KW;
    im.ow = OW;
    for (int d = 0; d < 2; ++d) {
        im.stride[d] = stride[static_cast<std::size_t>(d)];
        im.pad[d] = padding[static_cast<std::size_t>(d)];
        im.dilation[d] = dilation[static_cast<std::size_t>(d)];
    }
    h.im2col = std::move(im);
    if (pack_a) {
        h.a_packed = static_cast<int>(L.k.derived.size());
        L.k.derived.push_back(Derived{wbuf, groups, og_c, k_c, kPackLanes});
    }
    if (wino) {
        h.winograd = static_cast<int>(L.k.derived.size());
        Derived d{wbuf, groups, og_c, 9 * cg, cpu::kWinoLanes};
        d.winograd = true;
        L.k.derived.push_back(d);
    }
    L.k.matmul = std::move(h);
}

}  // namespace kiln::kir::detail
