// The blocked GEMM's epilogue (gemm_gen.h: epilogue, long_epilogue): the hint's statements
// (bias, activation, residual, store) over the finished sums of a tile or a stream buffer,
// in vectors of VW columns emitted as such (KernelEmitter::epilogue_lanes), or, where the
// epilogue cannot run across lanes, as scalar loops hinted for the loop vectoriser.
#include "tiers/llvm/gemm_gen.h"

#include <vector>

namespace kiln::tiers::llvm_tier::gemm_detail {

namespace {

// Does `e` load from a buffer at an index that reads loop variable `var`?
bool loads_along(const kir::ExprRef& e, int var) {
    if (!e) return false;
    if (e->kind == kir::ExprKind::Load && kir::uses_var(e->args[0], var)) return true;
    for (const kir::ExprRef& a : e->args)
        if (loads_along(a, var)) return true;
    return false;
}

}  // namespace

bool GemmGen::epilogue_rereadable() const {
    // Every load of the epilogue is free of the column (a bias, a scale per row), so that an
    // element's value depends on its sum and its row alone and computing it twice stores the
    // same value twice; a load along the row (a residual) might read what the first store
    // wrote, were the memory shared.
    for (const kir::StmtRef& st : h_.epilogue)
        if (st->kind == kir::StmtKind::Loop || loads_along(st->value, h_.col_var)) return false;
    return true;
}

void GemmGen::epilogue(Value* buf, std::int64_t ld, Value* row0, Value* rows, Value* col0, Value* cols) {
    if (!em_.lanes_ok(h_.col_var)) {
        em_.need_loop_vectoriser();
        hinted_epilogue(buf, ld, row0, rows, col0, cols);
        return;
    }
    // The epilogue in vectors of VW columns, emitted as such (KernelEmitter::epilogue_lanes):
    // a bound row of at most 4 whole vectors (a tile's row) as straight-line code, other
    // rows as a loop of whole vectors (two per iteration at 512 bits: independent chains,
    // which a long epilogue such as SiLU's needs to fill the pipes), then the tail: masked
    // vectors at 512 bits; at 256, where the epilogue allows it (epilogue_rereadable), one
    // more whole vector ending at the row's end, otherwise scalars (AVX2's masked loads and
    // stores are slow on AMD cores). The loop vectoriser made the same code from a scalar
    // loop with hints (hinted_epilogue) at a third of the kernel's compile time.
    const llvm::Align ea(static_cast<std::uint64_t>(es_));
    auto* cc = llvm::dyn_cast<llvm::ConstantInt>(cols);
    const std::int64_t nvec = cc && cc->getSExtValue() % vw_ == 0 ? cc->getSExtValue() / vw_ : 0;
    const bool wide = vw_ * es_ == 64;
    const bool overlap = !wide && nvec == 0 && epilogue_rereadable();
    auto lanes = [&](Value* brow, Value* c, Value* mask) {
        Value* p = elem(brow, c);
        Value* acc = mask ? b_.CreateMaskedLoad(vt_, p, ea, mask, llvm::Constant::getNullValue(vt_))
                          : static_cast<Value*>(b_.CreateAlignedLoad(vt_, p, ea));
        em_.epilogue_lanes(acc, h_.col_var, b_.CreateAdd(col0, c), mask);
    };
    auto scalars = [&](Value* brow, Value* from) {
        loop(from, cols, i64(1), "epi.s", [&](Value* c) {
            em_.bind_var(h_.col_var, b_.CreateAdd(col0, c));
            em_.epilogue(b_.CreateAlignedLoad(t_, elem(brow, c), ea));
        }, true);
    };
    loop(i64(0), rows, i64(1), "epi.r", [&](Value* r) {
        em_.bind_var(h_.row_var, b_.CreateAdd(row0, r));
        Value* brow = elem(buf, b_.CreateMul(r, i64(ld)));
        if (nvec >= 1 && nvec <= 4) {
            for (std::int64_t v = 0; v < nvec; ++v) lanes(brow, i64(v * vw_), nullptr);
            return;
        }
        const std::int64_t step = (wide ? 2 : 1) * vw_;
        Value* whole = b_.CreateMul(b_.CreateSDiv(cols, i64(step)), i64(step));
        loop(i64(0), whole, i64(step), "epi.v", [&](Value* c) {
            for (std::int64_t v = 0; v < step; v += vw_) lanes(brow, b_.CreateAdd(c, i64(v)), nullptr);
        }, true);
        if (wide) {
            std::vector<llvm::Constant*> iota;
            for (std::int64_t l = 0; l < vw_; ++l) iota.push_back(b_.getInt32(static_cast<std::uint32_t>(l)));
            Value* lane = llvm::ConstantVector::get(iota);
            loop(whole, cols, i64(vw_), "epi.m", [&](Value* c) {
                Value* left = b_.CreateTrunc(b_.CreateSub(cols, c), b_.getInt32Ty());  // < 2 VW
                lanes(brow, c, b_.CreateICmpULT(lane, b_.CreateVectorSplat(static_cast<unsigned>(vw_), left)));
            }, true);
        } else if (overlap) {
            if_else(b_.CreateICmpSGE(cols, i64(vw_)),
                    [&] { if_then(b_.CreateICmpSLT(whole, cols), [&] { lanes(brow, b_.CreateSub(cols, i64(vw_)), nullptr); }); },
                    [&] { scalars(brow, i64(0)); });
        } else {
            scalars(brow, whole);
        }
    }, true);
}

// The epilogue as scalar loops hinted for the loop vectoriser, where it cannot run across
// lanes (KernelEmitter::lanes_ok).
void GemmGen::hinted_epilogue(Value* buf, std::int64_t ld, Value* row0, Value* rows, Value* col0, Value* cols) {
    const llvm::Align ea(static_cast<std::uint64_t>(es_));
    // Vectors per iteration: a bound row of 2-4 whole vectors (a tile's row of NR = NV VW)
    // in one iteration; other rows 2 at 512 bits (their tail in masked lanes) and 1 at 256
    // (their tail as scalars, so fewer of them: see below).
    auto* cc = llvm::dyn_cast<llvm::ConstantInt>(cols);
    const std::int64_t nvec = cc && cc->getSExtValue() % vw_ == 0 ? cc->getSExtValue() / vw_ : 0;
    const std::int64_t il = nvec >= 2 && nvec <= 4 ? nvec : vw_ * es_ == 64 ? 2 : 1;
    // One row's columns [c0, c0 + n) (n counted from brow).
    auto row_cols = [&](Value* brow, Value* c0, Value* n, std::int64_t interleave) {
        llvm::Instruction* br = loop_by(i64(0), n, "epi.c", [&](Value* c) {
            em_.bind_var(h_.col_var, b_.CreateAdd(c0, c));
            em_.epilogue(b_.CreateAlignedLoad(t_, elem(brow, c), ea));
            return i64(1);
        });
        // A row of at most a few vectors (a tile's row, a run of a grid strip): vectors of
        // VW, interleaved (a tile row of NR = 2 VW in one iteration: two independent
        // chains, which a long epilogue such as SiLU's needs to fill the pipes: 1x1 conv
        // 16 -> 96 at 112 x 112 with SiLU, AMD EPYC Zen 4, 1 thread: AVX-512 0.84 -> 0.79 ms,
        // AVX2 1.3 -> 1.13 ms). The vectoriser's default (4 interleaved vectors, then a
        // narrower vector loop, then scalars) ran rows of 32 or fewer elements on its narrow
        // and scalar loops alone.
        // The tail folded into masked lanes on AVX-512 only: AVX2's masked loads and stores
        // (vmaskmovps) are slow on AMD cores, and its masks take a dozen instructions per
        // vector; there the tail runs as scalars after the whole vectors (a depthwise conv's
        // epilogue under KILN_CPU_ISA=avx2, AMD EPYC Zen 4: as long as the kernel itself),
        // or, where the epilogue may compute an element twice, as one more whole vector (see
        // below).
        const auto width = static_cast<std::uint32_t>(vw_);
        const auto count = static_cast<std::uint32_t>(interleave);
        if (vw_ * es_ == 64)
            loop_hints(br, {{"llvm.loop.vectorize.enable", b_.getTrue()},
                            {"llvm.loop.vectorize.width", b_.getInt32(width)},
                            {"llvm.loop.interleave.count", b_.getInt32(count)},
                            {"llvm.loop.vectorize.predicate.enable", b_.getTrue()}});
        else
            loop_hints(br, {{"llvm.loop.vectorize.enable", b_.getTrue()},
                            {"llvm.loop.vectorize.width", b_.getInt32(width)},
                            {"llvm.loop.interleave.count", b_.getInt32(count)}});
    };
    // At 256 bits a row of a count not bound to whole vectors, of at least one vector, runs
    // as whole vectors, the last one ending at the row's end over columns already done (the
    // same values stored again), where the epilogue allows it (epilogue_rereadable): no
    // scalar tail. Scalars cost most in a long epilogue: AVX2's 3x3 convs have tiles of NR =
    // 3 VW, and the runs of a strided conv's strips (rows of the output cut at its edges)
    // vary in length, so that up to 7 of a run's elements ran as scalars (efficientnet_b0's
    // stem, 3 -> 32, 3x3 stride 2 at 224 x 224, SiLU, KILN_CPU_ISA=avx2: its scalar tails
    // held 15% of its samples).
    const bool overlap = vw_ * es_ == 32 && nvec == 0 && epilogue_rereadable();
    loop(i64(0), rows, i64(1), "epi.r", [&](Value* r) {
        em_.bind_var(h_.row_var, b_.CreateAdd(row0, r));
        Value* brow = elem(buf, b_.CreateMul(r, i64(ld)));
        if (!overlap) return row_cols(brow, col0, cols, il);
        if_else(b_.CreateICmpSGE(cols, i64(vw_)),
                [&] {
                    Value* last = b_.CreateSub(cols, i64(vw_));
                    loop(i64(0), last, i64(vw_), "epi.v", [&](Value* c) {
                        row_cols(elem(brow, c), b_.CreateAdd(col0, c), i64(vw_), 1);
                    }, true);
                    row_cols(elem(brow, last), b_.CreateAdd(col0, last), i64(vw_), 1);
                },
                [&] { row_cols(brow, col0, cols, 1); });
    });
}

void GemmGen::long_epilogue(Value* buf, std::int64_t ld, Value* row0, Value* rows, Value* col0, Value* cols) {
    // The masked tail-folded loop of epilogue() over a long row spent as much on its masks
    // (64-bit lane indices: four compares per two vectors) and on reloading the constants
    // they pushed out of the registers as on the work: a depthwise conv's SiLU epilogue ran
    // at ~2 cycles per element. Pieces of a bound 2 VW columns vectorise without masks.
    const std::int64_t piece = 2 * vw_;
    Value* whole = b_.CreateMul(b_.CreateSDiv(cols, i64(piece)), i64(piece));
    loop(i64(0), rows, i64(1), "epil.r", [&](Value* r) {
        Value* brow = elem(buf, b_.CreateMul(r, i64(ld)));
        Value* row = b_.CreateAdd(row0, r);
        loop(i64(0), whole, i64(piece), "epil.c", [&](Value* c) {
            epilogue(elem(brow, c), ld, row, i64(1), b_.CreateAdd(col0, c), i64(piece));
        }, true);
        if_then(b_.CreateICmpSLT(whole, cols), [&] {
            epilogue(elem(brow, whole), ld, row, i64(1), b_.CreateAdd(col0, whole), b_.CreateSub(cols, whole));
        });
    }, true);
}

}  // namespace kiln::tiers::llvm_tier::gemm_detail
