// The blocked GEMM of matmul and conv kernels (see codegen.h and kir::MatmulHint): instead
// of the kernel's naive loop nest, each outer index (a block of `row_block` rows of one
// batch entry, and with col_block a block [j0, j1) of its columns, else all of them; the
// runtime splits outer indices across threads) runs
//
//   for jc in [j0, j1) step NC:                        column panel
//     for pc in [0, k) step KC:                        depth block (L1/L2)
//       pack B[pc:pc+kc, jc:jc+nc] into strips of NR columns, kc x NR each, zero padded
//       for jr in [0, nc) step NR:                     one strip of packed B (in L1)
//         for ir in [0, rows) step MR:                 MR x NR register tile
//           acc = pc == 0 ? 0 : partial sums (scratch)
//           for kk in [0, kc): acc[r][:] += A[r][pc + kk] * Bp[kk][:]    (vector FMAs)
//           last depth block ? epilogue(acc) -> C : acc -> partial sums
//
// A block of at most cpu::kMaxStreamedRows rows (small batches) whose operands are of the
// compute type is not packed: B streams row by row through the ahead-of-time rows kernel of
// src/cpu (stream()), then the epilogue runs over the result. A constant B that the runtime
// packed once (MatmulHint::b_packed: panels of the derived buffer's lanes columns, in slabs of
// its sub columns) is read in place, no "pack B" step, and then small blocks run the register
// tiles too (see block()).
// A convolution's B (kir::Im2col) is never built: its paths (the depthwise kernel, the grid
// of phase planes, packing from the image in the loop nest above) are in gemm_conv.cpp, and
// its channel-lane path for small images at 512 bits (weights packed by the runtime) in
// gemm_chan.cpp. At 256 bits a dense 1x1 conv runs the loop nest above with the image as B
// (input channels x pixels), packed like a matmul's (dense_gemm_).
//
// The micro-kernel keeps MR x NR accumulators in vector registers: MR rows by NV = 2
// vectors of VW elements, chosen from the host features: 512-bit (AVX-512) 8 x 2 zmm,
// 256-bit (AVX/AVX2) 6 x 2 ymm (4 x 3 for f32 convolutions wider than 1x1 over output rows
// of 28 pixels or more), otherwise 4 x 2 of 128 bits. Leftover rows of a block (fewer
// than MR) run micro-kernels of 4, 2 and 1 rows; leftover columns are computed on the zero
// padding and not stored. The epilogue (the hint's statements: bias, activation, residual, store) runs
// on each finished tile: the accumulators are written to a small stack tile and a loop
// over its rows and columns (in vectors: gemm_epilogue.cpp) applies the epilogue and stores C.
//
// Scratch (packed B, plus partial sums when k > KC) lives in a 64-byte-aligned buffer on
// the stack when it fits in kStackBytes, else in the calling thread's kernel scratch
// (tiers::kernel_scratch: allocated once per thread, reused by every later call).
// Dims bound by the specialisation are constants, so LLVM folds the block arithmetic and
// edge tests; generic dims stay run-time values and every edge case is handled.
#include "tiers/llvm/gemm_gen.h"

#include "src/cpu/winograd.h"

#include <atomic>
#include <string>

