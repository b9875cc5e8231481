// The convolution paths of the blocked GEMM (gemm_gen.h; the plan at the top of gemm.cpp):
// a convolution's B (kir::Im2col) is never built. One input channel per group runs src/cpu's
// depthwise kernel (depthwise(), depthwise_planes()). Otherwise grid() reads B from the
// block's input rows copied once into zero-padded phase planes (one per stride phase; the
// image itself for a dense 1x1 conv), with register tiles over strips of consecutive output
// pixels; where the grid would be mostly padding, the packed loop nest of gemm.cpp packs B
// straight from the image, a run of output pixels of one output row at a time
// (pack_im2col()).
#include "tiers/llvm/gemm_gen.h"
#include "tiers/kir_forms.h"

namespace kiln::tiers::llvm_tier::gemm_detail {

// grid(): output pixels per chunk of strips that every row tile of a block runs over before
// the next chunk: the chunk's B (depth x pixels) takes at most this many bytes (half of a
// 32 KiB L1D), so that it is read from L1 by every row tile, and each row tile stores runs
// of consecutive pixels. Small depths (a 1x1 conv of 16 to 96 channels, a 3 x 3 stem of
// 3 channels) get chunks of many strips; deep ones one strip at a time, all row tiles over
// it (measured: mobilenet_v2's 16 -> 96 1x1 at 112 x 112, 1.9 -> 0.46 ms; AMD EPYC Zen 4).
constexpr std::int64_t kGridChunkBytes = 16 * 1024;
constexpr std::int64_t kGridWholeBytes = 256 * 1024;
// A depth of at most this many (a stem of 3 channels and a 3 x 3 filter: 27) makes the whole
// grid one chunk too: chunks of a few strips (4 at depth 27, 512-bit) had each row tile
// store a few lines into each of its output planes in turn, 64 planes per chunk, whose lines
// came in at the pace of demand misses. squeezenet1_1's stem (3 -> 64, 3 x 3, stride 2,
// 224 -> 111), tier 2, AMD EPYC Zen 5: 1 thread 0.33-0.54 -> 0.28-0.29 ms in four of five
// interleaved pairs (ONNX Runtime 0.28-0.33), batch 8 with 2 threads 3.5-4.4 -> 2.0-2.2 ms
// (ONNX Runtime 2.55); 256-bit within noise (0.56-0.65 against 0.51-0.71).
constexpr std::int64_t kGridShallowDepth = 32;
// micro_grid(): the most taps of a bound filter row emitted one by one rather than looped
// with 256-bit vectors (a 3-tap loop's control cost a quarter of its 12 FMAs on AVX2; the
// short pipeline has no unroll pass). The filter's rows stay a loop: a whole 3 x 3 filter in
// straight-line code ran no faster and made resnet18's and squeezenet's tier-2 compiles ~5 ms
// slower (median, AMD EPYC Zen 4). With 512-bit vectors a filter row's taps stay a loop too:
// unrolled, LLVM's scheduler hoisted the row's 24 broadcasts of A above its FMAs and spilled
// 14 of them (stride-2 3 x 3 of resnet18, 64 -> 128 at 56 x 56: 1.46 -> 1.18 ms; its 7 x 7
// stem 2.75 -> 2.47 ms; stride 1 unchanged; 1 thread, AMD EPYC Zen 4).
constexpr std::int64_t kUnrolledTaps = 25;
// micro_grid() on a dense 1x1 conv's image, of a depth of at least kGridPrefetchDepth and
// larger than kGridWholeBytes: the lines of this many strips ahead of its own in each input
// channel's row are prefetched. The tile reads its B as one short run per input channel,
// rows of the image apart: more streams than the hardware prefetchers follow, and in a model
// of large images the image comes from L3 or memory. squeezenet's 64 -> 16 1x1 at 55 x 55,
// batch 8, 1 thread, AMD EPYC Zen 4: 0.87 -> 0.63 ms (512-bit), 1.30 -> 0.58 ms (256-bit);
// mobilenet_v2's 32 -> 16 at 112 x 112, batch 8: 2.52 -> 2.00 ms (256-bit: 3.06 -> 2.27).
// Depth 16 (16 -> 64: a stream per row that the prefetchers follow), grids of phase planes
// (written just before: in cache) and small images (64 -> 384 at 14 x 14: 5% slower) go
// without.
constexpr std::int64_t kGridPrefetchStrips = 2;
constexpr std::int64_t kGridPrefetchDepth = 32;

std::int64_t GemmGen::grid_depth_block() {
    // A deep grid of phase planes (a strided or padded conv of many input channels) runs one
    // strip at a time, all row tiles over it; its strip of B (depth x NR, from every phase
    // plane of every input channel) outgrew L1, and each row tile read it again from L2:
    // resnet18's stride-2 3 x 3 convs at 256 bits ran at ~60% of the FMA peak, against ~85%
    // for ONNX Runtime's NCHWc kernels (AMD EPYC Zen 4). Cut into blocks of input channels
    // whose B takes at most kGridChunkBytes, all row tiles run over a block before the next,
    // their partial sums kept beside the grid in between. Not for grids that fit in L2 whole
    // (those run every strip per row tile, reading each row tile of A once) nor for a dense
    // 1x1 conv (its grid is the image).
    auto* dense = llvm::dyn_cast<llvm::ConstantInt>(dense_conv());
    auto* k = llvm::dyn_cast<llvm::ConstantInt>(k_dim_);
    auto* khw = llvm::dyn_cast<llvm::ConstantInt>(im_khw_);
    auto* ow = llvm::dyn_cast<llvm::ConstantInt>(im_ow_);
    auto* npix = llvm::dyn_cast<llvm::ConstantInt>(n_);
    auto* pitch = llvm::dyn_cast<llvm::ConstantInt>(grid_pitch());
    if (!dense || !dense->isZero() || !k || !khw || !ow || !npix || !pitch || khw->getSExtValue() < 1 || ow->getSExtValue() < 1)
        return 0;
    // At 512 bits (8 x 2 tiles, 16 FMAs per B vector) resnet18's 64 -> 128 stride-2 conv at
    // 28 x 28 ran no faster with depth blocks (batch 8, 1 thread: 11.1 and 12.2 ms without,
    // 11.3 and 12.9 with): left as it was.
    if (vw_ * es_ == 64) return 0;
    const std::int64_t depth = k->getSExtValue(), taps = khw->getSExtValue(), cin = depth / taps;
    const std::int64_t block = std::max<std::int64_t>(1, kGridChunkBytes / (taps * nr_ * es_));
    if (depth * nr_ * es_ <= 2 * kGridChunkBytes || block >= cin) return 0;
    // grid()'s test of a grid that fits in L2 whole, on the grid pixels of a column block (its
    // output rows, at the grid's pitch).
    const std::int64_t cols = h_.col_block > 0 ? std::min(h_.col_block, npix->getSExtValue()) : npix->getSExtValue();
    const std::int64_t strips = ((cols + ow->getSExtValue() - 1) / ow->getSExtValue() * pitch->getSExtValue() + nr_ - 1) / nr_;
    if (strips * nr_ * es_ * depth <= kGridWholeBytes) return 0;
    return block;
}

void GemmGen::depthwise(Value* ab, Value* xb, Value* i0, Value* rows, Value* j0, Value* j1) {
    Value* step = dw_step(kDwCols);
    loop(i64(0), rows, i64(1), "dw.r", [&](Value* r) {
        Value* row = b_.CreateAdd(i0, r);
        set_dw_planes(i64(0), xb, elem(ab, b_.CreateMul(row, k_dim_)));
        loop(j0, j1, step, "dw.c", [&](Value* jc) {
            Value* n = smin(step, b_.CreateSub(j1, jc));
            call_depthwise(i64(1), jc, b_.CreateAdd(jc, n));
            long_epilogue(sbuf_, kDwCols, row, i64(1), jc, n);
        });
    });
}

std::optional<GemmGen::DirectDw> GemmGen::direct_dw() const {
    if (h_.epilogue.size() != 1) return std::nullopt;
    const kir::Stmt& st = *h_.epilogue.front();
    if (st.kind != kir::StmtKind::Store || st.buffer != h_.out || !st.index || !st.value) return std::nullopt;
    const DType compute = t_->isFloatTy() ? DType::f32 : DType::f64;
    auto stored_as_computed = [&](int buffer) {
        return buffer >= 0 && static_cast<std::size_t>(buffer) < kern_.buffers.size() &&
               kern_.buffers[static_cast<std::size_t>(buffer)].dtype == compute;
    };
    if (!stored_as_computed(h_.out)) return std::nullopt;
    // index = base + column, either order
    const kir::Expr& ix = *st.index;
    if (ix.kind != kir::ExprKind::Binary || ix.bop != kir::BinaryOp::add) return std::nullopt;
    auto is_col = [&](const kir::Expr& e) { return e.kind == kir::ExprKind::Var && e.id == h_.col_var; };
    kir::ExprRef base;
    if (is_col(*ix.args[1]) && !kir::uses_var(ix.args[0], h_.col_var)) base = ix.args[0];
    else if (is_col(*ix.args[0]) && !kir::uses_var(ix.args[1], h_.col_var)) base = ix.args[1];
    else return std::nullopt;
    // value = acc, or acc + bias (either order), the bias a load free of the column
    auto is_acc = [&](const kir::Expr& e) { return e.kind == kir::ExprKind::Temp && e.id == h_.acc_temp; };
    auto is_bias = [&](const kir::ExprRef& e) {
        return e->kind == kir::ExprKind::Load && stored_as_computed(e->id) && !kir::uses_var(e, h_.col_var);
    };
    // then at most a constant clamp (tiers/kir_forms.h), which the kernel applies as it stores,
    // or (f32) SiLU of it: silu(v), or v times sigmoid(v) either way round
    DirectDw d{base, nullptr};
    const kir::Expr* v = constant_clamp(*st.value, d.lo, d.hi);
    if (compute == DType::f32 && v == st.value.get()) {
        if (const kir::Expr* arg = silu_argument(*v)) {
            v = arg;
            d.silu = true;
        }
    }
    if (is_acc(*v)) return d;
    if (v->kind != kir::ExprKind::Binary || v->bop != kir::BinaryOp::add) return std::nullopt;
    if (is_acc(*v->args[0]) && is_bias(v->args[1])) d.bias = v->args[1].get();
    else if (is_acc(*v->args[1]) && is_bias(v->args[0])) d.bias = v->args[0].get();
    else return std::nullopt;
    return d;
}

void GemmGen::depthwise_planes(Value* outer, Value* count) {
    loop(i64(0), count, i64(1), "dw.k", [&](Value* k) {
        em_.bind_var(h_.batch_var, b_.CreateAdd(outer, k));
        set_dw_planes(k, selem(db_, bbuf_, em_.index(h_.im2col->x_offset)), selem(da_, a_, em_.index(h_.a_offset)));
    });
    // Planes the kernel runs one at a time (its direct 3 x 3 rows, or bands of rows), of a
    // bound geometry: each plane in pieces of whole rows up to the whole buffer (kStreamRows
    // x kStreamCols), its epilogue after each. Otherwise (and for the small planes the
    // kernel takes across the lanes, 2 VW channels a call) every plane's next few rows per
    // piece, which cost a one-plane kernel its setup and edge rows per piece (efficientnet's
    // 144 x 56 x 56 3 x 3 with SiLU, 9 rows a piece: 0.35 -> 0.31 ms, with relu 0.21 -> 0.17 ms;
    // AMD EPYC Zen 4, AVX-512, 1 thread).
    const std::optional<cpu::DwPlan> plan = bound_dw_plan();
    const bool one_plane = plan && !plan->chan;
    auto general = [&] {
        Value* step = dw_step(one_plane ? kStreamRows * kStreamCols : kStreamCols);
        loop(i64(0), n_, step, "dw.c", [&](Value* jc) {
            Value* n = smin(step, b_.CreateSub(n_, jc));
            if (!one_plane) call_depthwise(count, jc, b_.CreateAdd(jc, n));
            loop(i64(0), count, i64(1), "dw.e", [&](Value* k) {
                if (one_plane) call_depthwise(i64(1), jc, b_.CreateAdd(jc, n), nullptr, nullptr, nullptr, k);
                em_.bind_var(h_.batch_var, b_.CreateAdd(outer, k));
                Value* from = one_plane ? sbuf_ : elem(sbuf_, b_.CreateMul(k, i64(kStreamCols)));
                long_epilogue(from, kStreamCols, i64(0), i64(1), jc, n);
            });
        });
    };
    // SiLU in the kernel where the geometry is bound, except on channel lanes with a 3 x 3
    // filter. On channel lanes it runs on the registers of each block before the transpose
    // out, where the epilogue pass read the block back (efficientnet_b0's 5x5 stride 2 over
    // 144 channels at 56 x 56, KILN_CPU_ISA=avx2, AMD EPYC Zen 4, 1 thread: 0.251 -> 0.172 ms;
    // 5x5 over 672 channels at 14 x 14 0.181 -> 0.167); after each plane of the direct 3 x 3
    // rows, still in L1 (96 channels stride 2 at 112 x 112: 0.286 -> 0.243 ms; 144 at 56 x 56
    // 0.303 -> 0.241; the same at 512 bits). A 3 x 3 filter on channel lanes, its nine
    // weight vectors in registers, ran 10% slower with it at 512 bits (480 channels at
    // 14 x 14): there the epilogue pass stays.
    std::optional<DirectDw> direct = direct_dw();
    auto* kh = llvm::dyn_cast<llvm::ConstantInt>(em_.index(h_.im2col->kh));
    auto* kw = llvm::dyn_cast<llvm::ConstantInt>(im_kw_);
    const bool wide_filter = kh && kw && kh->getSExtValue() * kw->getSExtValue() > 9;
    if (direct && direct->silu && !(plan && (!plan->chan || wide_filter))) direct.reset();
    if (!direct) return general();
    // The kernel writes the output itself, each plane from its bias: plane k at base(k),
    // where base(k) = base(0) + k * ld for one ld (the output's channel stride; checked per
    // call, else the general path).
    em_.bind_var(h_.row_var, i64(0));
    auto base_of = [&](Value* k) {
        em_.bind_var(h_.batch_var, b_.CreateAdd(outer, k));
        return em_.index(direct->base);
    };
    Value* b0 = base_of(i64(0));
    Value* ld = b_.CreateSub(base_of(i64(1)), b0);
    b_.CreateStore(b_.getTrue(), dw_ok_);
    const llvm::Align ea(static_cast<std::uint64_t>(es_));
    loop(i64(0), count, i64(1), "dw.bias", [&](Value* k) {
        Value* same = b_.CreateICmpEQ(base_of(k), b_.CreateAdd(b0, b_.CreateMul(k, ld)));
        b_.CreateStore(b_.CreateAnd(b_.CreateLoad(b_.getInt1Ty(), dw_ok_), same), dw_ok_);
        Value* init = llvm::ConstantFP::get(t_, 0.0);
        if (direct->bias) {
            const DType bt = kern_.buffers[static_cast<std::size_t>(direct->bias->id)].dtype;
            init = load_in(bt, selem(bt, em_.buffer_ptr(direct->bias->id), em_.index(direct->bias->args[0])), 1);
        }
        b_.CreateAlignedStore(init, elem(dw_inits_, k), ea);
    }, true);
    Value* out = elem(em_.buffer_ptr(h_.out), b0);
    if_else(b_.CreateLoad(b_.getInt1Ty(), dw_ok_),
            [&] { call_depthwise(count, i64(0), n_, dw_inits_, out, ld, nullptr, direct->lo, direct->hi, direct->silu); },
            general);
}

Value* GemmGen::dw_step(std::int64_t cols) {
    return b_.CreateSelect(b_.CreateICmpSLE(im_ow_, i64(cols)), b_.CreateMul(b_.CreateSDiv(i64(cols), smax(im_ow_, i64(1))), im_ow_),
                           i64(cols));
}

void GemmGen::set_dw_planes(Value* k, Value* x, Value* w) {
    auto* at = dwp_->getAllocatedType();
    b_.CreateStore(x, b_.CreateInBoundsGEP(at, dwp_, {i64(0), k}));
    b_.CreateStore(w, b_.CreateInBoundsGEP(at, dwp_, {i64(0), b_.CreateAdd(k, i64(kStreamRows))}));
}

std::optional<cpu::DwPlan> GemmGen::bound_dw_plan() {
    const kir::Im2col& c = *h_.im2col;
    auto bound = [](Value* v, std::int64_t* out) {
        auto* k = llvm::dyn_cast<llvm::ConstantInt>(v);
        if (k) *out = k->getSExtValue();
        return k != nullptr;
    };
    cpu::Im2colShape g{1, 0, 0, 0, 0, 0, c.stride[0], c.stride[1], c.pad[0], c.pad[1], c.dilation[0], c.dilation[1]};
    if (!bound(im_h_, &g.h) || !bound(im_w_, &g.w) || !bound(im_ow_, &g.ow) || !bound(em_.index(c.kh), &g.kh) ||
        !bound(im_kw_, &g.kw))
        return std::nullopt;
    return cpu::depthwise_plan(g);
}

void GemmGen::call_depthwise(Value* count, Value* p0, Value* p1, Value* inits, Value* out, Value* ld, Value* first,
                             double lo, double hi, bool silu) {
    llvm::Module& mod = *fn_->getParent();
    auto* ptr_t = llvm::PointerType::getUnqual(ctx_);
    llvm::Type* i64t = b_.getInt64Ty();
    llvm::Type* f64t = b_.getDoubleTy();
    llvm::FunctionCallee dw_fn = mod.getOrInsertFunction(
        t_->isFloatTy() ? kDepthwiseF32Symbol : kDepthwiseF64Symbol,
        llvm::FunctionType::get(b_.getVoidTy(), {ptr_t, i64t, ptr_t, ptr_t, ptr_t, ptr_t, i64t, i64t, i64t, f64t, f64t, i64t},
                                false));
    auto* at = dwp_->getAllocatedType();
    if (!out) {
        inits = llvm::ConstantPointerNull::get(ptr_t);
        out = sbuf_;
        ld = i64(kStreamCols);
    }
    if (!first) first = i64(0);
    b_.CreateCall(dw_fn, {geo_, count, b_.CreateInBoundsGEP(at, dwp_, {i64(0), first}),
                          b_.CreateInBoundsGEP(at, dwp_, {i64(0), b_.CreateAdd(first, i64(kStreamRows))}), inits, out, ld, p0,
                          p1, llvm::ConstantFP::get(f64t, lo), llvm::ConstantFP::get(f64t, hi), i64(silu ? 1 : 0)});
}

Value* GemmGen::dense_conv() {
    const kir::Im2col& c = *h_.im2col;
    if (c.stride[0] != 1 || c.stride[1] != 1 || c.pad[0] != 0 || c.pad[1] != 0) return b_.getFalse();
    return b_.CreateICmpEQ(im_khw_, i64(1));
}

Value* GemmGen::grid_pitch() {
    const kir::Im2col& c = *h_.im2col;
    Value* span_x = b_.CreateMul(b_.CreateSub(im_kw_, i64(1)), i64(c.dilation[1]));
    return b_.CreateAdd(im_ow_, b_.CreateSDiv(span_x, i64(c.stride[1])));
}

Value* GemmGen::grid_applies() {
    return b_.CreateOr(dense_conv(), b_.CreateICmpSGE(b_.CreateMul(im_ow_, i64(4)), b_.CreateMul(grid_pitch(), i64(3))));
}

GemmGen::GridGeo GemmGen::grid_geo(Value* j0, Value* j1) {
    const kir::Im2col& c = *h_.im2col;
    Value* dense = dense_conv();
    Value* span_y = b_.CreateMul(b_.CreateSub(em_.index(c.kh), i64(1)), i64(c.dilation[0]));
    GridGeo g;
    g.wq = exact_planes() ? im_ow_ : grid_pitch();
    g.ya = b_.CreateSelect(dense, i64(0), b_.CreateSDiv(j0, im_ow_));  // the block's first output row
    Value* yb = b_.CreateSDiv(b_.CreateSub(j1, i64(1)), im_ow_);
    g.q_rows = b_.CreateSelect(
        dense, im_h_, b_.CreateAdd(b_.CreateAdd(b_.CreateSub(yb, g.ya), i64(1)), b_.CreateSDiv(span_y, i64(c.stride[0]))));
    g.plane = b_.CreateMul(g.q_rows, g.wq);  // one phase plane
    g.cin = b_.CreateSDiv(k_dim_, smax(im_khw_, i64(1)));
    return g;
}

Value* GemmGen::tap_at(Value* pl, Value* i, Value* j, Value* plane, Value* wq) {
    // i * dh = oy * sh + a: phase row a, grid row offset oy; j likewise, or plane j itself
    // (exact_planes()).
    const kir::Im2col& c = *h_.im2col;
    const std::int64_t sh = c.stride[0], sw = c.stride[1], px = plane_cols();
    Value* iy = b_.CreateMul(i, i64(c.dilation[0]));
    Value* rowp = elem(pl, b_.CreateAdd(b_.CreateMul(b_.CreateMul(b_.CreateSRem(iy, i64(sh)), i64(px)), plane),
                                        b_.CreateMul(b_.CreateSDiv(iy, i64(sh)), wq)));
    if (exact_planes()) return elem(rowp, b_.CreateMul(j, plane));
    Value* jx = b_.CreateMul(j, i64(c.dilation[1]));
    return elem(rowp, b_.CreateAdd(b_.CreateMul(b_.CreateSRem(jx, i64(sw)), plane), b_.CreateSDiv(jx, i64(sw))));
}

void GemmGen::grid(Value* ab, Value* xb, Value* i0, Value* rows, Value* j0, Value* j1) {
    const kir::Im2col& c = *h_.im2col;
    const std::int64_t phases = phase_rows() * plane_cols();
    const bool exact = exact_planes();
    Value* dense = dense_conv();
    Value* kh = em_.index(c.kh);
    const GridGeo geo = grid_geo(j0, j1);
    Value *wq = geo.wq, *ya = geo.ya, *q_rows = geo.q_rows, *plane = geo.plane, *cin = geo.cin;
    // The grid: the phase planes in the scratch (and NR + 2 wq zeros past their end, which
    // the last strips read); or the image itself, and in the scratch the last strip's
    // columns of each channel, zero padded (its loads would read past the image).
    Value* slack = b_.CreateAdd(i64(nr_), b_.CreateMul(wq, i64(2)));
    Value* grid_elems = b_.CreateAdd(b_.CreateMul(b_.CreateMul(cin, i64(phases)), plane), slack);
    Value* elems = b_.CreateSelect(dense, b_.CreateMul(cin, i64(nr_)), grid_elems);
    // Depth blocks (grid_depth_block()): the partial sums of the block's rows over one strip
    // after the grid.
    const std::int64_t cblock = grid_depth_block();
    if (cblock > 0) elems = b_.CreateAdd(elems, i64((h_.row_block + mr_) * nr_));  // (the last tile may run past the rows)
    Value* scratch = this->scratch(b_.CreateMul(elems, i64(es_)));
    auto* dense_c = llvm::dyn_cast<llvm::ConstantInt>(dense);
    if_else(b_.CreateIsNull(scratch), [&] { mark_failed(); },
            [&] {
                if (!dense_c || dense_c->isZero())
                    if_then(b_.CreateNot(dense), [&] { phase_planes(xb, scratch, cin, ya, q_rows, wq, slack); });
            });
    Value* buf = b_.CreateSelect(dense, xb, scratch);
    // A failed scratch allocation: no work (tier.h).
    if_then(b_.CreateIsNotNull(scratch), [&] {
        // Grid pixel of output pixel j: (j / ow - ya) * wq + j % ow.
        auto at = [&](Value* j) {
            return b_.CreateAdd(b_.CreateMul(b_.CreateSub(b_.CreateSDiv(j, im_ow_), ya), wq), b_.CreateSRem(j, im_ow_));
        };
        Value* g0 = at(j0);
        Value* g1 = b_.CreateAdd(at(b_.CreateSub(j1, i64(1))), i64(1));
        GridStrip st{ab, buf, i0, nullptr, kh, plane, wq};
        // A dense conv's last strip, where it runs past the image: its columns of each
        // channel, zero padded, in the scratch (once: every row tile reads them).
        if (!dense_c || dense_c->isOne()) {
            Value* ts = b_.CreateAdd(g0, b_.CreateMul(b_.CreateSDiv(b_.CreateSub(b_.CreateSub(g1, g0), i64(1)), i64(nr_)), i64(nr_)));
            if_then(b_.CreateAnd(dense, b_.CreateICmpSGT(b_.CreateAdd(ts, i64(nr_)), plane)), [&] {
                Value* n = b_.CreateMul(b_.CreateSub(plane, ts), i64(es_));
                const llvm::Align ea(static_cast<std::uint64_t>(es_));
                loop(i64(0), cin, i64(1), "grid.tail", [&](Value* ci) {
                    Value* dst = elem(scratch, b_.CreateMul(ci, i64(nr_)));
                    b_.CreateMemCpy(dst, ea, selem(db_, xb, b_.CreateAdd(b_.CreateMul(ci, plane), ts)), ea, n);
                    b_.CreateMemSet(b_.CreateGEP(b_.getInt8Ty(), dst, n), b_.getInt8(0), b_.CreateSub(i64(nr_ * es_), n), ea);
                }, true);
            });
        }
        if (cblock > 0) {
            // Strip by strip, each block of input channels over every row tile (phase planes
            // only: no dense tail strip).
            Value* psum = elem(scratch, grid_elems);
            loop(g0, g1, i64(nr_), "grid.strip", [&](Value* gs) {
                loop(i64(0), cin, i64(cblock), "grid.cb", [&](Value* c0) {
                    Value* c1 = smin(b_.CreateAdd(c0, i64(cblock)), cin);
                    loop(i64(0), rows, i64(mr_), "grid.ir", [&](Value* ir) {
                        Value* left = smin(i64(mr_), b_.CreateSub(rows, ir));
                        st.gs = gs;
                        st.c0 = c0;
                        st.c1 = c1;
                        st.psum = elem(psum, b_.CreateMul(ir, i64(nr_)));
                        // The next row tile's rows of A, from channel c0 on (not inbounds:
                        // may pass A's end).
                        st.pf = b_.CreateGEP(storage(da_), ab,
                                             b_.CreateAdd(b_.CreateMul(b_.CreateAdd(b_.CreateAdd(st.i0, ir), i64(mr_)), k_dim_),
                                                          b_.CreateMul(c0, im_khw_)));
                        micro_grid(st, ir, left);
                        Value* row0 = b_.CreateAdd(i0, ir);
                        if_then(b_.CreateICmpSGE(c1, cin), [&] {
                            if (exact) store_dense(b_.CreateAdd(gs, b_.CreateMul(ya, im_ow_)), j0, j1, row0, left);
                            else store_runs(gs, g1, wq, ya, j0, j1, row0, left);
                        });
                    });
                });
            });
            return;
        }
        // Chunks of strips (kGridChunkBytes); per chunk, each row tile over its strips.
        Value* per_chunk = smax(b_.CreateSDiv(i64(kGridChunkBytes / (es_ * nr_)), smax(k_dim_, i64(1))), i64(1));
        // A grid of few strips whose B fits in L2 (kGridWholeBytes) is one chunk: each row
        // tile of A is read once, from memory, and B from L2 by every row tile. So is a grid
        // of a shallow depth (kGridShallowDepth), whatever its size.
        Value* strips = b_.CreateSDiv(b_.CreateAdd(b_.CreateSub(g1, g0), i64(nr_ - 1)), i64(nr_));
        Value* whole_b = b_.CreateMul(b_.CreateMul(strips, i64(nr_ * es_)), smax(k_dim_, i64(1)));
        Value* whole = b_.CreateOr(b_.CreateICmpSLE(whole_b, i64(kGridWholeBytes)), b_.CreateICmpSLE(k_dim_, i64(kGridShallowDepth)));
        per_chunk = b_.CreateSelect(whole, smax(per_chunk, strips), per_chunk);
        Value* span = b_.CreateMul(per_chunk, i64(nr_));
        loop(g0, g1, span, "grid.chunk", [&](Value* gc) {
            Value* ge = smin(b_.CreateAdd(gc, span), g1);
            loop(i64(0), rows, i64(mr_), "grid.ir", [&](Value* ir) {
                Value* left = smin(i64(mr_), b_.CreateSub(rows, ir));
                loop(gc, ge, i64(nr_), "grid.strip", [&](Value* gs) {
                    st.gs = gs;
                    st.buf = buf;
                    st.plane = plane;
                    if (!dense_c || dense_c->isOne()) {
                        Value* tail = b_.CreateAnd(dense, b_.CreateICmpSGT(b_.CreateAdd(gs, i64(nr_)), plane));
                        // Not inbounds: the tail's base lies before the scratch; its loads do not.
                        st.buf = b_.CreateSelect(tail, b_.CreateGEP(t_, scratch, b_.CreateNeg(gs)), buf);
                        st.plane = b_.CreateSelect(tail, i64(nr_), plane);
                    }
                    // The next row tile's rows of A (contiguous: rows of k) come in during
                    // this one, on its first strip of the chunk; the later strips prefetch the
                    // rows they read anyway. A row tile's rows are short streams that the
                    // hardware prefetchers barely follow, and A is cold in a model (its other
                    // layers evict it): efficientnet's 192 -> 1152 1x1 conv at 7 x 7 took
                    // 0.26 ms warm and ~0.4 ms cold (AMD EPYC Zen 4).
                    Value* this_tile = b_.CreateAdd(st.i0, ir);
                    Value* pf_row = b_.CreateSelect(b_.CreateICmpEQ(gs, gc), b_.CreateAdd(this_tile, i64(mr_)), this_tile);
                    st.pf = b_.CreateGEP(storage(da_), ab, b_.CreateMul(pf_row, k_dim_));  // not inbounds: may pass A's end
                    micro_grid(st, ir, left);
                    Value* row0 = b_.CreateAdd(i0, ir);
                    if (dense_c && dense_c->isOne()) store_dense(gs, j0, j1, row0, left);
                    else if (exact) store_dense(b_.CreateAdd(gs, b_.CreateMul(ya, im_ow_)), j0, j1, row0, left);  // one run
                    else store_runs(gs, g1, wq, ya, j0, j1, row0, left);
                });
            });
        });
    });
}

void GemmGen::store_dense(Value* gs, Value* j0, Value* j1, Value* row0, Value* rows) {
    // The grid is the image: the strip's pixels are the output pixels [gs, gs + NR), clipped
    // to the block. A whole tile gets constant bounds, so that its epilogue becomes straight
    // vector code.
    Value* whole = b_.CreateAnd(b_.CreateAnd(b_.CreateICmpSGE(gs, j0), b_.CreateICmpSLE(b_.CreateAdd(gs, i64(nr_)), j1)),
                                b_.CreateICmpEQ(rows, i64(mr_)));
    if_else(whole, [&] { epilogue(tile_, nr_, row0, i64(mr_), gs, i64(nr_)); },
            [&] {
                Value* o_lo = smax(gs, j0);
                Value* o_hi = smin(b_.CreateAdd(gs, i64(nr_)), j1);
                if_then(b_.CreateICmpSLT(o_lo, o_hi),
                        [&] { epilogue(elem(tile_, b_.CreateSub(o_lo, gs)), nr_, row0, rows, o_lo, b_.CreateSub(o_hi, o_lo)); });
            });
}

void GemmGen::store_runs(Value* gs, Value* g1, Value* wq, Value* ya, Value* j0, Value* j1, Value* row0, Value* rows) {
    Value* r0 = b_.CreateSDiv(gs, wq);
    Value* r1 = b_.CreateSDiv(b_.CreateSub(smin(b_.CreateAdd(gs, i64(nr_)), g1), i64(1)), wq);
    loop(r0, b_.CreateAdd(r1, i64(1)), i64(1), "grid.run", [&](Value* r) {
        Value* rs = b_.CreateMul(r, wq);
        Value* x_lo = smax(b_.CreateSub(gs, rs), i64(0));
        Value* x_hi = smin(b_.CreateSub(b_.CreateAdd(gs, i64(nr_)), rs), im_ow_);
        Value* out_row = b_.CreateMul(b_.CreateAdd(ya, r), im_ow_);
        // Clipped to the block's pixels [j0, j1).
        Value* o_lo = smax(b_.CreateAdd(out_row, x_lo), j0);
        Value* o_hi = smin(b_.CreateAdd(out_row, x_hi), j1);
        if_then(b_.CreateICmpSLT(o_lo, o_hi), [&] {
            Value* t0 = b_.CreateSub(b_.CreateAdd(rs, b_.CreateSub(o_lo, out_row)), gs);
            epilogue(elem(tile_, t0), nr_, row0, rows, o_lo, b_.CreateSub(o_hi, o_lo));
        });
    }, true);
}

std::int64_t GemmGen::phase_rows() {
    auto* k = llvm::dyn_cast<llvm::ConstantInt>(em_.index(h_.im2col->kh));
    return k && k->isOne() ? 1 : h_.im2col->stride[0];
}

std::int64_t GemmGen::phase_cols() {
    auto* k = llvm::dyn_cast<llvm::ConstantInt>(im_kw_);
    return k && k->isOne() ? 1 : h_.im2col->stride[1];
}

bool GemmGen::exact_planes() {
    const kir::Im2col& c = *h_.im2col;
    auto bound = [&](Value* v, std::int64_t* out) {
        auto* k = llvm::dyn_cast<llvm::ConstantInt>(v);
        if (k) *out = k->getSExtValue();
        return k != nullptr;
    };
    std::int64_t kw = 0, ow = 0, npix = 0;
    if (vw_ * es_ != 64) return false;  // see gemm_gen.h
    if (!bound(im_kw_, &kw) || !bound(im_ow_, &ow) || !bound(n_, &npix) || kw < 2 || ow < 1 || npix < ow) return false;
    const std::int64_t oh = npix / ow;
    const std::int64_t wq = ow + (kw - 1) * c.dilation[1] / c.stride[1];
    auto lanes = [&](std::int64_t pitch) { return (oh * pitch + nr_ - 1) / nr_ * nr_; };
    return lanes(ow) * 100 <= lanes(wq) * 96;
}

std::int64_t GemmGen::plane_cols() {
    if (!exact_planes()) return phase_cols();
    return llvm::cast<llvm::ConstantInt>(im_kw_)->getSExtValue();
}

void GemmGen::phase_planes(Value* xb, Value* buf, Value* cin, Value* ya, Value* q_rows, Value* wq, Value* slack) {
    const kir::Im2col& c = *h_.im2col;
    const std::int64_t sh = c.stride[0], sw = c.stride[1], py = phase_rows(), px = plane_cols();
    const bool exact = exact_planes();
    const llvm::Align ea(static_cast<std::uint64_t>(es_));
    Value* plane_in = b_.CreateMul(im_h_, im_w_);
    Value* plane = b_.CreateMul(q_rows, wq);
    Value* esz = i64(es_);
    // The row phases a are a loop, not a copy of the code each (the copies per phase were a
    // third of the IR of resnet18's stride-2 convs; the loop takes 10-17% off their optimised
    // IR and their compile time with it). The column phases stay copies: the bounds of each,
    // constants, keep a row's ends to a few stores (a loop over them too, with the bounds
    // computed per row, ran 14 x 14 and 28 x 28 inputs 3% slower at 256 bits).
    auto phase_row = [&](Value* ci, Value* a) {
        for (std::int64_t bb = 0; bb < px; ++bb) {
            Value* dst0 = elem(buf, b_.CreateMul(b_.CreateAdd(b_.CreateMul(b_.CreateAdd(b_.CreateMul(ci, i64(py)), a), i64(px)), i64(bb)), plane));
            // Columns u in [lo, hi) read the image: 0 <= u * sw + first < w.
            const std::int64_t first = (exact ? bb * c.dilation[1] : bb) - c.pad[1];
            Value* lo = smin(i64(first >= 0 ? 0 : (-first + sw - 1) / sw), wq);  // no wider than the row
            Value* hi = smax(smin(wq, b_.CreateSDiv(b_.CreateAdd(b_.CreateSub(im_w_, i64(first)), i64(sw - 1)), i64(sw))), lo);
            loop(i64(0), q_rows, i64(1), "phase.r", [&](Value* r) {
                Value* iy = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(ya, r), i64(sh)), b_.CreateSub(a, i64(c.pad[0])));
                Value* dst = elem(dst0, b_.CreateMul(r, wq));
                if_else(b_.CreateICmpULT(iy, im_h_),
                        [&] {
                            b_.CreateMemSet(dst, b_.getInt8(0), b_.CreateMul(lo, esz), ea);
                            Value* src = selem(db_, xb, b_.CreateAdd(b_.CreateMul(ci, plane_in), b_.CreateMul(iy, im_w_)));
                            Value* from = b_.CreateAdd(b_.CreateMul(lo, i64(sw)), i64(first));
                            if (sw == 1) {
                                b_.CreateMemCpy(elem(dst, lo), ea, selem(db_, src, from), ea, b_.CreateMul(b_.CreateSub(hi, lo), esz));
                            } else {
                                loop(lo, hi, i64(1), "phase.u", [&](Value* u) {
                                    Value* ix = b_.CreateAdd(b_.CreateMul(u, i64(sw)), i64(first));
                                    b_.CreateAlignedStore(load_in(db_, selem(db_, src, ix), 1), elem(dst, u), ea);
                                });  // vectorised (strided loads): 3-10% off stride-2 convs
                            }
                            b_.CreateMemSet(elem(dst, hi), b_.getInt8(0), b_.CreateMul(b_.CreateSub(wq, hi), esz), ea);
                        },
                        [&] { b_.CreateMemSet(dst, b_.getInt8(0), b_.CreateMul(wq, esz), ea); });
            }, true);
        }
    };
    loop(i64(0), cin, i64(1), "phase.ci", [&](Value* ci) {
        if (py == 1) phase_row(ci, i64(0));
        else loop(i64(0), i64(py), i64(1), "phase.a", [&](Value* a) { phase_row(ci, a); }, true);
    }, true);
    b_.CreateMemSet(elem(buf, b_.CreateMul(b_.CreateMul(cin, i64(py * px)), plane)), b_.getInt8(0), b_.CreateMul(slack, esz), ea);
}

