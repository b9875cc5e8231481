// The code of a conv2d_nchwc kernel with a kir::NchwcConv (codegen.h, emit_nchwc): per
// outer index (a sample, a range of channel blocks, a range of pixels) src/cpu's
// blocked-layout kernel (cpu/conv_nchwc.h, through kConvNchwcF32Symbol) computes the
// convolution. Where the epilogue only adds the bias and a residual, clamps to constant
// bounds (relu6) or takes SiLU, and stores, the kernel does that itself, into the output, in
// one call. Otherwise, chunks of kChunkPixels pixels: the kernel writes the raw convolution
// of every block of the range into a stack tile [blocks][kChunkPixels][16], and the epilogue
// (bias, the fused chain, the store) runs over it pixel by pixel, vectorised along the 16
// lanes of a block, which are consecutive in every operand of the blocked layout.
#include "tiers/llvm/ir_loops.h"

#include "tiers/kir_forms.h"

#include "src/cpu/conv_nchwc.h"
#include "src/cpu/gemm.h"

#include <limits>
#include <optional>

namespace kiln::tiers::llvm_tier {
namespace {

// Pixels per kernel call: a tile of at most 8 blocks (conv_row_block / 16, even) x 32 pixels x
// 16 lanes stays in L1 for the epilogue.
constexpr std::int64_t kChunkPixels = 32;
constexpr std::int64_t kLanes = cpu::kNchwcLanes;
constexpr int kGeoFields = 15;

class NchwcGen : IrLoops {
public:
    NchwcGen(const kir::Kernel& k, const CodegenTarget& target, KernelEmitter& em)
        : IrLoops(em.builder(), em.function()), h_(*k.nchwc), kern_(k), em_(em), width_(target.prefer_512 ? 16 : 8) {}

    // An epilogue the kernel applies itself: one store to the output of acc plus at most the
    // bias (b[block * 16 + lane]) and a residual (an f32 buffer read at the store's index),
    // summed in any order, then at most a constant clamp or SiLU (tiers/kir_forms.h).
    struct Direct {
        const kir::Stmt* store = nullptr;
        bool bias = false, silu = false;
        int residual = -1;  // the residual's buffer
        double lo = 0, hi = 0;
    };
    std::optional<Direct> direct() const {
        if (h_.epilogue.size() != 1 || h_.out < 0) return std::nullopt;
        const kir::Stmt& st = *h_.epilogue.front();
        if (st.kind != kir::StmtKind::Store || st.buffer != h_.out || !st.index || !st.value ||
            kern_.buffers[static_cast<std::size_t>(h_.out)].dtype != DType::f32)
            return std::nullopt;
        auto is = [](const kir::Expr& e, kir::ExprKind k, int id) { return e.kind == k && e.id == id; };
        auto is_acc = [&](const kir::Expr& e) { return is(e, kir::ExprKind::Temp, h_.acc_temp); };
        auto either = [](const kir::Expr& e, kir::BinaryOp op, auto&& first, auto&& second) {
            return e.kind == kir::ExprKind::Binary && e.bop == op &&
                   ((first(*e.args[0]) && second(*e.args[1])) || (first(*e.args[1]) && second(*e.args[0])));
        };
        auto is_lanes = [&](const kir::Expr& e) {  // block * 16 + lane
            auto block16 = [&](const kir::Expr& m) {
                return either(m, kir::BinaryOp::mul, [&](const kir::Expr& v) { return is(v, kir::ExprKind::Var, h_.block_var); },
                              [](const kir::Expr& c) { return c.kind == kir::ExprKind::Const && c.i == kLanes; });
            };
            return either(e, kir::BinaryOp::add, block16, [&](const kir::Expr& v) { return is(v, kir::ExprKind::Var, h_.lane_var); });
        };
        auto is_bias = [&](const kir::Expr& e) { return h_.bias >= 0 && is(e, kir::ExprKind::Load, h_.bias) && is_lanes(*e.args[0]); };
        auto is_residual = [&](const kir::Expr& e) {
            return e.kind == kir::ExprKind::Load && e.id != h_.out && e.id != h_.bias && e.id >= 0 &&
                   kern_.buffers[static_cast<std::size_t>(e.id)].dtype == DType::f32 && kir::same_expr(*e.args[0], *st.index);
        };
        Direct d;
        d.store = &st;
        const kir::Expr* v = constant_clamp(*st.value, d.lo, d.hi);
        if (v == st.value.get()) {
            if (const kir::Expr* arg = silu_argument(*v)) {
                v = arg;
                d.silu = true;
            }
        }
        // The terms of the sum: acc once, the bias and a residual at most once each.
        int accs = 0;
        bool ok = true;
        // The conv's value with the real channel count, select(block * 16 + lane < cout, v, 0):
        // v (the kernel zeroes those channels itself, NchwcGeometry::cout).
        auto is_cout_select = [&](const kir::Expr& e) {
            const kir::Expr* c = e.kind == kir::ExprKind::Select ? e.args[0].get() : nullptr;
            return c && c->kind == kir::ExprKind::Binary && c->bop == kir::BinaryOp::lt && is_lanes(*c->args[0]) &&
                   c->args[1]->kind == kir::ExprKind::Const && c->args[1]->i == h_.cout && e.args[2]->kind == kir::ExprKind::Const &&
                   e.args[2]->f == 0.0;
        };
        auto terms = [&](auto&& self, const kir::Expr& e) -> void {
            if (is_cout_select(e)) {
                self(self, *e.args[1]);
            } else if (e.kind == kir::ExprKind::Binary && e.bop == kir::BinaryOp::add) {
                self(self, *e.args[0]);
                self(self, *e.args[1]);
            } else if (is_acc(e)) {
                ++accs;
            } else if (!d.bias && is_bias(e)) {
                d.bias = true;
            } else if (d.residual < 0 && is_residual(e)) {
                d.residual = e.id;
            } else {
                ok = false;
            }
        };
        terms(terms, *v);
        if (!ok || accs != 1) return std::nullopt;
        return d;
    }