namespace kiln::tiers::llvm_tier {
namespace {

std::atomic<bool> g_blocked{true};
std::atomic<int> g_vector_bytes{0};  // 0: from the host features

constexpr std::int64_t kStackBytes = 96 * 1024;
// winograd(): the most bytes of raw output rows for one kernel call over a whole image.
constexpr std::int64_t kWinoWholeBytes = 512 * 1024;

using llvm::Value;

[[noreturn]] void fail(Bailout b, const std::string& msg) { throw CodegenError{b, msg}; }

}  // namespace

namespace gemm_detail {

GemmGen::GemmGen(const kir::Kernel& k, const CodegenTarget& target, KernelEmitter& em)
    : IrLoops(em.builder(), em.function()), h_(*k.matmul), kern_(k), em_(em) {
    const bool f32 = h_.type == kir::Type::f32;
    t_ = f32 ? b_.getFloatTy() : b_.getDoubleTy();
    es_ = f32 ? 4 : 8;
    const std::string& f = target.features;
    int bytes = 16;
    avx512_ = target.prefer_512;
    if (target.prefer_512) bytes = 64;  // AVX-512F, and KILN_CPU_ISA allows it
    else if (f.find("+avx") != std::string::npos) bytes = 32;
    if (const int forced = g_vector_bytes.load(std::memory_order_relaxed); forced == 16 || forced == 32 || forced == 64)
        bytes = forced;
    vw_ = bytes / es_;
    nv_ = 2;
    mr_ = bytes == 64 ? 8 : bytes == 32 ? 6 : 4;
    // AVX2 convolutions with a filter wider than 1x1 over output rows of at least 28 pixels:
    // 4 x 3 vectors (one broadcast of A feeds 3 FMAs, not 2: resnet18's 3x3 convs at 56x56 and
    // 28x28, 1 thread, AMD EPYC Zen 4: 8-9% faster). Smaller images lose lanes to the wider
    // strip, and the 1x1 convs (and their SiLU epilogues) ran slower.
    if (bytes == 32 && h_.im2col && h_.type == kir::Type::f32) {
        auto* ow = llvm::dyn_cast<llvm::ConstantInt>(em.index(h_.im2col->ow));
        auto* kh = llvm::dyn_cast<llvm::ConstantInt>(em.index(h_.im2col->kh));
        auto* kw = llvm::dyn_cast<llvm::ConstantInt>(em.index(h_.im2col->kw));
        if (ow && kh && kw && ow->getSExtValue() >= 28 && kh->getSExtValue() * kw->getSExtValue() > 1) {
            nv_ = 3;
            mr_ = 4;
        }
    }
    nr_ = vw_ * nv_;
    kc_ = 256;
    nc_ = 8 * nr_;
    vt_ = llvm::FixedVectorType::get(t_, static_cast<unsigned>(vw_));
    da_ = k.buffers[static_cast<std::size_t>(h_.a)].dtype;
    db_ = k.buffers[static_cast<std::size_t>(h_.b)].dtype;
    // f16 operands widen with the host's conversion instruction (F16C); without it LLVM
    // would call a run-time library function the JIT may not find.
    if ((da_ == DType::f16 || db_ == DType::f16) && f.find("+f16c") == std::string::npos)
        fail(Bailout::unsupported_dtype, "an f16 GEMM needs F16C on this host");
}

void GemmGen::run(Value* begin, Value* end) {
    llvm::Type* i8 = b_.getInt8Ty();
    // Static allocas first (we are in the entry block).
    auto* stack = b_.CreateAlloca(llvm::ArrayType::get(i8, static_cast<std::uint64_t>(kStackBytes)), nullptr, "gemm.stack");
    stack->setAlignment(llvm::Align(64));
    // (chan() stores 2 VW channels by VW pixels there.)
    tile_ = b_.CreateAlloca(llvm::ArrayType::get(t_, static_cast<std::uint64_t>(std::max<std::int64_t>(mr_ * nr_, 2 * vw_ * vw_))),
                            nullptr, "gemm.tile");
    tile_->setAlignment(llvm::Align(64));
    sbuf_ = b_.CreateAlloca(llvm::ArrayType::get(t_, static_cast<std::uint64_t>(kStreamRows * kStreamCols)), nullptr, "gemm.rows");
    sbuf_->setAlignment(llvm::Align(64));
    // grid(): the register tile's accumulators, kept in memory between the loops of
    // the filter's taps; SROA turns them into vector registers.
    dacc_ = b_.CreateAlloca(llvm::ArrayType::get(vt_, static_cast<std::uint64_t>(mr_ * nv_)), nullptr, "grid.acc");
    dacc_->setAlignment(llvm::Align(static_cast<std::uint64_t>(es_ * vw_)));
    if (h_.im2col) {
        geo_ = b_.CreateAlloca(llvm::ArrayType::get(b_.getInt64Ty(), 12), nullptr, "dw.geo");
        geo_->setAlignment(llvm::Align(8));
        dwp_ = b_.CreateAlloca(llvm::ArrayType::get(llvm::PointerType::getUnqual(ctx_), 2 * kStreamRows), nullptr, "dw.ptrs");
        dw_inits_ = b_.CreateAlloca(llvm::ArrayType::get(t_, static_cast<std::uint64_t>(kStreamRows)), nullptr, "dw.inits");
        dw_ok_ = b_.CreateAlloca(b_.getInt1Ty(), nullptr, "dw.ok");
    }

    m_ = em_.index(h_.m);
    n_ = em_.index(h_.n);
    k_dim_ = em_.index(h_.k);
    blocks_ = b_.CreateSDiv(b_.CreateAdd(m_, i64(h_.row_block - 1)), i64(h_.row_block));
    cblocks_ = h_.col_block > 0 ? b_.CreateSDiv(b_.CreateAdd(n_, i64(h_.col_block - 1)), i64(h_.col_block)) : i64(1);
    if (h_.im2col) {
        const kir::Im2col& c = *h_.im2col;
        im_h_ = em_.index(c.h);
        im_w_ = em_.index(c.w);
        im_kw_ = em_.index(c.kw);
        im_khw_ = b_.CreateMul(em_.index(c.kh), im_kw_);
        im_ow_ = em_.index(c.ow);
        // The geometry the depthwise kernel takes (codegen.h, kDepthwiseF32Symbol).
        Value* kh = b_.CreateSDiv(im_khw_, smax(im_kw_, i64(1)));
        Value* geo[12] = {i64(1), im_h_, im_w_, im_ow_, kh, im_kw_, i64(c.stride[0]), i64(c.stride[1]),
                          i64(c.pad[0]), i64(c.pad[1]), i64(c.dilation[0]), i64(c.dilation[1])};
        for (int i = 0; i < 12; ++i)
            b_.CreateAlignedStore(geo[i], b_.CreateConstGEP2_64(geo_->getAllocatedType(), geo_, 0, static_cast<std::uint64_t>(i)), llvm::Align(8));
    }
    // A dense 1x1 conv at 256 bits: the packed GEMM on the image (dense_gemm_). With
    // LLVM's machine scheduler on (llvm_tier.cpp: without it the 4-step depth loop spilled
    // an accumulator), against the channel lanes (chan()) or the pixel lanes on the image in
    // place (grid()), 1 thread, AMD EPYC Zen 3, bias and ReLU, median of 3-4 interleaved
    // runs: 512 -> 1000 at 13 x 13 3.30 -> 2.70 ms, 512 -> 128 at 13 x 13 0.429 -> 0.313,
    // 320 -> 1280 at 7 x 7 0.771 -> 0.757, 64 -> 256 at 13 x 13 0.110 -> 0.088, 32 -> 128 at
    // 27 x 27 0.120 -> 0.077, 512 -> 1000 at 26 x 26 (grid()) 15.2 -> 9.9.
    if (h_.im2col && vw_ * es_ == 32 && !widened_a() && !widened_b()) {
        auto* dense = llvm::dyn_cast<llvm::ConstantInt>(dense_conv());
        dense_gemm_ = dense && dense->isOne();
    }
    // chan(): its accumulators (still in the entry block: SROA keeps them in registers).
    if (const std::int64_t run = h_.im2col ? chan_run() : 0; run > 0) {
        cacc_t_ = b_.CreateAlloca(llvm::ArrayType::get(vt_, static_cast<std::uint64_t>(2 * run)), nullptr, "chan.acc");
        cacc_t_->setAlignment(llvm::Align(static_cast<std::uint64_t>(es_ * vw_)));
        auto* dense = llvm::dyn_cast<llvm::ConstantInt>(dense_conv());
        const std::int64_t npix = llvm::cast<llvm::ConstantInt>(n_)->getSExtValue();  // (chan_run() > 0: n_ is bound)
        if (chan_rows(dense && dense->isOne(), npix)) {
            crows_ld_ = npix + run + vw_;
            crows_ = b_.CreateAlloca(t_, i64(2 * vw_ * crows_ld_), "chan.rows");
            crows_->setAlignment(llvm::Align(static_cast<std::uint64_t>(es_ * vw_)));
        }
        if (chan_depth_block(run) > 0) {
            cpart_ = b_.CreateAlloca(llvm::ArrayType::get(vt_, static_cast<std::uint64_t>(kChanBlockRuns * 2 * run)), nullptr, "chan.part");
            cpart_->setAlignment(llvm::Align(static_cast<std::uint64_t>(es_ * vw_)));
        }
    }
    a_ = em_.buffer_ptr(h_.a);
    bbuf_ = em_.buffer_ptr(h_.b);
    // A 3x3 conv's weights as their Winograd transform (kir::Derived), where the kernel runs.
    if (winograd_applies()) wino_u_ = em_.buffer_ptr(static_cast<int>(kern_.buffers.size()) + h_.winograd);
    // B packed once by the runtime (kir::Derived: panels of `lanes` columns in slabs of
    // `sub`), read in place of packing it per call: f32, whole strips per panel.
    if (h_.b_packed >= 0 && !h_.im2col && es_ == 4 && db_ == DType::f32 && !widened_a()) {
        const kir::Derived& d = kern_.derived[static_cast<std::size_t>(h_.b_packed)];
        bpanel_ = d.lanes;
        bslab_ = d.sub > 0 ? d.sub : d.lanes;
        bslab_elems_ = d.cols * bslab_;
        // A strip lies in one slab, or spans whole slabs with whole vectors in each.
        const bool fits = bslab_ % nr_ == 0 || (nr_ % bslab_ == 0 && bslab_ % vw_ == 0);
        if (bpanel_ % nr_ == 0 && fits) bpk_ = em_.buffer_ptr(static_cast<int>(kern_.buffers.size()) + h_.b_packed);
    }
    // With B packed once and at most 16 rows in all (a dense layer at a small batch, M bound by
    // the specialisation), B is read once or twice per call, from L2 or L3, and has no reuse to
    // block its depth for: blocked() runs the whole depth as one block (no partial sums), so
    // that each strip of B streams from end to end (the slabs lie strip after strip) into the
    // next, and the hardware prefetchers follow it without the 256-bit tiles' software
    // prefetches (micro()). An MLP's 784 -> 1024 -> 1024 -> 10, AMD EPYC Zen 4, interleaved
    // processes: batch 1, 1 thread 0.100 -> 0.091 ms (256-bit), 0.089 -> 0.082 (512-bit); 2
    // threads 0.054 -> 0.051 (with the prefetches kept: 0.062) and 0.049 -> 0.045; batch 8
    // 0.279 -> 0.272 and 0.267 -> 0.262, 2 threads 0.145 -> 0.142. A deeper block of 384 or
    // 512 was slower than both (batch 1, 256-bit: 0.104-0.110).
    auto* m_bound = llvm::dyn_cast<llvm::ConstantInt>(m_);
    whole_depth_ = bpk_ && m_bound && m_bound->getSExtValue() <= kStreamRows;

    // Scratch: packed B (kcE x ncE) then partial sums (row_block x ncE, only if k > KC and the
    // depth is blocked).
    Value* n_round = b_.CreateMul(b_.CreateSDiv(b_.CreateAdd(n_, i64(nr_ - 1)), i64(nr_)), i64(nr_));
    nce_ = smin(i64(nc_), n_round);
    Value* kce = smin(i64(kc_), smax(k_dim_, i64(1)));
    Value* bp_elems = bpk_ ? i64(0) : b_.CreateMul(kce, nce_);  // (B packed once: none)
    bp_elems = b_.CreateMul(b_.CreateSDiv(b_.CreateAdd(bp_elems, i64(15)), i64(16)), i64(16));  // 64-byte multiple
    Value* c_elems = whole_depth_ ? i64(0)
                                  : b_.CreateSelect(b_.CreateICmpSGT(k_dim_, i64(kc_)), b_.CreateMul(i64(h_.row_block), nce_), i64(0));
    Value* bytes = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(bp_elems, c_elems), i64(es_)), i64(64));
    Value* small = b_.CreateICmpSLE(bytes, i64(kStackBytes));

