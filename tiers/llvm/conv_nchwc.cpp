// The code of a conv2d_nchwc kernel with a kir::NchwcConv (codegen.h, emit_nchwc): per
// outer index (a sample, a range of channel blocks, a range of pixels), chunks of
// kChunkPixels pixels: src/cpu's blocked-layout kernel (cpu/conv_nchwc.h, through
// kConvNchwcF32Symbol) writes the raw convolution of every block of the range into a stack
// tile [blocks][kChunkPixels][16], and the epilogue (bias, the fused chain, the store) runs
// over it pixel by pixel, vectorised along the 16 lanes of a block, which are consecutive in
// every operand of the blocked layout.
#include "tiers/llvm/ir_loops.h"

#include "src/cpu/conv_nchwc.h"
#include "src/cpu/gemm.h"

namespace kiln::tiers::llvm_tier {
namespace {

// Pixels per kernel call: a tile of at most 9 blocks (conv_row_block / 16) x 32 pixels x
// 16 lanes stays in L1 for the epilogue.
constexpr std::int64_t kChunkPixels = 32;
constexpr std::int64_t kLanes = cpu::kNchwcLanes;
constexpr int kGeoFields = 14;

class NchwcGen : IrLoops {
public:
    NchwcGen(const kir::Kernel& k, const CodegenTarget& target, KernelEmitter& em)
        : IrLoops(em.builder(), em.function()), h_(*k.nchwc), em_(em), width_(target.prefer_512 ? 16 : 8) {}