void GemmGen::micro_grid(const GridStrip& st, Value* ir, Value* left) {
    const std::int64_t px = plane_cols();
    const llvm::Align ea(static_cast<std::uint64_t>(es_)), va(static_cast<std::uint64_t>(es_ * vw_));
    const auto nacc = static_cast<std::size_t>(mr_ * nv_);
    auto accp = [&](std::size_t i) { return b_.CreateConstInBoundsGEP2_64(dacc_->getAllocatedType(), dacc_, 0, i); };
    // psum's row r, vector v (rows of NR).
    auto psum_at = [&](int r, int v) { return elem(st.psum, i64(r * nr_ + v * vw_)); };
    Value* zero = llvm::ConstantAggregateZero::get(vt_);
    auto zero_acc = [&] {
        for (std::size_t i = 0; i < nacc; ++i) b_.CreateAlignedStore(zero, accp(i), va);
    };
    if (st.psum) {
        if_else(b_.CreateICmpEQ(st.c0, i64(0)), zero_acc, [&] {
            for (int r = 0; r < mr_; ++r)
                for (int v = 0; v < nv_; ++v)
                    b_.CreateAlignedStore(b_.CreateAlignedLoad(vt_, psum_at(r, v), ea), accp(static_cast<std::size_t>(r * nv_ + v)), va);
        });
    } else {
        zero_acc();
    }
    std::vector<Value*> arow(static_cast<std::size_t>(mr_));
    for (int r = 0; r < mr_; ++r) {
        Value* row = b_.CreateAdd(b_.CreateAdd(st.i0, ir), smin(i64(r), b_.CreateSub(left, i64(1))));
        arow[static_cast<std::size_t>(r)] = selem(da_, st.ab, b_.CreateMul(row, k_dim_));
    }
    const auto vw = static_cast<unsigned>(vw_);
    Value* cin = b_.CreateSDiv(k_dim_, smax(im_khw_, i64(1)));
    Value* strip = b_.CreateGEP(t_, st.buf, st.gs);  // not inbounds: see grid() (the tail strip)
    // The prefetches per input channel: MR rows of its taps, one instruction per 64 bytes.
    auto* khw_c = llvm::dyn_cast<llvm::ConstantInt>(im_khw_);
    const std::int64_t pf_bytes = khw_c ? mr_ * khw_c->getSExtValue() * static_cast<std::int64_t>(dtype_size(da_)) : 0;
    auto* dense = llvm::dyn_cast<llvm::ConstantInt>(dense_conv());
    auto* depth = llvm::dyn_cast<llvm::ConstantInt>(k_dim_);
    auto* pixels = llvm::dyn_cast<llvm::ConstantInt>(n_);
    const bool ahead = dense && dense->isOne() && (!depth || depth->getSExtValue() >= kGridPrefetchDepth) &&
                       (!depth || !pixels || depth->getSExtValue() * pixels->getSExtValue() * es_ > kGridWholeBytes);
    loop(st.c0 ? st.c0 : i64(0), st.c1 ? st.c1 : cin, i64(1), "grid.ci", [&](Value* ci) {
        if (st.pf && st.psum) {
            // A depth block's tile: the next tile's MR rows at this channel's taps.
            for (int r = 0; r < mr_; ++r)
                prefetch(selem(da_, st.pf, b_.CreateAdd(b_.CreateMul(i64(r), k_dim_), b_.CreateMul(b_.CreateSub(ci, st.c0), im_khw_))));
        } else if (st.pf && pf_bytes > 0) {
            Value* at = b_.CreateGEP(b_.getInt8Ty(), st.pf, b_.CreateMul(ci, i64(pf_bytes)));
            for (std::int64_t off = 0; off < pf_bytes; off += 64) {
                Value* p = b_.CreateGEP(b_.getInt8Ty(), at, i64(off));
                prefetch(p);
            }
        }
        Value* pl = elem(strip, b_.CreateMul(b_.CreateMul(ci, i64(phase_rows() * px)), st.plane));
        for (std::int64_t off = 0; ahead && off < nr_ * es_; off += 64) {  // not inbounds: may pass the image
            Value* p = b_.CreateGEP(b_.getInt8Ty(), pl, i64(kGridPrefetchStrips * nr_ * es_ + off));
            prefetch(p);
        }
        Value* kci = b_.CreateMul(ci, im_khw_);
        taps(st.kh, "grid.i", 1, [&](Value* i) {  // (a loop: see kUnrolledTaps)
            Value* kr = b_.CreateAdd(kci, b_.CreateMul(i, im_kw_));
            taps(im_kw_, "grid.j", vw_ * es_ == 64 ? 1 : kUnrolledTaps, [&](Value* j) {
                Value* bptr = tap_at(pl, i, j, st.plane, st.wq);
                std::vector<Value*> bv(static_cast<std::size_t>(nv_));
                for (int v = 0; v < nv_; ++v) bv[static_cast<std::size_t>(v)] = b_.CreateAlignedLoad(vt_, elem(bptr, i64(v * vw_)), ea);
                Value* k = b_.CreateAdd(kr, j);
                for (int r = 0; r < mr_; ++r) {
                    Value* av = load_in(da_, selem(da_, arow[static_cast<std::size_t>(r)], k), 1);
                    Value* sp = b_.CreateVectorSplat(vw, av);
                    for (int v = 0; v < nv_; ++v) {
                        Value* p = accp(static_cast<std::size_t>(r * nv_ + v));
                        Value* a = b_.CreateAlignedLoad(vt_, p, va);
                        b_.CreateAlignedStore(
                            b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vt_}, {sp, bv[static_cast<std::size_t>(v)], a}), p, va);
                    }
                }
            });
        });
    }, true);
    auto to_tile = [&] {
        for (int r = 0; r < mr_; ++r)
            for (int v = 0; v < nv_; ++v)
                b_.CreateAlignedStore(b_.CreateAlignedLoad(vt_, accp(static_cast<std::size_t>(r * nv_ + v)), va),
                                      elem(tile_, i64(r * nr_ + v * vw_)), va);
    };
    if (!st.psum) return to_tile();
    if_else(b_.CreateICmpSGE(st.c1, cin), to_tile, [&] {
        for (int r = 0; r < mr_; ++r)
            for (int v = 0; v < nv_; ++v)
                b_.CreateAlignedStore(b_.CreateAlignedLoad(vt_, accp(static_cast<std::size_t>(r * nv_ + v)), va), psum_at(r, v), ea);
    });
}