    Value* nonempty = b_.CreateICmpSLT(begin, end);
    Value* use_heap = b_.CreateAnd(nonempty, b_.CreateNot(small));
    Value* heap = if_value(use_heap, [&] { return scratch(bytes); },
                           llvm::ConstantPointerNull::get(llvm::PointerType::getUnqual(ctx_)));
    // No scratch: record the failure and do no work (tier.h).
    Value* failed = b_.CreateAnd(use_heap, b_.CreateIsNull(heap));
    if_then(failed, [&] { mark_failed(); });
    Value* base = b_.CreateSelect(use_heap, heap, stack);
    // Align to 64 bytes (the stack array is aligned; the scratch is too, but cheaply checked).
    Value* addr = b_.CreatePtrToInt(base, b_.getInt64Ty());
    Value* pad = b_.CreateAnd(b_.CreateSub(i64(0), addr), i64(63));
    bp_ = b_.CreateGEP(i8, base, pad, "gemm.bp");
    cacc_ = b_.CreateGEP(t_, bp_, bp_elems, "gemm.cacc");

    // Outer indices [begin, end): the consecutive column blocks of one row block in the
    // range run as one block (kir.h, MatmulHint).
    Value* stop = b_.CreateSelect(failed, begin, end);
    auto blocks = [&] {
        loop_by(begin, stop, "gemm.outer", [&](Value* outer) {
            Value* run = smin(b_.CreateSub(stop, outer), b_.CreateSub(cblocks_, b_.CreateSRem(outer, cblocks_)));
            block(outer, run);
            return run;
        });
    };
    if (!h_.im2col || widened_a() || widened_b()) return blocks();
    // A depthwise convolution whose planes are one column block each: an outer index is
    // one batch entry (one channel), and up to kStreamRows of them run per kernel call.
    Value* whole_planes = b_.CreateAnd(b_.CreateICmpEQ(m_, i64(1)), b_.CreateICmpEQ(cblocks_, i64(1)));
    choose(b_.CreateAnd(b_.CreateICmpEQ(k_dim_, im_khw_), whole_planes), [&] {
        loop_by(begin, stop, "dw.outer", [&](Value* outer) {
            Value* count = smin(b_.CreateSub(stop, outer), i64(kStreamRows));
            depthwise_planes(outer, count);
            return count;
        });
    }, blocks);
}

