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
// src/cpu (stream()), then the epilogue runs over the result.
// A convolution's B (kir::Im2col) is never built. Mostly it is not packed either: grid()
// reads it from the block's input rows copied once into zero-padded phase planes (one per
// stride phase; the image itself for a dense 1x1 conv), with register tiles over strips of
// consecutive output pixels. Where the grid would be mostly padding, the loop nest above
// packs B straight from the image, one run of output pixels of one output row at a time
// (pack_im2col). One input channel per group runs src/cpu's depthwise kernel (depthwise()).
//
// The micro-kernel keeps MR x NR accumulators in vector registers: MR rows by NV = 2
// vectors of VW elements, chosen from the host features: 512-bit (AVX-512) 8 x 2 zmm,
// 256-bit (AVX/AVX2) 6 x 2 ymm, otherwise 4 x 2 of 128 bits. Leftover rows of a block (fewer
// than MR) run micro-kernels of 4, 2 and 1 rows; leftover columns are computed on the zero
// padding and not stored. The epilogue (the hint's statements: bias, activation, residual, store) runs
// on each finished tile: the accumulators are written to a small stack tile and a loop
// over its rows and columns (vectorised by LLVM) applies the epilogue and stores C.
//
// Scratch (packed B, plus partial sums when k > KC) lives in a 64-byte-aligned buffer on
// the stack when it fits in kStackBytes, else in the calling thread's kernel scratch
// (tiers::kernel_scratch: allocated once per thread, reused by every later call).
// Dims bound by the specialisation are constants, so LLVM folds the block arithmetic and
// edge tests; generic dims stay run-time values and every edge case is handled.
#include "tiers/llvm/codegen.h"

#include "src/cpu/gemm.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>

#include <atomic>
#include <initializer_list>
#include <utility>
#include <string>
#include <vector>

namespace kiln::tiers::llvm_tier {
namespace {

using llvm::Value;

std::atomic<bool> g_blocked{true};
std::atomic<int> g_vector_bytes{0};  // 0: from the host features

constexpr std::int64_t kStackBytes = 96 * 1024;
constexpr std::int64_t kStreamCols = 512;  // columns per call of the rows kernel (stream())
// Pixels of one channel per call of the depthwise kernel (depthwise()): fewer calls, and
// fewer input rows read twice by consecutive calls; the stack buffer holds them.
constexpr std::int64_t kDwCols = 2048;
constexpr std::int64_t kStreamRows = cpu::kMaxStreamedRows;  // blocks of at most these rows stream B
static_assert(kDwCols <= kStreamRows * kStreamCols, "depthwise() runs in the stack buffer");

[[noreturn]] void fail(Bailout b, const std::string& msg) { throw CodegenError{b, msg}; }

class GemmGen {
public:
    GemmGen(const kir::Kernel& k, const CodegenTarget& target, KernelEmitter& em)
        : h_(*k.matmul), em_(em), b_(em.builder()), ctx_(b_.getContext()), fn_(em.function()) {
        const bool f32 = h_.type == kir::Type::f32;
        t_ = f32 ? b_.getFloatTy() : b_.getDoubleTy();
        es_ = f32 ? 4 : 8;
        const std::string& f = target.features;
        int bytes = 16;
        if (target.prefer_512) bytes = 64;  // AVX-512F, and KILN_CPU_ISA allows it
        else if (f.find("+avx") != std::string::npos) bytes = 32;
        if (const int forced = g_vector_bytes.load(std::memory_order_relaxed); forced == 16 || forced == 32 || forced == 64)
            bytes = forced;
        vw_ = bytes / es_;
        nv_ = 2;
        nr_ = vw_ * nv_;
        mr_ = bytes == 64 ? 8 : bytes == 32 ? 6 : 4;
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

    void run(Value* begin, Value* end) {
        llvm::Type* i8 = b_.getInt8Ty();
        // Static allocas first (we are in the entry block).
        auto* stack = b_.CreateAlloca(llvm::ArrayType::get(i8, static_cast<std::uint64_t>(kStackBytes)), nullptr, "gemm.stack");
        stack->setAlignment(llvm::Align(64));
        tile_ = b_.CreateAlloca(llvm::ArrayType::get(t_, static_cast<std::uint64_t>(mr_ * nr_)), nullptr, "gemm.tile");
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
        a_ = em_.buffer_ptr(h_.a);
        bbuf_ = em_.buffer_ptr(h_.b);

        // Scratch: packed B (kcE x ncE) then partial sums (row_block x ncE, only if k > KC).
        Value* n_round = b_.CreateMul(b_.CreateSDiv(b_.CreateAdd(n_, i64(nr_ - 1)), i64(nr_)), i64(nr_));
        nce_ = smin(i64(nc_), n_round);
        Value* kce = smin(i64(kc_), smax(k_dim_, i64(1)));
        Value* bp_elems = b_.CreateMul(kce, nce_);
        bp_elems = b_.CreateMul(b_.CreateSDiv(b_.CreateAdd(bp_elems, i64(15)), i64(16)), i64(16));  // 64-byte multiple
        Value* c_elems = b_.CreateSelect(b_.CreateICmpSGT(k_dim_, i64(kc_)), b_.CreateMul(i64(h_.row_block), nce_), i64(0));
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

private:
    const kir::MatmulHint& h_;
    KernelEmitter& em_;
    llvm::IRBuilderBase& b_;
    llvm::LLVMContext& ctx_;
    llvm::Function* fn_;
    llvm::Type* t_ = nullptr;
    llvm::FixedVectorType* vt_ = nullptr;
    int es_ = 4, vw_ = 8, nv_ = 2, nr_ = 16, mr_ = 6;
    DType da_ = DType::f32, db_ = DType::f32;  // how A and B are stored (f16/bf16: widened on load)
    std::int64_t kc_ = 256, nc_ = 128;
    llvm::AllocaInst* tile_ = nullptr;
    llvm::AllocaInst* sbuf_ = nullptr;  // stream(): kStreamCols columns of up to kStreamRows rows
    llvm::AllocaInst* geo_ = nullptr;   // depthwise(): the geometry (cpu::Im2colShape)
    llvm::AllocaInst* dwp_ = nullptr;   // depthwise(): the planes', then the filters' pointers
    llvm::AllocaInst* dacc_ = nullptr;  // grid(): the accumulators
    Value *m_ = nullptr, *n_ = nullptr, *k_dim_ = nullptr, *blocks_ = nullptr, *cblocks_ = nullptr, *nce_ = nullptr;
    Value *a_ = nullptr, *bbuf_ = nullptr, *bp_ = nullptr, *cacc_ = nullptr;
    Value *im_h_ = nullptr, *im_w_ = nullptr, *im_kw_ = nullptr, *im_khw_ = nullptr, *im_ow_ = nullptr;  // im2col

    Value* i64(std::int64_t v) { return b_.getInt64(static_cast<std::uint64_t>(v)); }
    Value* smin(Value* x, Value* y) { return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, x, y); }
    Value* smax(Value* x, Value* y) { return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x, y); }
    Value* elem(Value* base, Value* idx) { return b_.CreateInBoundsGEP(t_, base, idx); }