void GemmGen::pack_im2col(Value* xb, Value* pc, Value* jc, Value* kc, Value* nc) {
    const kir::Im2col& c = *h_.im2col;
    const llvm::Align ea(static_cast<std::uint64_t>(es_));
    Value* zero = llvm::ConstantFP::get(t_, 0.0);
    Value* plane_elems = b_.CreateMul(im_h_, im_w_);
    auto fill = [&](Value* dst, Value* from, Value* to) {
        loop(from, to, i64(1), "im2col.zero", [&](Value* t) { b_.CreateAlignedStore(zero, elem(dst, t), ea); }, true);
    };
    loop(i64(0), nc, i64(nr_), "im2col.strip", [&](Value* jr) {
        Value* cols = smin(i64(nr_), b_.CreateSub(nc, jr));
        Value* col0 = b_.CreateAdd(jc, jr);
        Value* y0 = b_.CreateSDiv(col0, im_ow_);
        Value* x0 = b_.CreateSRem(col0, im_ow_);
        Value* strip = elem(bp_, b_.CreateMul(jr, kc));
        loop(i64(0), kc, i64(1), "im2col.k", [&](Value* kk) {
            Value* ka = b_.CreateAdd(pc, kk);
            Value* ch = b_.CreateSDiv(ka, im_khw_);
            Value* r = b_.CreateSRem(ka, im_khw_);
            Value* ioff = b_.CreateSub(b_.CreateMul(b_.CreateSDiv(r, im_kw_), i64(c.dilation[0])), i64(c.pad[0]));
            Value* joff = b_.CreateSub(b_.CreateMul(b_.CreateSRem(r, im_kw_), i64(c.dilation[1])), i64(c.pad[1]));
            Value* plane = selem(db_, xb, b_.CreateMul(ch, plane_elems));
            Value* d = elem(strip, b_.CreateMul(kk, i64(nr_)));
            run_loop(cols, y0, x0, [&](Value* q, Value* y, Value* xo, Value* len) {
                Value* iy = b_.CreateAdd(b_.CreateMul(y, i64(c.stride[0])), ioff);
                Value* row_in = b_.CreateICmpULT(iy, im_h_);  // 0 <= iy < h
                Value* base = b_.CreateAdd(b_.CreateMul(xo, i64(c.stride[1])), joff);
                const std::int64_t sw = c.stride[1];
                // t in [lo, hi) <=> 0 <= base + t * sw < w.
                Value* lo = b_.CreateSelect(b_.CreateICmpSGE(base, i64(0)), i64(0),
                                            b_.CreateSDiv(b_.CreateAdd(b_.CreateNeg(base), i64(sw - 1)), i64(sw)));
                Value* room = b_.CreateSub(im_w_, base);
                Value* hi = b_.CreateSelect(b_.CreateICmpSGT(room, i64(0)),
                                            b_.CreateSDiv(b_.CreateAdd(room, i64(sw - 1)), i64(sw)), i64(0));
                lo = b_.CreateSelect(row_in, smin(lo, len), len);
                hi = b_.CreateSelect(row_in, smax(smin(hi, len), lo), len);
                Value* dq = elem(d, q);
                Value* src = selem(db_, plane, b_.CreateAdd(b_.CreateMul(iy, im_w_), base));
                auto general = [&] {
                    fill(dq, i64(0), lo);
                    loop(lo, hi, i64(1), "im2col.copy", [&](Value* t) {
                        Value* x = load_in(db_, selem(db_, src, b_.CreateMul(t, i64(sw))), 1);
                        b_.CreateAlignedStore(x, elem(dq, t), ea);
                    }, true);
                    fill(dq, hi, len);
                };
                if (sw != 1) {
                    general();
                    return;
                }
                // The common case: a whole strip (NR pixels) inside one input row, no
                // padding: NR/VW vector copies.
                Value* whole = b_.CreateAnd(b_.CreateICmpEQ(lo, i64(0)), b_.CreateICmpEQ(hi, i64(nr_)));
                auto part = [&] {
                    if (widened_b()) general();
                    else masked_run(src, dq, lo, hi, len);
                };
                if_else(whole, [&] {
                    for (int v = 0; v < nv_; ++v) {
                        Value* x = load_in(db_, selem(db_, src, i64(v * vw_)), vw_);
                        b_.CreateAlignedStore(x, elem(dq, i64(v * vw_)), ea);
                    }
                }, part);
            });
            fill(d, cols, i64(nr_));  // the zero padding of a last, partial strip
        });
    });
}