void GemmGen::block(Value* outer, Value* run) {
    Value* per_batch = b_.CreateMul(blocks_, cblocks_);
    Value* bidx = b_.CreateSDiv(outer, per_batch);
    Value* i0 = b_.CreateMul(b_.CreateSRem(b_.CreateSDiv(outer, cblocks_), blocks_), i64(h_.row_block));
    Value* rows = smin(i64(h_.row_block), b_.CreateSub(m_, i0));
    Value* j0 = i64(0);
    Value* j1 = n_;
    if (h_.col_block > 0) {
        j0 = b_.CreateMul(b_.CreateSRem(outer, cblocks_), i64(h_.col_block));
        j1 = smin(b_.CreateAdd(j0, b_.CreateMul(run, i64(h_.col_block))), n_);
    }
    em_.bind_var(h_.batch_var, bidx);
    Value* ab = selem(da_, a_, em_.index(h_.a_offset));
    Value* bb = h_.im2col ? nullptr : selem(db_, bbuf_, em_.index(h_.b_offset));
    Value* xb = h_.im2col ? selem(db_, bbuf_, em_.index(h_.im2col->x_offset)) : nullptr;
    // A block of few rows (small batches, GEMV-like) and operands of the
    // compute type streams B through the ahead-of-time rows kernel (see stream()).
    Value* few = b_.CreateICmpSLE(rows, i64(kStreamRows));
    if (!h_.im2col && !widened_b() && !widened_a()) {
        // With B packed once, the register tiles beat streaming B at every row count (an
        // MLP's 784 -> 1024 -> 1024 -> 10, AMD EPYC Zen 4, tier 2: batch 8 0.276 -> 0.265 ms,
        // 256-bit 0.394 -> 0.320; at 256 bits batch 1 with 2 threads 0.083-0.089 -> 0.063-0.087,
        // 1024 -> 10 4.4 -> 1.7 us; batch 1-4 with 1 thread within noise), so only a B that
        // is not packed streams.
        if (bpk_) return blocked(ab, bb, xb, i0, rows, j0, j1);
        if_else(few, [&] { stream(ab, bb, i0, rows, j0, j1); }, [&] { blocked(ab, bb, xb, i0, rows, j0, j1); });
    } else if (h_.im2col && !widened_b() && !widened_a()) {
        // One input channel per group (depth = the filter's taps): the direct kernel. A
        // specialised kernel knows which, and emits that path alone (less to compile).
        // Otherwise the implicit GEMM on the padded grid (grid()) where little of the
        // grid is padding, else the packed one.
        if (wino_u_) return winograd(xb, i0, rows, j0, j1);
        auto conv = [&] {
            if (one_pixel_dense()) return dots(ab, xb, i0, rows);
            if (dense_gemm_) return blocked(ab, xb, xb, i0, rows, j0, j1);  // B: the image
            if (cacc_t_) return chan(xb, i0, rows, j0, j1);
            choose(grid_applies(), [&] { grid(ab, xb, i0, rows, j0, j1); }, [&] { blocked(ab, bb, xb, i0, rows, j0, j1); });
        };
        choose(b_.CreateICmpEQ(k_dim_, im_khw_), [&] { depthwise(ab, xb, i0, rows, j0, j1); }, conv);
    } else {
        blocked(ab, bb, xb, i0, rows, j0, j1);
    }
}

bool GemmGen::winograd_applies() {
    if (h_.winograd < 0 || !h_.im2col || es_ != 4 || vw_ * es_ < 32 || widened_a() || widened_b() ||
        cpu::kernel_cpu_isa() == cpu::CpuIsa::portable)
        return false;
    auto* m = llvm::dyn_cast<llvm::ConstantInt>(m_);
    auto* n = llvm::dyn_cast<llvm::ConstantInt>(n_);
    auto* ow = llvm::dyn_cast<llvm::ConstantInt>(im_ow_);
    auto* k = llvm::dyn_cast<llvm::ConstantInt>(k_dim_);
    if (!m || !n || !ow || !k || ow->getSExtValue() < 1 || k->getSExtValue() % 9 != 0) return false;
    const std::int64_t band = 4 * ow->getSExtValue();
    const bool whole_tiles = h_.row_block % cpu::kWinoLanes == 0 || m->getSExtValue() <= h_.row_block;
    return whole_tiles && h_.col_block > 0 && h_.col_block % band == 0;
}

void GemmGen::winograd(Value* xb, Value* i0, Value* rows, Value* j0, Value* j1) {
    llvm::Module& mod = *fn_->getParent();
    auto* ptr_t = llvm::PointerType::getUnqual(ctx_);
    llvm::Type* i64t = b_.getInt64Ty();
    llvm::FunctionCallee fn = mod.getOrInsertFunction(
        kWinogradF32Symbol,
        llvm::FunctionType::get(ptr_t, {ptr_t, i64t, i64t, ptr_t, ptr_t, i64t, i64t, i64t, i64t, i64t, i64t}, false));
    const std::int64_t ow = llvm::cast<llvm::ConstantInt>(im_ow_)->getSExtValue();
    const std::int64_t npix = llvm::cast<llvm::ConstantInt>(n_)->getSExtValue();
    // The column blocks of one call (a thread's run of them) in one kernel call where the raw
    // rows of the whole image fit in kWinoWholeBytes: the kernel reads U once per chunk of
    // tiles, so per call rather than per column block (resnet18's 256 -> 256 at 14 x 14: its
    // 4.7 MB of U per 128 channels outweigh the 18 MFLOP of one column block).
    const std::int64_t rows_max = std::min<std::int64_t>(h_.row_block, llvm::cast<llvm::ConstantInt>(m_)->getSExtValue());
    const bool whole = rows_max * npix * es_ <= kWinoWholeBytes;
    const std::int64_t band = 4 * ow, step = whole ? npix : h_.col_block, ldo = whole ? npix : h_.col_block;
    Value* cin = b_.CreateSDiv(k_dim_, i64(9));
    Value* oh = b_.CreateSDiv(n_, i64(ow));
    Value* og_tiles = b_.CreateSDiv(b_.CreateAdd(m_, i64(cpu::kWinoLanes - 1)), i64(cpu::kWinoLanes));
    loop(j0, j1, i64(step), "wino.cb", [&](Value* c0) {
        Value* c1 = smin(b_.CreateAdd(c0, i64(step)), j1);
        Value* ty0 = b_.CreateSDiv(c0, i64(band));
        Value* ty1 = b_.CreateSDiv(b_.CreateAdd(c1, i64(band - 1)), i64(band));
        Value* raw = b_.CreateCall(fn, {geo_, cin, oh, xb, wino_u_, i0, rows, og_tiles, ty0, ty1, i64(ldo)});
        if_then(b_.CreateIsNotNull(raw), [&] {
            Value* first = b_.CreateInBoundsGEP(t_, raw, b_.CreateSub(c0, b_.CreateMul(ty0, i64(band))));
            long_epilogue(first, ldo, i0, rows, c0, b_.CreateSub(c1, c0));
        });
    });
}