    // The runtime's callouts (tier.h): the calling thread's kernel scratch of `bytes` (null
    // when it cannot be had), and recording that this call failed for want of it.
    Value* scratch(Value* bytes) {
        llvm::Module& mod = *fn_->getParent();
        auto* ptr_t = llvm::PointerType::getUnqual(ctx_);
        return b_.CreateCall(mod.getOrInsertFunction(kScratchSymbol, llvm::FunctionType::get(ptr_t, {b_.getInt64Ty()}, false)),
                             {bytes});
    }
    void mark_failed() {
        llvm::Module& mod = *fn_->getParent();
        b_.CreateCall(mod.getOrInsertFunction(kFailedSymbol, llvm::FunctionType::get(b_.getVoidTy(), false)), {});
    }

    // Attaches loop metadata to the back-edge branch `br`: the named hints and their values.
    void loop_hints(llvm::Instruction* br, std::initializer_list<std::pair<const char*, llvm::Constant*>> hints) {
        std::vector<llvm::Metadata*> ops{nullptr};
        for (const auto& [name, value] : hints) {
            llvm::Metadata* hint[] = {llvm::MDString::get(ctx_, name), llvm::ConstantAsMetadata::get(value)};
            ops.push_back(llvm::MDNode::get(ctx_, hint));
        }
        auto* id = llvm::MDNode::getDistinct(ctx_, ops);
        id->replaceOperandWith(0, id);
        br->setMetadata(llvm::LLVMContext::MD_loop, id);
    }

    // Operands (A, B, the conv input) as stored: element `idx` of one stored as `d`, and a
    // load of `n` such elements (n == 1: a scalar) widened to the compute type.
    llvm::Type* storage(DType d) {
        switch (d) {
        case DType::f16: case DType::bf16: return b_.getInt16Ty();
        case DType::f64: return b_.getDoubleTy();
        default: return b_.getFloatTy();
        }
    }
    Value* selem(DType d, Value* base, Value* idx) { return b_.CreateInBoundsGEP(storage(d), base, idx); }
    Value* load_in(DType d, Value* p, int n) {
        auto vec = [&](llvm::Type* e) -> llvm::Type* { return n == 1 ? e : llvm::FixedVectorType::get(e, static_cast<unsigned>(n)); };
        Value* raw = b_.CreateAlignedLoad(vec(storage(d)), p, llvm::Align(dtype_size(d)));
        switch (d) {
        case DType::f16: return b_.CreateFPExt(b_.CreateBitCast(raw, vec(b_.getHalfTy())), vec(t_));
        case DType::bf16: return bf16_to_float(b_, raw);
        default: return raw;
        }
    }
    bool widened_b() const { return db_ == DType::f16 || db_ == DType::bf16; }
    bool widened_a() const { return da_ == DType::f16 || da_ == DType::bf16; }
    llvm::BasicBlock* block_named(const std::string& name) { return llvm::BasicBlock::Create(ctx_, name, fn_); }

    // for (iv = begin; iv < end; iv += step) body(iv): a guarded, rotated loop.
    // `scalar`: a loop of a few iterations that the loop vectoriser should leave alone (its
    // vector and epilogue loops would cost compile time and gain nothing).
    template <class F> void loop(Value* begin, Value* end, Value* step, const std::string& name, F body, bool scalar = false) {
        llvm::Instruction* br = loop_by(begin, end, name, [&](Value* iv) {
            body(iv);
            return step;
        });
        if (scalar) loop_hints(br, {{"llvm.loop.vectorize.enable", b_.getFalse()}});
    }