    void run(Value* begin, Value* end) {
        llvm::Type* f32 = b_.getFloatTy();
        llvm::Type* i64t = b_.getInt64Ty();
        // The geometry the runtime kernel takes (kConvNchwcF32Symbol), and the tile.
        auto* geo_t = llvm::ArrayType::get(i64t, kGeoFields);
        auto* geo = b_.CreateAlloca(geo_t, nullptr, "nchwc.geo");
        const std::int64_t flags = (h_.blocked_input ? 1 : 0) | (h_.depthwise ? 2 : 0);
        Value* fields[kGeoFields] = {i64(h_.cin), em_.index(h_.h), em_.index(h_.w_in), em_.index(h_.oh), em_.index(h_.ow),
                                     i64(h_.kh), i64(h_.kw), i64(h_.stride[0]), i64(h_.stride[1]), i64(h_.pad[0]),
                                     i64(h_.pad[1]), i64(h_.dilation[0]), i64(h_.dilation[1]), i64(flags)};
        for (int f = 0; f < kGeoFields; ++f)
            b_.CreateStore(fields[f], b_.CreateConstInBoundsGEP2_64(geo_t, geo, 0, static_cast<std::uint64_t>(f)));
        const std::int64_t ldb = kChunkPixels * kLanes;
        auto* tile = b_.CreateAlloca(llvm::ArrayType::get(f32, static_cast<std::uint64_t>(h_.block_rows * ldb)), nullptr, "nchwc.tile");
        tile->setAlignment(llvm::Align(64));

        Value* x = em_.buffer_ptr(h_.x);
        Value* w = em_.buffer_ptr(h_.w);
        Value* blocks = em_.index(h_.blocks);
        Value* npix = em_.index(h_.npix);
        Value* rblocks = b_.CreateSDiv(b_.CreateAdd(blocks, i64(h_.block_rows - 1)), i64(h_.block_rows));
        Value* cblocks = b_.CreateSDiv(b_.CreateAdd(npix, i64(h_.col_block - 1)), i64(h_.col_block));
        Value* per_sample = b_.CreateMul(rblocks, cblocks);

        llvm::Module& mod = *fn_->getParent();
        auto* ptr_t = llvm::PointerType::getUnqual(ctx_);
        llvm::FunctionCallee kernel = mod.getOrInsertFunction(
            kConvNchwcF32Symbol,
            llvm::FunctionType::get(b_.getVoidTy(), {ptr_t, ptr_t, ptr_t, ptr_t, i64t, i64t, i64t, i64t, i64t}, false));

        loop(begin, end, i64(1), "nchwc.outer", [&](Value* outer) {
            Value* sample = b_.CreateSDiv(outer, per_sample);
            Value* ob0 = b_.CreateMul(b_.CreateSRem(b_.CreateSDiv(outer, cblocks), rblocks), i64(h_.block_rows));
            Value* ob1 = smin(b_.CreateAdd(ob0, i64(h_.block_rows)), blocks);
            Value* pa = b_.CreateMul(b_.CreateSRem(outer, cblocks), i64(h_.col_block));
            Value* pb = smin(b_.CreateAdd(pa, i64(h_.col_block)), npix);
            em_.bind_var(h_.batch_var, sample);
            Value* xs = b_.CreateInBoundsGEP(f32, x, em_.index(h_.x_offset));
            loop(pa, pb, i64(kChunkPixels), "nchwc.chunk", [&](Value* pc) {
                Value* pe = smin(b_.CreateAdd(pc, i64(kChunkPixels)), pb);
                b_.CreateCall(kernel, {geo, xs, w, tile, i64(ldb), ob0, ob1, pc, pe});
                Value* np = b_.CreateSub(pe, pc);
                loop(ob0, ob1, i64(1), "nchwc.ob", [&](Value* ob) {
                    em_.bind_var(h_.block_var, ob);
                    Value* rows = b_.CreateInBoundsGEP(f32, tile, b_.CreateMul(b_.CreateSub(ob, ob0), i64(ldb)));
                    loop(i64(0), np, i64(1), "nchwc.p", [&](Value* r) {
                        em_.bind_var(h_.col_var, b_.CreateAdd(pc, r));
                        Value* lanes = b_.CreateInBoundsGEP(f32, rows, b_.CreateMul(r, i64(kLanes)));
                        llvm::Instruction* br = loop_by(i64(0), i64(kLanes), "nchwc.l", [&](Value* l) {
                            em_.bind_var(h_.lane_var, l);
                            em_.epilogue(b_.CreateAlignedLoad(f32, b_.CreateInBoundsGEP(f32, lanes, l), llvm::Align(4)));
                            return i64(1);
                        });
                        loop_hints(br, {{"llvm.loop.vectorize.enable", b_.getTrue()},
                                        {"llvm.loop.vectorize.width", b_.getInt32(static_cast<std::uint32_t>(width_))},
                                        {"llvm.loop.interleave.count", b_.getInt32(static_cast<std::uint32_t>(kLanes / width_))}});
                    }, true);
                }, true);
            }, true);
        }, true);
    }

private:
    const kir::NchwcConv& h_;
    KernelEmitter& em_;
    const int width_;  // f32 lanes of the target's vectors
};

}  // namespace

bool nchwc_applies(const kir::Kernel& kernel) { return kernel.nchwc.has_value() && !kernel.matmul && blocked_gemm_on(); }

void emit_nchwc(const kir::Kernel& kernel, const CodegenTarget& target, KernelEmitter& em, llvm::Value* begin,
                llvm::Value* end) {
    if (!kernel.nchwc) throw CodegenError{Bailout::backend_error, "emit_nchwc: the kernel has no nchwc hint"};
    NchwcGen(kernel, target, em).run(begin, end);
}

void conv_nchwc_f32(const std::int64_t* geo, const float* x, const float* w, float* out, std::int64_t ldb,
                    std::int64_t ob0, std::int64_t ob1, std::int64_t p0, std::int64_t p1) noexcept {
    cpu::NchwcGeometry g;
    g.cin = geo[0], g.h = geo[1], g.w = geo[2], g.oh = geo[3], g.ow = geo[4], g.kh = geo[5], g.kw = geo[6];
    g.sh = geo[7], g.sw = geo[8], g.ph = geo[9], g.pw = geo[10], g.dh = geo[11], g.dw = geo[12];
    g.blocked_input = (geo[13] & 1) != 0;
    g.depthwise = (geo[13] & 2) != 0;
    cpu::conv_nchwc_f32(cpu::kernel_cpu_isa(), g, x, w, nullptr, out, ldb, ob0, ob1, p0, p1);
}

}  // namespace kiln::tiers::llvm_tier