bool GemmGen::one_pixel_dense() {
    auto* n = llvm::dyn_cast<llvm::ConstantInt>(n_);
    auto* dense = llvm::dyn_cast<llvm::ConstantInt>(dense_conv());
    return n && n->isOne() && dense && dense->isOne();
}

void GemmGen::dots(Value* ab, Value* xb, Value* i0, Value* rows) {
    // C[r] = A[r, :] . x for MR rows at a time: whole vectors of the depth into MR vector
    // accumulators (grid()'s, which SROA keeps in registers; x's vector loaded once for all),
    // the last k mod VW products as scalars, then each row's lanes summed (a tree:
    // reassociated) into the stack tile's column 0 and the epilogue on that column.
    const llvm::Align ea(static_cast<std::uint64_t>(es_)), va(static_cast<std::uint64_t>(es_ * vw_));
    auto accp = [&](int r) {
        return b_.CreateConstInBoundsGEP2_64(dacc_->getAllocatedType(), dacc_, 0, static_cast<std::uint64_t>(r));
    };
    Value* whole = b_.CreateMul(b_.CreateSDiv(k_dim_, i64(vw_)), i64(vw_));
    loop(i64(0), rows, i64(mr_), "dot.ir", [&](Value* ir) {
        Value* left = smin(i64(mr_), b_.CreateSub(rows, ir));
        std::vector<Value*> arow(static_cast<std::size_t>(mr_));
        for (int r = 0; r < mr_; ++r) {  // leftover rows repeat the last one (not stored)
            Value* row = b_.CreateAdd(b_.CreateAdd(i0, ir), smin(i64(r), b_.CreateSub(left, i64(1))));
            arow[static_cast<std::size_t>(r)] = elem(ab, b_.CreateMul(row, k_dim_));
            b_.CreateAlignedStore(llvm::ConstantAggregateZero::get(vt_), accp(r), va);
        }
        loop(i64(0), whole, i64(vw_), "dot.k", [&](Value* k) {
            Value* xv = b_.CreateAlignedLoad(vt_, elem(xb, k), ea);
            for (int r = 0; r < mr_; ++r) {
                Value* av = b_.CreateAlignedLoad(vt_, elem(arow[static_cast<std::size_t>(r)], k), ea);
                Value* acc = b_.CreateAlignedLoad(vt_, accp(r), va);
                b_.CreateAlignedStore(b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vt_}, {av, xv, acc}), accp(r), va);
            }
        }, true);
        for (int r = 0; r < mr_; ++r) {
            auto* sum = b_.CreateFAddReduce(llvm::ConstantFP::get(t_, 0.0), b_.CreateAlignedLoad(vt_, accp(r), va));
            llvm::cast<llvm::Instruction>(sum)->setHasAllowReassoc(true);
            b_.CreateAlignedStore(sum, elem(tile_, i64(r * nr_)), ea);
        }
        // The last k mod VW products (scalars; few).
        loop(whole, k_dim_, i64(1), "dot.tail", [&](Value* kk) {
            Value* xs = b_.CreateAlignedLoad(t_, elem(xb, kk), ea);
            for (int r = 0; r < mr_; ++r) {
                Value* p = elem(tile_, i64(r * nr_));
                Value* a = b_.CreateAlignedLoad(t_, elem(arow[static_cast<std::size_t>(r)], kk), ea);
                Value* sum = b_.CreateAlignedLoad(t_, p, ea);
                b_.CreateAlignedStore(b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {t_}, {a, xs, sum}), p, ea);
            }
        }, true);
        epilogue(tile_, nr_, b_.CreateAdd(i0, ir), left, i64(0), i64(1));
    });
}