    // for (iv = begin; iv < end; iv += body(iv)): body returns a positive step. Returns the
    // loop's back-edge branch.
    template <class F> llvm::Instruction* loop_by(Value* begin, Value* end, const std::string& name, F body) {
        auto* pre = b_.GetInsertBlock();
        auto* head = block_named(name);
        auto* exit = block_named(name + ".exit");
        b_.CreateCondBr(b_.CreateICmpSLT(begin, end), head, exit);
        b_.SetInsertPoint(head);
        auto* iv = b_.CreatePHI(b_.getInt64Ty(), 2, name + ".iv");
        iv->addIncoming(begin, pre);
        Value* next = b_.CreateAdd(iv, body(iv), name + ".next", false, true);
        iv->addIncoming(next, b_.GetInsertBlock());
        auto* br = b_.CreateCondBr(b_.CreateICmpSLT(next, end), head, exit);
        b_.SetInsertPoint(exit);
        return br;
    }

    template <class F> void if_then(Value* cond, F then) {
        auto* yes = block_named("if.then");
        auto* done = block_named("if.end");
        b_.CreateCondBr(cond, yes, done);
        b_.SetInsertPoint(yes);
        then();
        b_.CreateBr(done);
        b_.SetInsertPoint(done);
    }

    template <class F, class G> void if_else(Value* cond, F then, G otherwise) {
        auto* yes = block_named("if.then");
        auto* no = block_named("if.else");
        auto* done = block_named("if.end");
        b_.CreateCondBr(cond, yes, no);
        b_.SetInsertPoint(yes);
        then();
        b_.CreateBr(done);
        b_.SetInsertPoint(no);
        otherwise();
        b_.CreateBr(done);
        b_.SetInsertPoint(done);
    }

    // if_else, emitting one side alone when `cond` is a constant (a specialised kernel).
    template <class F, class G> void choose(Value* cond, F then, G otherwise) {
        if (auto* known = llvm::dyn_cast<llvm::ConstantInt>(cond)) {
            if (known->isOne()) then();
            else otherwise();
            return;
        }
        if_else(cond, then, otherwise);
    }

    // cond ? make() : otherwise (make() runs only when cond holds).
    template <class F> Value* if_value(Value* cond, F make, Value* otherwise) {
        auto* pre = b_.GetInsertBlock();
        auto* yes = block_named("ifv.then");
        auto* done = block_named("ifv.end");
        b_.CreateCondBr(cond, yes, done);
        b_.SetInsertPoint(yes);
        Value* v = make();
        auto* yes_end = b_.GetInsertBlock();
        b_.CreateBr(done);
        b_.SetInsertPoint(done);
        auto* phi = b_.CreatePHI(v->getType(), 2);
        phi->addIncoming(v, yes_end);
        phi->addIncoming(otherwise, pre);
        return phi;
    }

    // Outer indices [outer, outer + run), column blocks of one row block: rows [i0, i0 + rows)
    // and columns [j0, j1) of batch entry `bidx`.
    void block(Value* outer, Value* run) {
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
            if_else(few, [&] { stream(ab, bb, i0, rows, j0, j1); }, [&] { blocked(ab, bb, xb, i0, rows, j0, j1); });
        } else if (h_.im2col && !widened_b() && !widened_a()) {
            // One input channel per group (depth = the filter's taps): the direct kernel. A
            // specialised kernel knows which, and emits that path alone (less to compile).
            // Otherwise the implicit GEMM on the padded grid (grid()) where little of the
            // grid is padding, else the packed one.
            auto conv = [&] {
                choose(grid_applies(), [&] { grid(ab, xb, i0, rows, j0, j1); }, [&] { blocked(ab, bb, xb, i0, rows, j0, j1); });
            };
            choose(b_.CreateICmpEQ(k_dim_, im_khw_), [&] { depthwise(ab, xb, i0, rows, j0, j1); }, conv);
        } else {
            blocked(ab, bb, xb, i0, rows, j0, j1);
        }
    }

    // Rows [i0, i0 + rows) of C, columns [j0, j1), through packed strips of B and register
    // tiles (the loop nest at the top of this file).
    void blocked(Value* ab, Value* bb, Value* xb, Value* i0, Value* rows, Value* j0, Value* j1) {
        Value* kmax = smax(k_dim_, i64(1));  // k == 0 still runs one (empty) depth block: C = epilogue(0)
        loop(j0, j1, i64(nc_), "gemm.jc", [&](Value* jc) {
            Value* nc = smin(i64(nc_), b_.CreateSub(j1, jc));
            loop(i64(0), kmax, i64(kc_), "gemm.pc", [&](Value* pc) {
                Value* kc = smin(i64(kc_), b_.CreateSub(k_dim_, pc));
                kc = smax(kc, i64(0));
                Value* first = b_.CreateICmpEQ(pc, i64(0));
                Value* last = b_.CreateICmpSGE(b_.CreateAdd(pc, kc), k_dim_);
                if (h_.im2col) pack_im2col(xb, pc, jc, kc, nc);
                else pack_b(bb, pc, jc, kc, nc);
                loop(i64(0), nc, i64(nr_), "gemm.jr", [&](Value* jr) {
                    Value* nr = smin(i64(nr_), b_.CreateSub(nc, jr));
                    Value* strip = elem(bp_, b_.CreateMul(jr, kc));
                    Value* full_rows = b_.CreateMul(b_.CreateSDiv(rows, i64(mr_)), i64(mr_));
                    Tile t{ab, strip, pc, kc, first, last, i0, jr};
                    loop(i64(0), full_rows, i64(mr_), "gemm.ir", [&](Value* ir) {
                        micro(t, ir, mr_, i64(0));
                        if_then(last, [&] { epilogue(tile_, nr_, b_.CreateAdd(i0, ir), i64(mr_), b_.CreateAdd(jc, jr), nr); });
                    });
                    // The rows left beside the full tiles: kernels of 4, 2 and 1 rows by the
                    // binary digits of their count, each reading the strip once for all its
                    // rows, into one epilogue.
                    Value* left = b_.CreateSub(rows, full_rows);
                    for (int c = 4; c >= 1; c /= 2) {
                        if (c >= mr_) continue;
                        Value* off = b_.CreateAnd(left, i64(~std::int64_t{2 * c - 1}));
                        if_then(b_.CreateICmpNE(b_.CreateAnd(left, i64(c)), i64(0)),
                                [&] { micro(t, b_.CreateAdd(full_rows, off), c, off); });
                    }
                    if_then(b_.CreateAnd(last, b_.CreateICmpSGT(left, i64(0))),
                            [&] { epilogue(tile_, nr_, b_.CreateAdd(i0, full_rows), left, b_.CreateAdd(jc, jr), nr); });
                });
            });
        });
    }