void GemmGen::masked_run(Value* src, Value* dq, Value* lo, Value* hi, Value* len) {
    llvm::Type* i64t = b_.getInt64Ty();
    std::vector<llvm::Constant*> lanes;
    for (int l = 0; l < vw_; ++l) lanes.push_back(llvm::ConstantInt::get(i64t, static_cast<std::uint64_t>(l)));
    Value* iota = llvm::ConstantVector::get(lanes);
    Value* vlo = b_.CreateVectorSplat(static_cast<unsigned>(vw_), lo);
    Value* vhi = b_.CreateVectorSplat(static_cast<unsigned>(vw_), hi);
    Value* vlen = b_.CreateVectorSplat(static_cast<unsigned>(vw_), len);
    Value* zero = llvm::Constant::getNullValue(vt_);
    const llvm::Align ea(static_cast<std::uint64_t>(es_));
    for (int v = 0; v < nv_; ++v) {
        Value* t = b_.CreateAdd(iota, b_.CreateVectorSplat(static_cast<unsigned>(vw_), i64(v * vw_)));
        Value* in = b_.CreateAnd(b_.CreateICmpSGE(t, vlo), b_.CreateICmpSLT(t, vhi));
        // Not inbounds: the masked-off lanes' addresses may lie outside the plane.
        Value* from = b_.CreateGEP(storage(db_), src, i64(v * vw_));
        Value* x = b_.CreateMaskedLoad(vt_, from, ea, in, zero);
        b_.CreateMaskedStore(x, elem(dq, i64(v * vw_)), ea, b_.CreateICmpSLT(t, vlen));
    }
}