void GemmGen::blocked(Value* ab, Value* bb, Value* xb, Value* i0, Value* rows, Value* j0, Value* j1) {
    // With M bound, the rows of a block are the row block's or the last block's, so only the
    // edge kernels for those counts' rows beside the full tiles are emitted; with N bound and
    // every column block, panel and strip a whole number of strips, each strip is whole and
    // its epilogue has no tail. (Less to compile: bert-base's 768 x 3072 linear with GELU at
    // 128 rows had its 4- and 1-row kernels and an edge epilogue it never ran.)
    unsigned left_counts = 7;  // the bits (4, 2, 1) of the counts of rows left beside the full tiles
    if (auto* mc = llvm::dyn_cast<llvm::ConstantInt>(m_)) {
        const std::int64_t M = mc->getSExtValue(), rb = h_.row_block;
        left_counts = 0;
        if (M > rb) left_counts |= static_cast<unsigned>(rb % mr_);
        if (M > 0) left_counts |= static_cast<unsigned>((M - (M - 1) / rb * rb) % mr_);
    }
    // With N bound and every column block and panel whole strips, only the last strip may
    // be partial. A last strip of at most NV - 1 vectors' columns then runs on tiles of as
    // many vectors (the strips before it whole, their epilogues without a tail): a 1x1 conv
    // 320 -> 1280 at 7 x 7 has 3 strips of 16 and one column, whose strip of 16 took as long
    // as a whole one.
    bool whole_strips = false;
    int tail_vecs = 0;
    if (auto* nc = llvm::dyn_cast<llvm::ConstantInt>(n_); nc && (h_.col_block <= 0 || h_.col_block % nr_ == 0) && nc_ % nr_ == 0) {
        const std::int64_t tail = nc->getSExtValue() % nr_, vecs = (tail + vw_ - 1) / vw_;
        whole_strips = tail == 0;
        if (tail > 0 && vecs < nv_) tail_vecs = static_cast<int>(vecs);
    }
    Value* kmax = smax(k_dim_, i64(1));  // k == 0 still runs one (empty) depth block: C = epilogue(0)
    // (whole_depth_: see run())
    Value* kstep = whole_depth_ ? kmax : i64(kc_);
    loop(j0, j1, i64(nc_), "gemm.jc", [&](Value* jc) {
        Value* nc = smin(i64(nc_), b_.CreateSub(j1, jc));
        loop(i64(0), kmax, kstep, "gemm.pc", [&](Value* pc) {
            Value* kc = smin(kstep, b_.CreateSub(k_dim_, pc));
            kc = smax(kc, i64(0));
            Value* first = b_.CreateICmpEQ(pc, i64(0));
            Value* last = b_.CreateICmpSGE(b_.CreateAdd(pc, kc), k_dim_);
            if (h_.im2col && !dense_gemm_) pack_im2col(xb, pc, jc, kc, nc);
            else if (!bpk_) pack_b(bb, pc, jc, kc, nc);
            // One strip of nr columns at jr, on tiles of `vecs` vectors (0: NV).
            auto strip_at = [&](Value* jr, Value* nr, int vecs) {
                Value* strip = elem(bp_, b_.CreateMul(jr, kc));
                Value* full_rows = b_.CreateMul(b_.CreateSDiv(rows, i64(mr_)), i64(mr_));
                Tile t{ab, strip, pc, kc, first, last, i0, jr, nr_};
                if (bpk_) {  // B packed once (kir::Derived): the strip's slab rows from depth pc on
                    Value* col = b_.CreateAdd(jc, jr);
                    Value* panel = b_.CreateMul(b_.CreateSDiv(col, i64(bpanel_)), b_.CreateMul(k_dim_, i64(bpanel_)));
                    Value* in_panel = b_.CreateSRem(col, i64(bpanel_));
                    Value* slab = b_.CreateMul(b_.CreateSDiv(in_panel, i64(bslab_)), b_.CreateMul(k_dim_, i64(bslab_)));
                    t.strip = elem(bpk_, b_.CreateAdd(b_.CreateAdd(panel, slab),
                                                      b_.CreateAdd(b_.CreateMul(pc, i64(bslab_)), b_.CreateSRem(in_panel, i64(bslab_)))));
                    t.bstride = bslab_;
                }
                // The rows left beside the full tiles (fewer than MR; with M bound, only where
                // left_counts says so) as the loop's last iteration: kernels of 4, 2 and 1 rows
                // by the binary digits of their count, each reading the strip once for all its
                // rows, into the same epilogue as the full tiles, emitted once (a long one,
                // GELU's erf, is 60 instructions per vector: bert-base's FFN kernel under
                // KILN_CPU_ISA=avx2 had it 4 times, and now twice: 773 -> 643 instructions after
                // optimisation, its code generation 26.3/19.9/33.9 -> 19.0/24.6/23.2 ms in three
                // interleaved runs, 1 thread, AMD EPYC Zen 4; bert-base's batch-8 calls the same
                // within noise).
                Value* ends = left_counts == 0 ? full_rows
                                               : b_.CreateAdd(full_rows, b_.CreateSelect(b_.CreateICmpSGT(rows, full_rows), i64(mr_), i64(0)));
                loop(i64(0), ends, i64(mr_), "gemm.ir", [&](Value* ir) {
                    Value* here = left_counts == 0 ? i64(mr_) : smin(i64(mr_), b_.CreateSub(rows, ir));
                    auto left = [&] {
                        for (int c = 4; c >= 1; c /= 2) {
                            if (c >= mr_ || (left_counts & static_cast<unsigned>(c)) == 0) continue;
                            Value* off = b_.CreateAnd(here, i64(~std::int64_t{2 * c - 1}));
                            if_then(b_.CreateICmpNE(b_.CreateAnd(here, i64(c)), i64(0)),
                                    [&] { micro(t, b_.CreateAdd(ir, off), c, off, vecs); });
                        }
                    };
                    if (left_counts == 0) micro(t, ir, mr_, i64(0), vecs);
                    else if_else(b_.CreateICmpEQ(here, i64(mr_)), [&] { micro(t, ir, mr_, i64(0), vecs); }, left);
                    if_then(last, [&] { epilogue(tile_, nr_, b_.CreateAdd(i0, ir), here, b_.CreateAdd(jc, jr), nr); });
                });
            };
            if (tail_vecs == 0) {
                loop(i64(0), nc, i64(nr_), "gemm.jr", [&](Value* jr) {
                    strip_at(jr, whole_strips ? i64(nr_) : smin(i64(nr_), b_.CreateSub(nc, jr)), 0);
                });
                return;
            }
            Value* full = b_.CreateMul(b_.CreateSDiv(nc, i64(nr_)), i64(nr_));
            loop(i64(0), full, i64(nr_), "gemm.jr", [&](Value* jr) { strip_at(jr, i64(nr_), 0); });
            if_then(b_.CreateICmpSLT(full, nc), [&] { strip_at(full, b_.CreateSub(nc, full), tail_vecs); });
        });
    });
}

void GemmGen::stream(Value* ab, Value* bb, Value* i0, Value* rows, Value* j0, Value* j1) {
    llvm::Module& mod = *fn_->getParent();
    auto* ptr_t = llvm::PointerType::getUnqual(ctx_);
    llvm::Type* i64t = b_.getInt64Ty();
    llvm::FunctionCallee rows_fn = mod.getOrInsertFunction(
        t_->isFloatTy() ? kRowsF32Symbol : kRowsF64Symbol,
        llvm::FunctionType::get(b_.getVoidTy(), {i64t, i64t, i64t, ptr_t, i64t, ptr_t, i64t, ptr_t, i64t}, false));
    Value* a0 = elem(ab, b_.CreateMul(i0, k_dim_));
    // Columns per call: kStreamCols, or with a bound count of rows as many as the buffer holds
    // for them (a GEMV's every column), so that the kernel reads B's rows whole rather than in
    // pieces of kStreamCols with gaps between (784 x 1024 weights, cold, AMD EPYC Zen 4: 4 rows
    // 0.30 -> 0.27 ms, 8 rows 0.37 -> 0.32 ms; 1 row and whole models within noise).
    std::int64_t cols = kStreamCols;
    if (auto* m = llvm::dyn_cast<llvm::ConstantInt>(m_); m && m->getSExtValue() >= 1 && m->getSExtValue() <= kStreamRows)
        cols = kStreamRows * kStreamCols / m->getSExtValue() / 64 * 64;
    loop(j0, j1, i64(cols), "gemm.sc", [&](Value* jc) {
        Value* w = smin(i64(cols), b_.CreateSub(j1, jc));
        b_.CreateMemSet(sbuf_, b_.getInt8(0), b_.CreateMul(rows, i64(cols * es_)), llvm::MaybeAlign(64));
        b_.CreateCall(rows_fn, {rows, w, k_dim_, a0, k_dim_, elem(bb, jc), n_, sbuf_, i64(cols)});
        long_epilogue(sbuf_, cols, i0, rows, jc, w);
    });
}