    // Rows [i0, i0 + rows) of C (at most kStreamRows), columns [j0, j1): B read row by row in
    // order, by src/cpu's kernel for a few rows of A (codegen.h, kRowsF32Symbol), into
    // a stack buffer of kStreamCols columns at a time, then the epilogue. A register tile
    // here would read B column strip by column strip (a stride of n elements per depth
    // index), which the hardware prefetchers do not follow: 3 to 5 times slower at 1 to 5 rows.
    void stream(Value* ab, Value* bb, Value* i0, Value* rows, Value* j0, Value* j1) {
        llvm::Module& mod = *fn_->getParent();
        auto* ptr_t = llvm::PointerType::getUnqual(ctx_);
        llvm::Type* i64t = b_.getInt64Ty();
        llvm::FunctionCallee rows_fn = mod.getOrInsertFunction(
            t_->isFloatTy() ? kRowsF32Symbol : kRowsF64Symbol,
            llvm::FunctionType::get(b_.getVoidTy(), {i64t, i64t, i64t, ptr_t, i64t, ptr_t, i64t, ptr_t, i64t}, false));
        Value* a0 = elem(ab, b_.CreateMul(i0, k_dim_));
        loop(j0, j1, i64(kStreamCols), "gemm.sc", [&](Value* jc) {
            Value* w = smin(i64(kStreamCols), b_.CreateSub(j1, jc));
            b_.CreateMemSet(sbuf_, b_.getInt8(0), b_.CreateMul(rows, i64(kStreamCols * es_)), llvm::MaybeAlign(64));
            b_.CreateCall(rows_fn, {rows, w, k_dim_, a0, k_dim_, elem(bb, jc), n_, sbuf_, i64(kStreamCols)});
            epilogue(sbuf_, kStreamCols, i0, rows, jc, w);
        });
    }

    // Rows [i0, i0 + rows) of C (output channels reading the batch entry's one input plane
    // `xb`), columns [j0, j1): each row by src/cpu's depthwise kernel (codegen.h,
    // kDepthwiseF32Symbol) into the stack buffer, kStreamCols pixels at a time, then the
    // epilogue. An implicit GEMM of depth kh * kw would spend its time packing.
    void depthwise(Value* ab, Value* xb, Value* i0, Value* rows, Value* j0, Value* j1) {
        loop(i64(0), rows, i64(1), "dw.r", [&](Value* r) {
            Value* row = b_.CreateAdd(i0, r);
            set_dw_planes(i64(0), xb, elem(ab, b_.CreateMul(row, k_dim_)));
            loop(j0, j1, i64(kDwCols), "dw.c", [&](Value* jc) {
                Value* n = smin(i64(kDwCols), b_.CreateSub(j1, jc));
                call_depthwise(i64(1), jc, b_.CreateAdd(jc, n));
                epilogue(sbuf_, kDwCols, row, i64(1), jc, n);
            });
        });
    }

    // Batch entries [outer, outer + count) of a depthwise convolution whose planes are one
    // column block each (one output channel, all of its pixels, per entry): per kStreamCols
    // pixels, one call of the kernel into rows of the stack buffer, then the epilogue of each.
    void depthwise_planes(Value* outer, Value* count) {
        loop(i64(0), count, i64(1), "dw.k", [&](Value* k) {
            em_.bind_var(h_.batch_var, b_.CreateAdd(outer, k));
            set_dw_planes(k, selem(db_, bbuf_, em_.index(h_.im2col->x_offset)), selem(da_, a_, em_.index(h_.a_offset)));
        });
        loop(i64(0), n_, i64(kStreamCols), "dw.c", [&](Value* jc) {
            Value* n = smin(i64(kStreamCols), b_.CreateSub(n_, jc));
            call_depthwise(count, jc, b_.CreateAdd(jc, n));
            loop(i64(0), count, i64(1), "dw.e", [&](Value* k) {
                em_.bind_var(h_.batch_var, b_.CreateAdd(outer, k));
                epilogue(elem(sbuf_, b_.CreateMul(k, i64(kStreamCols))), kStreamCols, i64(0), i64(1), jc, n);
            });
        });
    }

    // Entry k of the depthwise kernel's pointer arrays: plane x, filter w.
    void set_dw_planes(Value* k, Value* x, Value* w) {
        auto* at = dwp_->getAllocatedType();
        b_.CreateStore(x, b_.CreateInBoundsGEP(at, dwp_, {i64(0), k}));
        b_.CreateStore(w, b_.CreateInBoundsGEP(at, dwp_, {i64(0), b_.CreateAdd(k, i64(kStreamRows))}));
    }