template <class F> void GemmGen::run_loop(Value* cols, Value* y0, Value* x0, F body) {
    auto* pre = b_.GetInsertBlock();
    auto* head = block_named("im2col.run");
    auto* exit = block_named("im2col.run.exit");
    b_.CreateBr(head);  // cols >= 1
    b_.SetInsertPoint(head);
    auto* q = b_.CreatePHI(b_.getInt64Ty(), 2, "run.q");
    auto* y = b_.CreatePHI(b_.getInt64Ty(), 2, "run.y");
    auto* xo = b_.CreatePHI(b_.getInt64Ty(), 2, "run.xo");
    q->addIncoming(i64(0), pre);
    y->addIncoming(y0, pre);
    xo->addIncoming(x0, pre);
    Value* len = smin(b_.CreateSub(im_ow_, xo), b_.CreateSub(cols, q));
    body(q, y, xo, len);
    Value* qn = b_.CreateAdd(q, len);
    auto* end = b_.GetInsertBlock();
    q->addIncoming(qn, end);
    y->addIncoming(b_.CreateAdd(y, i64(1)), end);
    xo->addIncoming(i64(0), end);
    b_.CreateCondBr(b_.CreateICmpSLT(qn, cols), head, exit);
    b_.SetInsertPoint(exit);
}

}  // namespace kiln::tiers::llvm_tier::gemm_detail