void GemmGen::pack_b(Value* bb, Value* pc, Value* jc, Value* kc, Value* nc) {
    Value* full = b_.CreateMul(b_.CreateSDiv(nc, i64(nr_)), i64(nr_));
    loop(i64(0), full, i64(nr_), "pack.full", [&](Value* jr) {
        Value* dst = elem(bp_, b_.CreateMul(jr, kc));
        Value* src = selem(db_, bb, b_.CreateAdd(b_.CreateMul(pc, n_), b_.CreateAdd(jc, jr)));
        loop(i64(0), kc, i64(1), "pack.k", [&](Value* kk) {
            Value* s = selem(db_, src, b_.CreateMul(kk, n_));
            Value* d = elem(dst, b_.CreateMul(kk, i64(nr_)));
            for (int v = 0; v < nv_; ++v) {
                Value* x = load_in(db_, selem(db_, s, i64(v * vw_)), vw_);
                b_.CreateAlignedStore(x, elem(d, i64(v * vw_)), llvm::Align(static_cast<std::uint64_t>(es_ * vw_)));
            }
        });
    });
    if_then(b_.CreateICmpSLT(full, nc), [&] {
        Value* cols = b_.CreateSub(nc, full);
        Value* dst = elem(bp_, b_.CreateMul(full, kc));
        Value* src = selem(db_, bb, b_.CreateAdd(b_.CreateMul(pc, n_), b_.CreateAdd(jc, full)));
        loop(i64(0), kc, i64(1), "pack.edge", [&](Value* kk) {
            Value* s = selem(db_, src, b_.CreateMul(kk, n_));
            Value* d = elem(dst, b_.CreateMul(kk, i64(nr_)));
            loop(i64(0), i64(nr_), i64(1), "pack.c", [&](Value* c) {
                Value* in = b_.CreateICmpSLT(c, cols);
                Value* safe = b_.CreateSelect(in, c, i64(0));
                Value* x = load_in(db_, selem(db_, s, safe), 1);
                x = b_.CreateSelect(in, x, llvm::ConstantFP::get(t_, 0.0));
                b_.CreateAlignedStore(x, elem(d, c), llvm::Align(static_cast<std::uint64_t>(es_)));
            });
        });
    });
}