    // The depthwise kernel (codegen.h, kDepthwiseF32Symbol) on the first `count` entries of
    // the pointer arrays, pixels [p0, p1), into rows of the stack buffer.
    void call_depthwise(Value* count, Value* p0, Value* p1) {
        llvm::Module& mod = *fn_->getParent();
        auto* ptr_t = llvm::PointerType::getUnqual(ctx_);
        llvm::Type* i64t = b_.getInt64Ty();
        llvm::FunctionCallee dw_fn = mod.getOrInsertFunction(
            t_->isFloatTy() ? kDepthwiseF32Symbol : kDepthwiseF64Symbol,
            llvm::FunctionType::get(b_.getVoidTy(), {ptr_t, i64t, ptr_t, ptr_t, ptr_t, i64t, i64t, i64t}, false));
        auto* at = dwp_->getAllocatedType();
        b_.CreateCall(dw_fn, {geo_, count, b_.CreateInBoundsGEP(at, dwp_, {i64(0), i64(0)}),
                              b_.CreateInBoundsGEP(at, dwp_, {i64(0), i64(kStreamRows)}), sbuf_, i64(kStreamCols), p0, p1});
    }

    // A 1x1 convolution of stride 1 without padding: its im2col matrix is the image itself
    // (input channel x pixels), so the output pixels of a batch entry form one run.
    Value* dense_conv() {
        const kir::Im2col& c = *h_.im2col;
        if (c.stride[0] != 1 || c.stride[1] != 1 || c.pad[0] != 0 || c.pad[1] != 0) return b_.getFalse();
        return b_.CreateICmpEQ(im_khw_, i64(1));
    }

    // The grid's row length: ow, and the columns of the phase plane the last taps reach.
    Value* grid_pitch() {
        const kir::Im2col& c = *h_.im2col;
        Value* span_x = b_.CreateMul(b_.CreateSub(im_kw_, i64(1)), i64(c.dilation[1]));
        return b_.CreateAdd(im_ow_, b_.CreateSDiv(span_x, i64(c.stride[1])));
    }

    // Whether grid() serves this convolution: a dense one, or one whose output rows are at
    // least 3/4 of the grid's rows (the rest is computed for nothing).
    Value* grid_applies() {
        return b_.CreateOr(dense_conv(), b_.CreateICmpSGE(b_.CreateMul(im_ow_, i64(4)), b_.CreateMul(grid_pitch(), i64(3))));
    }