    void run(Value* begin, Value* end) {
        llvm::Type* f32 = b_.getFloatTy();
        llvm::Type* i64t = b_.getInt64Ty();
        // The geometry the runtime kernel takes (kConvNchwcF32Symbol), and the tile.
        auto* geo_t = llvm::ArrayType::get(i64t, kGeoFields);
        auto* geo = b_.CreateAlloca(geo_t, nullptr, "nchwc.geo");
        const std::optional<Direct> d = direct();
        const std::int64_t flags = (h_.blocked_input ? 1 : 0) | (h_.depthwise ? 2 : 0) | (d && d->silu ? 4 : 0);
        Value* fields[kGeoFields] = {i64(h_.cin), em_.index(h_.h), em_.index(h_.w_in), em_.index(h_.oh), em_.index(h_.ow),
                                     i64(h_.kh), i64(h_.kw), i64(h_.stride[0]), i64(h_.stride[1]), i64(h_.pad[0]),
                                     i64(h_.pad[1]), i64(h_.dilation[0]), i64(h_.dilation[1]), i64(flags), i64(h_.cout)};
        for (int f = 0; f < kGeoFields; ++f)
            b_.CreateStore(fields[f], b_.CreateConstInBoundsGEP2_64(geo_t, geo, 0, static_cast<std::uint64_t>(f)));

        Value* x = em_.buffer_ptr(h_.x);
        Value* w = em_.buffer_ptr(h_.w);
        Value* blocks = em_.index(h_.blocks);
        Value* npix = em_.index(h_.npix);
        Value* rblocks = b_.CreateSDiv(b_.CreateAdd(blocks, i64(h_.block_rows - 1)), i64(h_.block_rows));
        Value* cblocks = b_.CreateSDiv(b_.CreateAdd(npix, i64(h_.col_block - 1)), i64(h_.col_block));
        Value* per_sample = b_.CreateMul(rblocks, cblocks);

        llvm::Module& mod = *fn_->getParent();
        auto* ptr_t = llvm::PointerType::getUnqual(ctx_);
        llvm::Type* f64t = b_.getDoubleTy();
        llvm::FunctionCallee kernel = mod.getOrInsertFunction(
            kConvNchwcF32Symbol, llvm::FunctionType::get(b_.getVoidTy(), {ptr_t, ptr_t, ptr_t, ptr_t, ptr_t, ptr_t, i64t, i64t,
                                                                          i64t, i64t, i64t, f64t, f64t},
                                                         false));
        auto* none = llvm::ConstantPointerNull::get(ptr_t);
        const double inf = std::numeric_limits<double>::infinity();
        // The tile of the general epilogue (none where the kernel stores the output itself).
        const std::int64_t ldb = kChunkPixels * kLanes;
        llvm::AllocaInst* tile = nullptr;
        if (!d) {
            tile = b_.CreateAlloca(llvm::ArrayType::get(f32, static_cast<std::uint64_t>(h_.block_rows * ldb)), nullptr, "nchwc.tile");
            tile->setAlignment(llvm::Align(64));
        }

        const bool vector_epilogue = !d && em_.lanes_ok(h_.lane_var);
        if (!d && !vector_epilogue) em_.need_loop_vectoriser();
        loop(begin, end, i64(1), "nchwc.outer", [&](Value* outer) {
            Value* sample = b_.CreateSDiv(outer, per_sample);
            Value* ob0 = b_.CreateMul(b_.CreateSRem(b_.CreateSDiv(outer, cblocks), rblocks), i64(h_.block_rows));
            Value* ob1 = smin(b_.CreateAdd(ob0, i64(h_.block_rows)), blocks);
            Value* pa = b_.CreateMul(b_.CreateSRem(outer, cblocks), i64(h_.col_block));
            Value* pb = smin(b_.CreateAdd(pa, i64(h_.col_block)), npix);
            em_.bind_var(h_.batch_var, sample);
            Value* xs = b_.CreateInBoundsGEP(f32, x, em_.index(h_.x_offset));
            if (d) {  // into the output: block ob0's pixel pa at the store's index there (lane 0)
                em_.bind_var(h_.block_var, ob0);
                em_.bind_var(h_.col_var, pa);
                em_.bind_var(h_.lane_var, i64(0));
                Value* ix = em_.index(d->store->index);
                Value* at = b_.CreateInBoundsGEP(f32, em_.buffer_ptr(h_.out), ix);
                Value* res = d->residual >= 0 ? b_.CreateInBoundsGEP(f32, em_.buffer_ptr(d->residual), ix) : none;
                b_.CreateCall(kernel, {geo, xs, w, d->bias ? em_.buffer_ptr(h_.bias) : none, res, at,
                                       b_.CreateMul(npix, i64(kLanes)), ob0, ob1, pa, pb,
                                       llvm::ConstantFP::get(f64t, d->lo), llvm::ConstantFP::get(f64t, d->hi)});
                return;
            }
            loop(pa, pb, i64(kChunkPixels), "nchwc.chunk", [&](Value* pc) {
                Value* pe = smin(b_.CreateAdd(pc, i64(kChunkPixels)), pb);
                b_.CreateCall(kernel, {geo, xs, w, none, none, tile, i64(ldb), ob0, ob1, pc, pe, llvm::ConstantFP::get(f64t, -inf),
                                       llvm::ConstantFP::get(f64t, inf)});
                Value* np = b_.CreateSub(pe, pc);
                loop(ob0, ob1, i64(1), "nchwc.ob", [&](Value* ob) {
                    em_.bind_var(h_.block_var, ob);
                    Value* rows = b_.CreateInBoundsGEP(f32, tile, b_.CreateMul(b_.CreateSub(ob, ob0), i64(ldb)));
                    loop(i64(0), np, i64(1), "nchwc.p", [&](Value* r) {
                        em_.bind_var(h_.col_var, b_.CreateAdd(pc, r));
                        Value* lanes = b_.CreateInBoundsGEP(f32, rows, b_.CreateMul(r, i64(kLanes)));
                        if (vector_epilogue) {  // in vectors of the target's width, emitted as such
                            auto* vt = llvm::FixedVectorType::get(f32, static_cast<unsigned>(width_));
                            for (int l = 0; l < kLanes; l += width_)
                                em_.epilogue_lanes(b_.CreateAlignedLoad(vt, b_.CreateInBoundsGEP(f32, lanes, i64(l)), llvm::Align(4)),
                                                   h_.lane_var, i64(l), nullptr);
                            return;
                        }
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
    const kir::Kernel& kern_;
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

void conv_nchwc_f32(const std::int64_t* geo, const float* x, const float* w, const float* bias, const float* residual,
                    float* out, std::int64_t ldb, std::int64_t ob0, std::int64_t ob1, std::int64_t p0, std::int64_t p1, double lo,
                    double hi) noexcept {
    cpu::NchwcGeometry g;
    g.cin = geo[0], g.h = geo[1], g.w = geo[2], g.oh = geo[3], g.ow = geo[4], g.kh = geo[5], g.kw = geo[6];
    g.sh = geo[7], g.sw = geo[8], g.ph = geo[9], g.pw = geo[10], g.dh = geo[11], g.dw = geo[12];
    g.blocked_input = (geo[13] & 1) != 0;
    g.depthwise = (geo[13] & 2) != 0;
    g.silu = (geo[13] & 4) != 0;
    g.cout = geo[14];
    g.residual = residual;
    g.lo = lo;
    g.hi = hi;
    cpu::conv_nchwc_f32(cpu::kernel_cpu_isa(), g, x, w, bias, out, ldb, ob0, ob1, p0, p1);
}

}  // namespace kiln::tiers::llvm_tier