void GemmGen::micro(const Tile& t, Value* ir, int rows, Value* trow, int vecs) {
    const int nv = vecs > 0 ? vecs : nv_;
    const int sets = rows < 4 ? 4 / rows : 1;
    const std::size_t nacc = static_cast<std::size_t>(rows * nv);
    const llvm::Align ea(static_cast<std::uint64_t>(es_)), va(static_cast<std::uint64_t>(es_ * vw_));
    std::vector<Value*> arow(static_cast<std::size_t>(rows));
    Value* row0 = b_.CreateAdd(t.i0, ir);
    for (int r = 0; r < rows; ++r)
        arow[static_cast<std::size_t>(r)] = selem(da_, t.ab, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(row0, i64(r)), k_dim_), t.pc));
    // Partial sums of this tile: row (ir + r), columns jr.. of the panel.
    Value* ctile = elem(cacc_, b_.CreateAdd(b_.CreateMul(ir, nce_), t.jr));
    auto cptr = [&](int r, int v) { return elem(ctile, b_.CreateAdd(b_.CreateMul(i64(r), nce_), i64(v * vw_))); };
    Value* zero = llvm::ConstantAggregateZero::get(vt_);

    // Initial accumulators: zero on the first depth block, else the partial sums (set 0).
    std::vector<Value*> acc(nacc * static_cast<std::size_t>(sets), zero);
    {
        auto* pre = b_.GetInsertBlock();
        auto* load_bb = block_named("micro.load");
        auto* init_bb = block_named("micro.init");
        b_.CreateCondBr(t.first, init_bb, load_bb);
        b_.SetInsertPoint(load_bb);
        std::vector<Value*> loaded(nacc);
        for (int r = 0; r < rows; ++r)
            for (int v = 0; v < nv; ++v)
                loaded[static_cast<std::size_t>(r * nv + v)] = b_.CreateAlignedLoad(vt_, cptr(r, v), ea);
        auto* load_end = b_.GetInsertBlock();
        b_.CreateBr(init_bb);
        b_.SetInsertPoint(init_bb);
        for (std::size_t i = 0; i < nacc; ++i) {
            auto* phi = b_.CreatePHI(vt_, 2);
            phi->addIncoming(zero, pre);
            phi->addIncoming(loaded[i], load_end);
            acc[i] = phi;
        }
    }

    // At 256 bits a tile over B packed once (an MLP's weights, cold in L2 at every call)
    // prefetches its strip kBPrefetchK depth steps ahead: the hardware prefetchers left
    // the FMAs waiting (784 -> 1024 -> 1024 -> 10 at batch 8, 1 thread, AMD EPYC Zen 4:
    // 0.337 -> 0.286 ms; 4 steps ahead 0.305; the tiles of fewer rows too: batch 1, 2
    // threads, p50 of seven runs 0.075 -> 0.072 ms). At 512 bits 1-2% slower: not there.
    // The prefetches of an unrolled step's depth indices come first in its body: a prefetch
    // orders the loads around it, and between the steps' loads the machine scheduler hoisted
    // the next steps' broadcasts above the FMAs and spilled half the accumulators
    // (1024 x 768 x 3072 with bias, 1 thread, AMD EPYC Zen 3: 108-116 -> 62-68 ms, ONNX
    // Runtime 68-72; bert-base at batch 8 had been 0.72-0.76x ONNX Runtime).
    auto prefetch_b = [&](Value* kk, int u) {
        if (!bpk_ || vw_ * es_ != 32 || whole_depth_) return;
        // (not inbounds: may pass the panel's end)
        Value* p = b_.CreateGEP(t_, t.strip, b_.CreateMul(b_.CreateAdd(kk, i64(kBPrefetchK + u)), i64(t.bstride)));
        prefetch(p);
    };
    // acc[set] += the products of depth index kk + u (u constant: an offset from kk's rows).
    auto fmas = [&](std::vector<Value*>& a, int set, Value* kk, int u) {
        Value* bptr = elem(elem(t.strip, b_.CreateMul(kk, i64(t.bstride))), i64(u * t.bstride));
        std::vector<Value*> bv(static_cast<std::size_t>(nv));
        for (int v = 0; v < nv; ++v)
            bv[static_cast<std::size_t>(v)] = b_.CreateAlignedLoad(vt_, elem(bptr, i64(bvec_offset(v))), bpk_ ? ea : va);  // (a tensor's alignment)
        for (int r = 0; r < rows; ++r) {
            Value* av = load_in(da_, selem(da_, selem(da_, arow[static_cast<std::size_t>(r)], kk), i64(u)), 1);
            Value* sp = b_.CreateVectorSplat(static_cast<unsigned>(vw_), av);
            for (int v = 0; v < nv; ++v) {
                const std::size_t i = static_cast<std::size_t>(set) * nacc + static_cast<std::size_t>(r * nv + v);
                a[i] = b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vt_}, {sp, bv[static_cast<std::size_t>(v)], a[i]});
            }
        }
    };
    // for (kk = from; kk < to; kk += step) acc = body(acc, kk), over phis (to - from a
    // multiple of step, possibly 0); the step's depth indices go into sets 0..step-1 when
    // `spread`, else all into set 0 (an unrolled loop).
    auto kloop = [&](Value* from, Value* to, int step, bool spread, const char* name) {
        auto* pre = b_.GetInsertBlock();
        auto* body = block_named(std::string(name));
        auto* exit = block_named(std::string(name) + ".exit");
        b_.CreateCondBr(b_.CreateICmpSLT(from, to), body, exit);
        b_.SetInsertPoint(body);
        auto* kk = b_.CreatePHI(b_.getInt64Ty(), 2, "kk");
        kk->addIncoming(from, pre);
        std::vector<Value*> next(acc.size());
        std::vector<llvm::PHINode*> phis(acc.size());
        for (std::size_t i = 0; i < acc.size(); ++i) {
            phis[i] = b_.CreatePHI(vt_, 2);
            phis[i]->addIncoming(acc[i], pre);
            next[i] = phis[i];
        }
        for (int u = 0; u < step; ++u) prefetch_b(kk, u);
        for (int u = 0; u < step; ++u) fmas(next, spread ? u : 0, kk, u);
        Value* kn = b_.CreateAdd(kk, i64(step), "kk.next", false, true);
        auto* body_end = b_.GetInsertBlock();
        kk->addIncoming(kn, body_end);
        for (std::size_t i = 0; i < acc.size(); ++i) phis[i]->addIncoming(next[i], body_end);
        b_.CreateCondBr(b_.CreateICmpSLT(kn, to), body, exit);
        b_.SetInsertPoint(exit);
        for (std::size_t i = 0; i < acc.size(); ++i) {
            auto* phi = b_.CreatePHI(vt_, 2);
            phi->addIncoming(acc[i], pre);
            phi->addIncoming(next[i], body_end);
            acc[i] = phi;
        }
    };
    // A tile of 4 or more rows at 256 bits unrolls its depth loop by kUnrollK: one step is
    // 12 FMAs beside 6 broadcasts, 2 loads, a prefetch and ~7 integer moves of loop
    // overhead, more than the front end retires in the 6 cycles of the FMAs.
    const int step = sets > 1 ? sets : vw_ * es_ == 32 ? kUnrollK : 1;
    if (step > 1) {
        Value* whole = b_.CreateMul(b_.CreateSDiv(t.kc, i64(step)), i64(step));
        kloop(i64(0), whole, step, sets > 1, "micro.k4");
        kloop(whole, t.kc, 1, false, "micro.k1");  // the last kc mod step indices, into set 0
        for (int set = 1; set < sets; ++set)
            for (std::size_t i = 0; i < nacc; ++i)
                acc[i] = b_.CreateFAdd(acc[i], acc[static_cast<std::size_t>(set) * nacc + i]);
    } else {
        kloop(i64(0), t.kc, 1, false, "micro.k");  // kc may be 0
    }

    if_else(
        t.last,
        [&] {
            Value* tile_rows = elem(tile_, b_.CreateMul(trow, i64(nr_)));
            for (int r = 0; r < rows; ++r)
                for (int v = 0; v < nv; ++v)
                    b_.CreateAlignedStore(acc[static_cast<std::size_t>(r * nv + v)],
                                          elem(tile_rows, i64(r * nr_ + v * vw_)), va);
        },
        [&] {
            for (int r = 0; r < rows; ++r)
                for (int v = 0; v < nv; ++v) b_.CreateAlignedStore(acc[static_cast<std::size_t>(r * nv + v)], cptr(r, v), ea);
        });
}

}  // namespace gemm_detail

using gemm_detail::GemmGen;

bool gemm_applies(const kir::Kernel& kernel) {
    return kernel.matmul.has_value() && g_blocked.load(std::memory_order_relaxed) &&
           (kernel.matmul->type == kir::Type::f32 || kernel.matmul->type == kir::Type::f64);
}

void set_blocked_gemm(bool on) { g_blocked.store(on, std::memory_order_relaxed); }
bool blocked_gemm_on() { return g_blocked.load(std::memory_order_relaxed); }

void set_gemm_vector_bytes(int bytes) { g_vector_bytes.store(bytes, std::memory_order_relaxed); }

// The revision names what the emitted code expects of the runtime (revision 4: the depthwise
// kernel takes several planes per call; 5: and each plane's starting values; 6: the
// kernel's derived buffers follow its outputs; 7: the depthwise kernel takes the bounds it
// clamps its outputs to; 8: the blocked-layout convolution kernel, kConvNchwcF32Symbol; 9:
// the depthwise kernel's SiLU flag), so
// that a persistent cache never hands code of an older revision to this one.
std::string gemm_settings() {
    return "gemm_revision=9;blocked_gemm=" + std::to_string(g_blocked.load(std::memory_order_relaxed) ? 1 : 0) +
           ";gemm_vector_bytes=" + std::to_string(g_vector_bytes.load(std::memory_order_relaxed));
}

void emit_gemm(const kir::Kernel& kernel, const CodegenTarget& target, KernelEmitter& em, Value* begin, Value* end) {
    if (!kernel.matmul) fail(Bailout::backend_error, "emit_gemm: the kernel has no matmul hint");
    GemmGen(kernel, target, em).run(begin, end);
}

}  // namespace kiln::tiers::llvm_tier