    // Rows [i0, i0 + rows) of C (output channels), columns [j0, j1) (output pixels), without
    // im2col packing. The input rows the block's output rows read are copied, per input
    // channel, into sh x sw phase planes (stride sh x sw): phase (a, b) holds the zero-padded
    // input at rows v * sh + a and columns u * sw + b, in rows of wq = grid_pitch() elements
    // (only phase 0 along a filter dim of 1: phase_rows(), phase_cols()).
    // On that grid, output pixel (y, x) of the block reads, for tap (i, j) with
    // i * dh = oy * sh + a and j * dw = ox * sw + b, element (y + oy) * wq + x + ox of phase
    // (a, b): a strip of NR consecutive grid pixels is one unmasked vector load per tap, even
    // where it crosses output rows, and its pixels with x >= ow are computed and not stored.
    // A dense convolution's grid is the image itself (no copy).
    void grid(Value* ab, Value* xb, Value* i0, Value* rows, Value* j0, Value* j1) {
        const kir::Im2col& c = *h_.im2col;
        const std::int64_t phases = phase_rows() * phase_cols();
        Value* dense = dense_conv();
        Value* kh = em_.index(c.kh);
        Value* span_y = b_.CreateMul(b_.CreateSub(kh, i64(1)), i64(c.dilation[0]));
        Value* wq = grid_pitch();
        Value* ya = b_.CreateSelect(dense, i64(0), b_.CreateSDiv(j0, im_ow_));  // the block's first output row
        Value* yb = b_.CreateSDiv(b_.CreateSub(j1, i64(1)), im_ow_);
        Value* q_rows = b_.CreateSelect(
            dense, im_h_, b_.CreateAdd(b_.CreateAdd(b_.CreateSub(yb, ya), i64(1)), b_.CreateSDiv(span_y, i64(c.stride[0]))));
        Value* plane = b_.CreateMul(q_rows, wq);  // one phase plane
        Value* cin = b_.CreateSDiv(k_dim_, smax(im_khw_, i64(1)));
        // The grid: the phase planes in the scratch (and NR + 2 wq zeros past their end, which
        // the last strips read); or the image itself, and in the scratch the last strip's
        // columns of each channel, zero padded (its loads would read past the image).
        Value* slack = b_.CreateAdd(i64(nr_), b_.CreateMul(wq, i64(2)));
        Value* elems = b_.CreateSelect(dense, b_.CreateMul(cin, i64(nr_)),
                                       b_.CreateAdd(b_.CreateMul(b_.CreateMul(cin, i64(phases)), plane), slack));
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
            loop(g0, g1, i64(nr_), "grid.strip", [&](Value* gs) {
                st.gs = gs;
                st.buf = buf;
                st.plane = plane;
                if (!dense_c || dense_c->isOne()) {
                    Value* tail = b_.CreateAnd(dense, b_.CreateICmpSGT(b_.CreateAdd(gs, i64(nr_)), plane));
                    if_then(tail, [&] {
                        Value* n = b_.CreateMul(b_.CreateSub(plane, gs), i64(es_));
                        const llvm::Align ea(static_cast<std::uint64_t>(es_));
                        loop(i64(0), cin, i64(1), "grid.tail", [&](Value* ci) {
                            Value* dst = elem(scratch, b_.CreateMul(ci, i64(nr_)));
                            b_.CreateMemCpy(dst, ea, selem(db_, xb, b_.CreateAdd(b_.CreateMul(ci, plane), gs)), ea, n);
                            b_.CreateMemSet(b_.CreateGEP(b_.getInt8Ty(), dst, n), b_.getInt8(0),
                                            b_.CreateSub(i64(nr_ * es_), n), ea);
                        }, true);
                    });
                    // Not inbounds: the tail's base lies before the scratch; its loads do not.
                    st.buf = b_.CreateSelect(tail, b_.CreateGEP(t_, scratch, b_.CreateNeg(gs)), buf);
                    st.plane = b_.CreateSelect(tail, i64(nr_), plane);
                }
                loop(i64(0), rows, i64(mr_), "grid.ir", [&](Value* ir) {
                    Value* left = smin(i64(mr_), b_.CreateSub(rows, ir));
                    micro_grid(st, ir, left);
                    // Store the strip's output pixels: a run per grid row it touches.
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
                            epilogue(elem(tile_, t0), nr_, b_.CreateAdd(i0, ir), left, o_lo, b_.CreateSub(o_hi, o_lo));
                        });
                    }, true);
                });
            });
        });
    }

    // The phases of the grid, along rows and columns: the stride, or 1 for a filter of one
    // row (column), whose taps read phase 0 alone (a 1x1 convolution of stride 2).
    std::int64_t phase_rows() {
        auto* k = llvm::dyn_cast<llvm::ConstantInt>(em_.index(h_.im2col->kh));
        return k && k->isOne() ? 1 : h_.im2col->stride[0];
    }
    std::int64_t phase_cols() {
        auto* k = llvm::dyn_cast<llvm::ConstantInt>(im_kw_);
        return k && k->isOne() ? 1 : h_.im2col->stride[1];
    }

    // The phase planes of grid(): for each of `cin` input channels and phase (a, b), q_rows
    // rows of wq elements, row v and column u holding the input at row (ya + v) * sh + a - ph
    // and column u * sw + b - pw (zero outside the image); then `slack` zeros.
    void phase_planes(Value* xb, Value* buf, Value* cin, Value* ya, Value* q_rows, Value* wq, Value* slack) {
        const kir::Im2col& c = *h_.im2col;
        const std::int64_t sh = c.stride[0], sw = c.stride[1], py = phase_rows(), px = phase_cols();
        const llvm::Align ea(static_cast<std::uint64_t>(es_));
        Value* plane_in = b_.CreateMul(im_h_, im_w_);
        Value* plane = b_.CreateMul(q_rows, wq);
        Value* esz = i64(es_);
        loop(i64(0), cin, i64(1), "phase.ci", [&](Value* ci) {
            for (std::int64_t a = 0; a < py; ++a)
                for (std::int64_t bb = 0; bb < px; ++bb) {
                    Value* dst0 = elem(buf, b_.CreateMul(b_.CreateAdd(b_.CreateMul(ci, i64(py * px)), i64(a * px + bb)), plane));
                    // Columns u in [lo, hi) read the image: 0 <= u * sw + bb - pw < w.
                    const std::int64_t first = bb - c.pad[1];
                    Value* lo = smin(i64(first >= 0 ? 0 : (-first + sw - 1) / sw), wq);  // no wider than the row
                    Value* hi = smax(smin(wq, b_.CreateSDiv(b_.CreateAdd(b_.CreateSub(im_w_, i64(first)), i64(sw - 1)), i64(sw))), lo);
                    loop(i64(0), q_rows, i64(1), "phase.r", [&](Value* r) {
                        Value* iy = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(ya, r), i64(sh)), i64(a - c.pad[0]));
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
                                        }, true);
                                    }
                                    b_.CreateMemSet(elem(dst, hi), b_.getInt8(0), b_.CreateMul(b_.CreateSub(wq, hi), esz), ea);
                                },
                                [&] { b_.CreateMemSet(dst, b_.getInt8(0), b_.CreateMul(wq, esz), ea); });
                    }, true);
                }
        }, true);
        b_.CreateMemSet(elem(buf, b_.CreateMul(b_.CreateMul(cin, i64(py * px)), plane)), b_.getInt8(0), b_.CreateMul(slack, esz), ea);
    }

    struct GridStrip {
        Value *ab, *buf, *i0, *gs, *kh;
        Value *plane, *wq;  // elements of a phase plane, of a grid row
    };

    // The MR x NR tile of rows i0 + ir .. (the last of `left` rows repeated up to MR: one
    // kernel for leftover rows, whose epilogue stores the real rows only) over the grid
    // strip starting at st.gs, into the stack tile.
    void micro_grid(const GridStrip& st, Value* ir, Value* left) {
        const kir::Im2col& c = *h_.im2col;
        const std::int64_t sh = c.stride[0], sw = c.stride[1], px = phase_cols();
        const llvm::Align ea(static_cast<std::uint64_t>(es_)), va(static_cast<std::uint64_t>(es_ * vw_));
        const auto nacc = static_cast<std::size_t>(mr_ * nv_);
        auto accp = [&](std::size_t i) { return b_.CreateConstInBoundsGEP2_64(dacc_->getAllocatedType(), dacc_, 0, i); };
        Value* zero = llvm::ConstantAggregateZero::get(vt_);
        for (std::size_t i = 0; i < nacc; ++i) b_.CreateAlignedStore(zero, accp(i), va);
        std::vector<Value*> arow(static_cast<std::size_t>(mr_));
        for (int r = 0; r < mr_; ++r) {
            Value* row = b_.CreateAdd(b_.CreateAdd(st.i0, ir), smin(i64(r), b_.CreateSub(left, i64(1))));
            arow[static_cast<std::size_t>(r)] = selem(da_, st.ab, b_.CreateMul(row, k_dim_));
        }
        const auto vw = static_cast<unsigned>(vw_);
        Value* cin = b_.CreateSDiv(k_dim_, smax(im_khw_, i64(1)));
        Value* strip = b_.CreateGEP(t_, st.buf, st.gs);  // not inbounds: see grid() (the tail strip)
        loop(i64(0), cin, i64(1), "grid.ci", [&](Value* ci) {
            Value* pl = elem(strip, b_.CreateMul(b_.CreateMul(ci, i64(phase_rows() * px)), st.plane));
            Value* kci = b_.CreateMul(ci, im_khw_);
            taps(st.kh, "grid.i", [&](Value* i) {
                // i * dh = oy * sh + a: phase row a, grid row offset oy.
                Value* iy = b_.CreateMul(i, i64(c.dilation[0]));
                Value* rowp = elem(pl, b_.CreateAdd(b_.CreateMul(b_.CreateMul(b_.CreateSRem(iy, i64(sh)), i64(px)), st.plane),
                                                    b_.CreateMul(b_.CreateSDiv(iy, i64(sh)), st.wq)));
                Value* kr = b_.CreateAdd(kci, b_.CreateMul(i, im_kw_));
                taps(im_kw_, "grid.j", [&](Value* j) {
                    Value* jx = b_.CreateMul(j, i64(c.dilation[1]));
                    Value* bptr = elem(rowp, b_.CreateAdd(b_.CreateMul(b_.CreateSRem(jx, i64(sw)), st.plane), b_.CreateSDiv(jx, i64(sw))));
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
        for (int r = 0; r < mr_; ++r)
            for (int v = 0; v < nv_; ++v)
                b_.CreateAlignedStore(b_.CreateAlignedLoad(vt_, accp(static_cast<std::size_t>(r * nv_ + v)), va),
                                      elem(tile_, i64(r * nr_ + v * vw_)), va);
    }

    // for (t = 0; t < count; ++t) body(t): a loop, or body(0) alone for a filter dim of 1.
    // Not unrolled: the straight-line code of a 3x3 filter's nine taps compiled ~2x slower
    // (median tier-2 compile of resnet18's groups 23-28 -> 16-17 ms, AMD EPYC Zen 4), and
    // the scheduler spilled the broadcasts it hoisted across taps, for no speed.
    template <class F> void taps(Value* count, const std::string& name, F body) {
        if (auto* known = llvm::dyn_cast<llvm::ConstantInt>(count); known && known->isOne()) {
            body(i64(0));
            return;
        }
        loop(i64(0), count, i64(1), name, body, true);
    }

    // Packs B[pc:pc+kc, jc:jc+nc] (row-major, ld n) into strips of NR columns, each kc x NR
    // contiguous, the last strip zero padded.
    void pack_b(Value* bb, Value* pc, Value* jc, Value* kc, Value* nc) {
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

    // Packs B[pc:pc+kc, jc:jc+nc] of an im2col operand (kir::Im2col; `xb` points at the batch
    // entry's first input channel) into strips of NR columns, like pack_b. For one strip and
    // depth index (input channel, window row i, window column j), the strip's columns split
    // into runs that each lie in one output row y (consecutive xo). A run reads input row
    // iy = y * sh - ph + i * dh at columns xo * sw - pw + j * dw, so its in-bounds part is
    // one interval: zeros, a strided copy (a plain copy for stride 1), zeros. The index
    // arithmetic (divisions) is per run, not per element.
    void pack_im2col(Value* xb, Value* pc, Value* jc, Value* kc, Value* nc) {
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

    // A run of a stride-1 im2col strip that is not a whole strip (it crosses an output row,
    // or touches the padding): dq[t] = src[t] for t in [lo, hi), 0 for t in [0, lo) and
    // [hi, len), as NV masked vector loads and stores (no lane outside [0, len) is written,
    // none outside [lo, hi) read), instead of a scalar loop: in planes of 56 pixels or fewer
    // most strips cross a row.
    void masked_run(Value* src, Value* dq, Value* lo, Value* hi, Value* len) {
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

    // for the runs of `cols` consecutive output pixels starting at (y0, x0), each within one
    // output row: body(q, y, xo, len) for the run of columns [q, q + len).
    template <class F> void run_loop(Value* cols, Value* y0, Value* x0, F body) {
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

    struct Tile {
        Value *ab, *strip, *pc, *kc, *first, *last, *i0, *jr;
    };

    // The register tile of `rows` rows starting at block row `ir`, over the packed strip:
    // the depth block's products added to zero (first depth block) or to the partial sums;
    // on the last depth block stored to rows [trow, trow + rows) of the stack tile, else to
    // the partial sums. With 1 or 2 rows the depth loop keeps 4 / rows sets of accumulators
    // (depth index k in set k mod sets), so that enough independent FMA chains hide the FMA
    // latency.
    void micro(const Tile& t, Value* ir, int rows, Value* trow) {
        const int sets = rows < 4 ? 4 / rows : 1;
        const std::size_t nacc = static_cast<std::size_t>(rows * nv_);
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
                for (int v = 0; v < nv_; ++v)
                    loaded[static_cast<std::size_t>(r * nv_ + v)] = b_.CreateAlignedLoad(vt_, cptr(r, v), ea);
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

        // acc[set] += the products of depth index kk.
        auto fmas = [&](std::vector<Value*>& a, int set, Value* kk) {
            Value* bptr = elem(t.strip, b_.CreateMul(kk, i64(nr_)));
            std::vector<Value*> bv(static_cast<std::size_t>(nv_));
            for (int v = 0; v < nv_; ++v)
                bv[static_cast<std::size_t>(v)] = b_.CreateAlignedLoad(vt_, elem(bptr, i64(v * vw_)), va);
            for (int r = 0; r < rows; ++r) {
                Value* av = load_in(da_, selem(da_, arow[static_cast<std::size_t>(r)], kk), 1);
                Value* sp = b_.CreateVectorSplat(static_cast<unsigned>(vw_), av);
                for (int v = 0; v < nv_; ++v) {
                    const std::size_t i = static_cast<std::size_t>(set) * nacc + static_cast<std::size_t>(r * nv_ + v);
                    a[i] = b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vt_}, {sp, bv[static_cast<std::size_t>(v)], a[i]});
                }
            }
        };
        // for (kk = from; kk < to; kk += step) acc = body(acc, kk), over phis (to - from a
        // multiple of step, possibly 0).
        auto kloop = [&](Value* from, Value* to, int step, const char* name) {
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
            for (int u = 0; u < step; ++u) fmas(next, step == 1 ? 0 : u, u == 0 ? kk : b_.CreateAdd(kk, i64(u)));
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
        if (sets > 1) {
            Value* whole = b_.CreateMul(b_.CreateSDiv(t.kc, i64(sets)), i64(sets));
            kloop(i64(0), whole, sets, "micro.k4");
            kloop(whole, t.kc, 1, "micro.k1");  // the last kc mod sets indices, into set 0
            for (int set = 1; set < sets; ++set)
                for (std::size_t i = 0; i < nacc; ++i)
                    acc[i] = b_.CreateFAdd(acc[i], acc[static_cast<std::size_t>(set) * nacc + i]);
        } else {
            kloop(i64(0), t.kc, 1, "micro.k");  // kc may be 0
        }

        if_else(
            t.last,
            [&] {
                Value* tile_rows = elem(tile_, b_.CreateMul(trow, i64(nr_)));
                for (int r = 0; r < rows; ++r)
                    for (int v = 0; v < nv_; ++v)
                        b_.CreateAlignedStore(acc[static_cast<std::size_t>(r * nv_ + v)],
                                              elem(tile_rows, i64(r * nr_ + v * vw_)), va);
            },
            [&] {
                for (int r = 0; r < rows; ++r)
                    for (int v = 0; v < nv_; ++v) b_.CreateAlignedStore(acc[static_cast<std::size_t>(r * nv_ + v)], cptr(r, v), ea);
            });
    }

    // The epilogue of rows [row0, row0 + rows) and columns [col0, col0 + cols) of C, whose
    // sums are in `buf` (row r at buf + r * ld), element by element (the column loop
    // vectorises): the stack tile of finished register tiles, or stream()'s buffer.
    void epilogue(Value* buf, std::int64_t ld, Value* row0, Value* rows, Value* col0, Value* cols) {
        const llvm::Align ea(static_cast<std::uint64_t>(es_));
        loop(i64(0), rows, i64(1), "epi.r", [&](Value* r) {
            em_.bind_var(h_.row_var, b_.CreateAdd(row0, r));
            Value* brow = elem(buf, b_.CreateMul(r, i64(ld)));
            llvm::Instruction* br = loop_by(i64(0), cols, "epi.c", [&](Value* c) {
                em_.bind_var(h_.col_var, b_.CreateAdd(col0, c));
                em_.epilogue(b_.CreateAlignedLoad(t_, elem(brow, c), ea));
                return i64(1);
            });
            // A row of at most a few vectors (a tile's row, a run of a grid strip): vectors of
            // VW with the tail folded into masked lanes, not interleaved. The vectoriser's
            // default (4 interleaved vectors, then a narrower vector loop, then scalars) ran
            // rows of 32 or fewer elements on its narrow and scalar loops alone.
            loop_hints(br, {{"llvm.loop.vectorize.enable", b_.getTrue()},
                            {"llvm.loop.vectorize.width", b_.getInt32(static_cast<std::uint32_t>(vw_))},
                            {"llvm.loop.interleave.count", b_.getInt32(1)},
                            {"llvm.loop.vectorize.predicate.enable", b_.getTrue()}});
        });
    }
};

}  // namespace

bool gemm_applies(const kir::Kernel& kernel) {
    return kernel.matmul.has_value() && g_blocked.load(std::memory_order_relaxed) &&
           (kernel.matmul->type == kir::Type::f32 || kernel.matmul->type == kir::Type::f64);
}

void set_blocked_gemm(bool on) { g_blocked.store(on, std::memory_order_relaxed); }

void set_gemm_vector_bytes(int bytes) { g_vector_bytes.store(bytes, std::memory_order_relaxed); }

std::string gemm_settings() {
    return "gemm_revision=3;blocked_gemm=" + std::to_string(g_blocked.load(std::memory_order_relaxed) ? 1 : 0) +
           ";gemm_vector_bytes=" + std::to_string(g_vector_bytes.load(std::memory_order_relaxed));
}

void emit_gemm(const kir::Kernel& kernel, const CodegenTarget& target, KernelEmitter& em, Value* begin, Value* end) {
    if (!kernel.matmul) fail(Bailout::backend_error, "emit_gemm: the kernel has no matmul hint");
    GemmGen(kernel, target, em).run(begin, end);
}

}  // namespace kiln::tiers::llvm_tier
