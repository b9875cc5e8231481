// KIR -> LLVM IR (see codegen.h for what is generated). Only IRBuilder-level LLVM here; the
// JIT, the pass pipeline and dumping live in llvm_tier.cpp.
#include "tiers/llvm/codegen.h"
#include "tiers/kir_forms.h"
#include "tiers/test_hook.h"
#include "tiers/vmath_coeffs.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>

#include <cmath>
#include <limits>
#include <unordered_map>
#include <vector>

namespace kiln::tiers::llvm_tier {
namespace {

using llvm::Value;
using kir::BinaryOp;
using kir::Expr;
using kir::ExprKind;
using kir::Type;
using kir::UnaryOp;

[[noreturn]] void fail(Bailout b, const std::string& msg) { throw CodegenError{b, msg}; }

bool is_signed_int(Type t) { return t == Type::i8 || t == Type::i32 || t == Type::i64 || t == Type::index; }
bool is_int(Type t) { return is_signed_int(t) || t == Type::u8; }

// f32 polynomial coefficients: tiers/vmath_coeffs.h (shared with tier 1).
using namespace vmath;

class Gen final : public KernelEmitter {
public:
    Gen(const kir::Kernel& k, const kir::Specialization& spec, llvm::Module& m)
        : k_(k), spec_(spec), m_(m), ctx_(m.getContext()), b_(ctx_) {}

    // ---- KernelEmitter (for the blocked GEMM of matmul kernels) ----
    llvm::IRBuilderBase& builder() override { return b_; }
    llvm::Function* function() override { return fn_; }
    Value* buffer_ptr(int id) override {
        buffer(id);
        return bufs_[static_cast<std::size_t>(id)];
    }
    Value* index(const kir::ExprRef& e) override {
        memo_.clear();
        Value* v = emit_typed(e, Type::index);
        memo_.clear();
        return v;
    }
    void bind_var(int var, Value* v) override {
        if (var < 0 || var >= k_.num_vars) fail(Bailout::backend_error, "malformed kernel: loop variable out of range");
        vars_[static_cast<std::size_t>(var)] = v;
    }
    void epilogue(Value* acc) override {
        const kir::MatmulHint& h = *k_.matmul;
        if (h.acc_temp < 0 || static_cast<std::size_t>(h.acc_temp) >= temps_.size())
            fail(Bailout::backend_error, "malformed kernel: matmul accumulator out of range");
        b_.CreateStore(acc, temps_[static_cast<std::size_t>(h.acc_temp)]);
        for (const auto& s : h.epilogue) emit_stmt(*s);
        memo_.clear();
    }

    void run(const CodegenTarget& target, const std::string& fn_name) {
        auto* ptr = llvm::PointerType::getUnqual(ctx_);
        auto* i64 = b_.getInt64Ty();
        auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, i64, i64}, false);
        fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, fn_name, m_);
        for (unsigned a = 0; a < 2; ++a) {
            fn_->addParamAttr(a, llvm::Attribute::NoAlias);
            fn_->addParamAttr(a, llvm::Attribute::NoCapture);
            fn_->addParamAttr(a, llvm::Attribute::ReadOnly);
        }
        fn_->addFnAttr(llvm::Attribute::NoUnwind);
        fn_->addFnAttr("no-trapping-math", "true");
        if (!target.cpu.empty()) fn_->addFnAttr("target-cpu", target.cpu);
        if (!target.features.empty()) fn_->addFnAttr("target-features", target.features);
        if (target.prefer_512) fn_->addFnAttr("prefer-vector-width", "512");

        auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
        b_.SetInsertPoint(entry);
        llvm::FastMathFlags fmf;
        fmf.setAllowContract(true);
        b_.setFastMathFlags(fmf);

        setup_buffers(fn_->getArg(0));
        setup_params(fn_->getArg(1));
        for (std::size_t t = 0; t < k_.temps.size(); ++t)
            temps_.push_back(b_.CreateAlloca(ltype(k_.temps[t]), nullptr, "t" + std::to_string(t)));
        never_nan_.assign(k_.temps.size(), 1);
        find_nan_temps(k_.body);
        if (k_.num_vars < 0) fail(Bailout::backend_error, "malformed kernel: negative num_vars");
        vars_.assign(static_cast<std::size_t>(k_.num_vars), nullptr);

        if (gemm_applies(k_)) {
            emit_gemm(k_, target, *this, fn_->getArg(2), fn_->getArg(3));
        } else {
            emit_loop_over(fn_->getArg(2), fn_->getArg(3), "outer", [&](Value* iv) {
                outer_ = iv;
                prefetch_next_rows(iv);
                for (const auto& s : k_.body) emit_stmt(*s);
            });
        }
        b_.CreateRetVoid();
    }

private:
    // ---- types and setup ----

    llvm::Type* ltype(Type t) {
        switch (t) {
        case Type::f32: return b_.getFloatTy();
        case Type::f64: return b_.getDoubleTy();
        case Type::i8: case Type::u8: return b_.getInt8Ty();
        case Type::i32: return b_.getInt32Ty();
        case Type::i64: case Type::index: return b_.getInt64Ty();
        case Type::boolean: return b_.getInt1Ty();
        }
        fail(Bailout::unsupported_dtype, "unknown KIR type");
    }
    llvm::Type* storage_type(DType d) {
        switch (d) {
        case DType::f32: return b_.getFloatTy();
        case DType::f64: return b_.getDoubleTy();
        case DType::f16: case DType::bf16: return b_.getInt16Ty();
        case DType::i8: case DType::u8: case DType::boolean: return b_.getInt8Ty();
        case DType::i32: return b_.getInt32Ty();
        case DType::i64: return b_.getInt64Ty();
        }
        fail(Bailout::unsupported_dtype, "unknown buffer dtype");
    }

    void setup_buffers(Value* arg) {
        const std::size_t n = k_.buffers.size();
        llvm::MDBuilder mdb(ctx_);
        llvm::MDNode* domain = mdb.createAnonymousAliasScopeDomain("kiln.buffers");
        std::vector<llvm::Metadata*> scopes;
        for (std::size_t i = 0; i < n; ++i) scopes.push_back(mdb.createAnonymousAliasScope(domain, k_.buffers[i].name));
        for (std::size_t i = 0; i < n; ++i) {
            std::vector<llvm::Metadata*> others;
            for (std::size_t j = 0; j < n; ++j)
                if (j != i) others.push_back(scopes[j]);
            scope_.push_back(llvm::MDNode::get(ctx_, {scopes[i]}));
            noalias_.push_back(llvm::MDNode::get(ctx_, others));
            Value* slot = b_.CreateConstInBoundsGEP1_64(llvm::PointerType::getUnqual(ctx_), arg, i);
            auto* p = b_.CreateAlignedLoad(llvm::PointerType::getUnqual(ctx_), slot, llvm::Align(8),
                                           k_.buffers[i].name.empty() ? "buf" : k_.buffers[i].name);
            p->setMetadata(llvm::LLVMContext::MD_invariant_load, llvm::MDNode::get(ctx_, {}));
            bufs_.push_back(p);
        }
    }

    void setup_params(Value* arg) {
        for (std::size_t i = 0; i < k_.params.size() || i < k_.param_sources.size(); ++i) {
            if (i < spec_.params.size() && spec_.params[i]) {
                params_.push_back(b_.getInt64(static_cast<std::uint64_t>(*spec_.params[i])));
                continue;
            }
            Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), arg, i);
            auto* p = b_.CreateAlignedLoad(b_.getInt64Ty(), slot, llvm::Align(8), "p" + std::to_string(i));
            p->setMetadata(llvm::LLVMContext::MD_invariant_load, llvm::MDNode::get(ctx_, {}));
            params_.push_back(p);
        }
    }

    // ---- prefetching the next row ----

    // Whether e is index arithmetic on the outer index, params and constants only (`outer`
    // set when it mentions the outer index).
    static bool outer_offset(const Expr& e, bool& outer) {
        switch (e.kind) {
        case ExprKind::Const: case ExprKind::Param: return true;
        case ExprKind::Outer: outer = true; return true;
        case ExprKind::Unary: case ExprKind::Binary: case ExprKind::Cast: break;
        default: return false;
        }
        for (const auto& a : e.args)
            if (!outer_offset(*a, outer)) return false;
        return true;
    }
    // X in an index `X + v` (either order) of loop variable v, X an outer offset (above).
    static kir::ExprRef row_start(const Expr& idx, int v) {
        if (idx.kind != ExprKind::Binary || idx.bop != BinaryOp::add) return nullptr;
        for (std::size_t i = 0; i < 2; ++i) {
            const Expr& other = *idx.args[1 - i];
            bool outer = false;
            if (other.kind == ExprKind::Var && other.id == v && outer_offset(*idx.args[i], outer) && outer) return idx.args[i];
        }
        return nullptr;
    }
    struct RowAccess {
        int buffer;
        kir::ExprRef start;      // of the row, for the outer index
        const kir::Stmt* loop;   // that runs over it
    };
    static void row_loads(const Expr& e, const kir::Stmt& loop, std::vector<RowAccess>& out) {
        if (e.kind == ExprKind::Load)
            if (kir::ExprRef x = row_start(*e.args[0], loop.var)) out.push_back({e.id, x, &loop});
        for (const auto& a : e.args) row_loads(*a, loop, out);
    }

    // Row kernels (softmax, norms) make several passes over each row of their inputs and
    // output, one row per outer index. The first pass over a row waits on memory: a row
    // often fills a 4 KB page, which the hardware prefetchers do not cross, and the passes
    // that follow cannot start before the first one's reduction. So at the start of row
    // `outer`, every row that a top-level loop of the body reads or writes at `X(outer) + v`
    // is prefetched for row outer + 1, one instruction per 64-byte line (for writing where
    // the buffer is an output); its passes then find it in cache. Prefetches never fault,
    // so the rows past the end of the range or buffer are harmless.
    void prefetch_next_rows(Value* iv) {
        std::vector<RowAccess> rows;
        for (const auto& s : k_.body) {
            bool outer = false;
            if (s->kind != kir::StmtKind::Loop || !outer_offset(*s->begin, outer) || !outer_offset(*s->end, outer)) continue;
            for (const auto& st : s->body) {
                if (st->kind == kir::StmtKind::Store)
                    if (kir::ExprRef x = row_start(*st->index, s->var)) rows.push_back({st->buffer, x, s.get()});
                if (st->kind != kir::StmtKind::Loop && st->value) row_loads(*st->value, *s, rows);
            }
        }
        std::vector<char> done(k_.buffers.size(), 0);
        Value* saved = outer_;
        outer_ = b_.CreateAdd(iv, b_.getInt64(1));
        for (const RowAccess& r : rows) {
            if (r.buffer < 0 || static_cast<std::size_t>(r.buffer) >= done.size() || done[static_cast<std::size_t>(r.buffer)]) continue;
            done[static_cast<std::size_t>(r.buffer)] = 1;
            memo_.clear();
            const DType d = buffer(r.buffer).dtype;
            Value* begin = emit_typed(r.loop->begin, Type::index);
            Value* end = emit_typed(r.loop->end, Type::index);
            Value* first = b_.CreateAdd(emit_typed(r.start, Type::index), begin);
            Value* base = b_.CreateGEP(storage_type(d), bufs_[static_cast<std::size_t>(r.buffer)], first);  // not inbounds
            Value* bytes = b_.CreateMul(b_.CreateSub(end, begin), b_.getInt64(dtype_size(d)));
            Value* lines = b_.CreateAShr(b_.CreateAdd(bytes, b_.getInt64(63)), 6);
            const bool write = buffer(r.buffer).output;
            emit_loop_over(b_.getInt64(0), lines, "prefetch", [&](Value* line) {
                Value* p = b_.CreateGEP(b_.getInt8Ty(), base, b_.CreateShl(line, 6));
                b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {p->getType()},
                                   {p, b_.getInt32(write ? 1 : 0), b_.getInt32(3), b_.getInt32(1)});
            });
        }
        outer_ = saved;
        memo_.clear();
    }

    // ---- statements ----

    // for (iv = begin; iv < end; ++iv) body(iv), as a guarded do-while (already rotated).
    template <class F> void emit_loop_over(Value* begin, Value* end, const std::string& name, F body) {
        auto* pre = b_.GetInsertBlock();
        auto* head = llvm::BasicBlock::Create(ctx_, name + ".body", fn_);
        auto* exit = llvm::BasicBlock::Create(ctx_, name + ".exit", fn_);
        b_.CreateCondBr(b_.CreateICmpSLT(begin, end), head, exit);
        b_.SetInsertPoint(head);
        auto* iv = b_.CreatePHI(b_.getInt64Ty(), 2, name);
        iv->addIncoming(begin, pre);
        body(iv);
        Value* next = b_.CreateAdd(iv, b_.getInt64(1), name + ".next", /*HasNUW=*/false, /*HasNSW=*/true);
        iv->addIncoming(next, b_.GetInsertBlock());
        b_.CreateCondBr(b_.CreateICmpSLT(next, end), head, exit);
        b_.SetInsertPoint(exit);
    }

    void emit_stmt(const kir::Stmt& s) {
        memo_.clear();  // values of one statement's expressions only (straight-line code)
        switch (s.kind) {
        case kir::StmtKind::Loop: {
            if (s.var < 0 || s.var >= k_.num_vars) fail(Bailout::backend_error, "malformed kernel: loop variable out of range");
            Value* begin = emit_typed(s.begin, Type::index);
            Value* end = emit_typed(s.end, Type::index);
            Value* saved = vars_[static_cast<std::size_t>(s.var)];
            emit_loop_over(begin, end, "v" + std::to_string(s.var), [&](Value* iv) {
                vars_[static_cast<std::size_t>(s.var)] = iv;
                for (const auto& inner : s.body) emit_stmt(*inner);
            });
            vars_[static_cast<std::size_t>(s.var)] = saved;
            memo_.clear();
            return;
        }
        case kir::StmtKind::Store: {
            const kir::Buffer& buf = buffer(s.buffer);
            if (!s.value || s.value->type != kir::compute_type(buf.dtype))
                fail(Bailout::unsupported_dtype, "store of a value that is not the compute type of buffer '" + buf.name + "'");
            Value* idx = emit_typed(s.index, Type::index);
            Value* v = emit(s.value);
            store_elem(s.buffer, idx, v);
            return;
        }
        case kir::StmtKind::Assign: {
            if (s.var < 0 || static_cast<std::size_t>(s.var) >= temps_.size())
                fail(Bailout::backend_error, "malformed kernel: temp out of range");
            const Type tt = k_.temps[static_cast<std::size_t>(s.var)];
            if (!s.value || s.value->type != tt) fail(Bailout::backend_error, "malformed kernel: assignment of another type");
            Value* v = emit_accumulation(s.var, *s.value);
            if (!v) v = emit(s.value);
            b_.CreateStore(v, temps_[static_cast<std::size_t>(s.var)]);
            return;
        }
        }
        fail(Bailout::backend_error, "malformed kernel: unknown statement");
    }

    // Clears never_nan_ for the temps that may hold NaN: those with an assignment that is
    // neither a constant other than NaN nor a NaN-skipping extreme of themselves.
    void find_nan_temps(const std::vector<kir::StmtRef>& ss) {
        for (const auto& s : ss) {
            if (s->kind == kir::StmtKind::Loop) find_nan_temps(s->body);
            if (s->kind != kir::StmtKind::Assign || !s->value || s->var < 0 ||
                static_cast<std::size_t>(s->var) >= never_nan_.size())
                continue;
            bool max = false;
            const Expr& v = *s->value;
            const bool ok = (v.kind == ExprKind::Const && !std::isnan(v.f)) || tiers::nan_skipping_extreme(s->var, v, max);
            if (!ok) never_nan_[static_cast<std::size_t>(s->var)] = 0;
        }
    }

    // `t = x > t ? x : t` (`<`: min) where t is never NaN: maxnum(t, x'), with x' = x > -inf
    // ? x : -inf (a NaN x becomes the identity; one max instruction). Neither operand can be
    // NaN, so maxnum's nnan flag states a fact, and nnan + nsz are what the loop vectoriser
    // needs to see a max reduction. Only the sign of an equal zero may differ from the select.
    Value* emit_nan_skipping_extreme(int t, const Expr& value) {
        bool max = false;
        const kir::ExprRef x = tiers::nan_skipping_extreme(t, value, max);
        if (!x || !never_nan_[static_cast<std::size_t>(t)]) return nullptr;
        Value* xv = emit(x);
        llvm::Type* ty = xv->getType();
        Value* id = fconst(ty, max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity());
        Value* xs = b_.CreateSelect(max ? b_.CreateFCmpOGT(xv, id) : b_.CreateFCmpOLT(xv, id), xv, id);
        Value* acc = b_.CreateLoad(ty, temps_[static_cast<std::size_t>(t)]);
        Value* r = b_.CreateBinaryIntrinsic(max ? llvm::Intrinsic::maxnum : llvm::Intrinsic::minnum, acc, xs);
        llvm::FastMathFlags f;
        f.setNoNaNs();
        f.setNoSignedZeros();
        llvm::cast<llvm::Instruction>(r)->setFastMathFlags(f);
        return r;
    }

    // `t = t + x`, `t = max(t, x)`, `t = min(t, x)` on floats (either operand order) and the
    // NaN-skipping extremes above: the reduction forms the loop vectoriser recognises. Null
    // when `value` is not one.
    Value* emit_accumulation(int t, const Expr& value) {
        if (value.kind == ExprKind::Select) return emit_nan_skipping_extreme(t, value);
        if (value.kind != ExprKind::Binary || !kir::is_float(value.type)) return nullptr;
        if (value.bop != BinaryOp::add && value.bop != BinaryOp::max && value.bop != BinaryOp::min) return nullptr;
        auto is_t = [t](const kir::ExprRef& e) { return e->kind == ExprKind::Temp && e->id == t; };
        int other = is_t(value.args[0]) ? 1 : is_t(value.args[1]) ? 0 : -1;
        if (other < 0) return nullptr;
        Value* x = emit(value.args[static_cast<std::size_t>(other)]);
        Value* acc = b_.CreateLoad(ltype(value.type), temps_[static_cast<std::size_t>(t)]);
        Value* lhs = other == 1 ? acc : x;
        Value* rhs = other == 1 ? x : acc;
        if (value.bop == BinaryOp::add) {
            Value* r = b_.CreateFAdd(lhs, rhs);
            if (auto* inst = llvm::dyn_cast<llvm::Instruction>(r)) inst->setHasAllowReassoc(true);
            return r;
        }
        // NaN-propagating like the interpreter; only the sign of an equal zero may differ.
        return b_.CreateBinaryIntrinsic(value.bop == BinaryOp::max ? llvm::Intrinsic::maximum : llvm::Intrinsic::minimum,
                                        lhs, rhs);
    }

    const kir::Buffer& buffer(int id) {
        if (id < 0 || static_cast<std::size_t>(id) >= k_.buffers.size())
            fail(Bailout::backend_error, "malformed kernel: buffer id out of range");
        return k_.buffers[static_cast<std::size_t>(id)];
    }

    template <class I> I* tag_buffer(I* inst, int id) {
        inst->setMetadata(llvm::LLVMContext::MD_alias_scope, scope_[static_cast<std::size_t>(id)]);
        inst->setMetadata(llvm::LLVMContext::MD_noalias, noalias_[static_cast<std::size_t>(id)]);
        return inst;
    }

    Value* load_elem(int id, Value* idx) {
        const DType d = buffer(id).dtype;
        llvm::Type* st = storage_type(d);
        Value* p = b_.CreateInBoundsGEP(st, bufs_[static_cast<std::size_t>(id)], idx);
        Value* raw = tag_buffer(b_.CreateAlignedLoad(st, p, llvm::Align(dtype_size(d))), id);
        switch (d) {
        case DType::f16: return half_to_float(raw);
        case DType::bf16: return bf16_to_float(b_, raw);
        case DType::boolean: return b_.CreateICmpNE(raw, b_.getInt8(0));
        default: return raw;
        }
    }

    void store_elem(int id, Value* idx, Value* v) {
        const DType d = buffer(id).dtype;
        llvm::Type* st = storage_type(d);
        switch (d) {
        case DType::f16: v = float_to_half(v); break;
        case DType::bf16: v = float_to_bf16(v); break;
        case DType::boolean: v = b_.CreateZExt(v, b_.getInt8Ty()); break;
        default: break;
        }
        Value* p = b_.CreateInBoundsGEP(st, bufs_[static_cast<std::size_t>(id)], idx);
        tag_buffer(b_.CreateAlignedStore(v, p, llvm::Align(dtype_size(d))), id);
    }

    // ---- f16 / bf16 (bit-exact with kiln::Half and kiln::BFloat16) ----

    Value* u32(std::uint32_t v) { return b_.getInt32(v); }

    Value* half_to_float(Value* h16) {
        Value* h = b_.CreateZExt(h16, b_.getInt32Ty());
        Value* sign = b_.CreateShl(b_.CreateAnd(h, u32(0x8000)), 16);
        Value* em = b_.CreateAnd(h, u32(0x7fff));
        Value* exp = b_.CreateLShr(em, 10);
        Value* mant = b_.CreateAnd(h, u32(0x3ff));
        Value* normal = b_.CreateAdd(b_.CreateShl(em, 13), u32(112u << 23));
        Value* infnan = b_.CreateOr(u32(0x7f800000u), b_.CreateShl(mant, 13));
        // Subnormal (and zero): mant * 2^-24 is exact in f32.
        Value* subf = b_.CreateFMul(b_.CreateUIToFP(mant, b_.getFloatTy()), llvm::ConstantFP::get(b_.getFloatTy(), 0x1p-24));
        Value* sub = b_.CreateBitCast(subf, b_.getInt32Ty());
        Value* mag = b_.CreateSelect(b_.CreateICmpEQ(exp, u32(0)), sub,
                                     b_.CreateSelect(b_.CreateICmpEQ(exp, u32(31)), infnan, normal));
        return b_.CreateBitCast(b_.CreateOr(sign, mag), b_.getFloatTy());
    }

    Value* float_to_half(Value* f) {
        Value* x = b_.CreateBitCast(f, b_.getInt32Ty());
        Value* sign = b_.CreateAnd(b_.CreateLShr(x, 16), u32(0x8000));
        Value* mant = b_.CreateAnd(x, u32(0x7fffff));
        Value* exp = b_.CreateAnd(b_.CreateLShr(x, 23), u32(0xff));
        Value* e = b_.CreateSub(exp, u32(112));  // signed: exp - 127 + 15
        // Normal half: round the 13 dropped bits to nearest even (a carry into the exponent
        // is correct, up to infinity).
        Value* half = b_.CreateOr(b_.CreateOr(sign, b_.CreateShl(e, 10)), b_.CreateLShr(mant, 13));
        Value* rem = b_.CreateAnd(mant, u32(0x1fff));
        Value* up = b_.CreateOr(b_.CreateICmpUGT(rem, u32(0x1000)),
                                b_.CreateAnd(b_.CreateICmpEQ(rem, u32(0x1000)),
                                             b_.CreateICmpNE(b_.CreateAnd(half, u32(1)), u32(0))));
        Value* normal = b_.CreateAdd(half, b_.CreateZExt(up, b_.getInt32Ty()));
        // Subnormal half (e <= 0): shift 14 - e, clamped to [1, 31] (a shift past 24 gives 0
        // with no rounding up, which is the zero of the reference).
        Value* m = b_.CreateOr(mant, u32(0x800000));
        Value* shift = b_.CreateSub(u32(14), e);
        shift = b_.CreateSelect(b_.CreateICmpSGT(shift, u32(31)), u32(31), shift);
        shift = b_.CreateSelect(b_.CreateICmpSLT(shift, u32(1)), u32(1), shift);
        Value* hm = b_.CreateLShr(m, shift);
        Value* rem2 = b_.CreateAnd(m, b_.CreateSub(b_.CreateShl(u32(1), shift), u32(1)));
        Value* halfway = b_.CreateShl(u32(1), b_.CreateSub(shift, u32(1)));
        Value* up2 = b_.CreateOr(b_.CreateICmpUGT(rem2, halfway),
                                 b_.CreateAnd(b_.CreateICmpEQ(rem2, halfway),
                                              b_.CreateICmpNE(b_.CreateAnd(hm, u32(1)), u32(0))));
        Value* sub = b_.CreateOr(sign, b_.CreateAdd(hm, b_.CreateZExt(up2, b_.getInt32Ty())));
        Value* infnan = b_.CreateOr(b_.CreateOr(sign, u32(0x7c00)),
                                    b_.CreateSelect(b_.CreateICmpNE(mant, u32(0)), u32(0x200), u32(0)));
        Value* ovf = b_.CreateOr(sign, u32(0x7c00));
        Value* r = b_.CreateSelect(b_.CreateICmpSLE(e, u32(0)), sub, normal);
        r = b_.CreateSelect(b_.CreateICmpSGE(e, u32(31)), ovf, r);
        r = b_.CreateSelect(b_.CreateICmpEQ(exp, u32(0xff)), infnan, r);
        return b_.CreateTrunc(r, b_.getInt16Ty());
    }

    Value* float_to_bf16(Value* f) {
        Value* x = b_.CreateBitCast(f, b_.getInt32Ty());
        Value* hi = b_.CreateLShr(x, 16);
        Value* isnan = b_.CreateICmpUGT(b_.CreateAnd(x, u32(0x7fffffff)), u32(0x7f800000));
        Value* nanv = b_.CreateOr(hi, u32(0x40));
        Value* rounding = b_.CreateAdd(u32(0x7fff), b_.CreateAnd(hi, u32(1)));
        Value* rounded = b_.CreateLShr(b_.CreateAdd(x, rounding), 16);
        return b_.CreateTrunc(b_.CreateSelect(isnan, nanv, rounded), b_.getInt16Ty());
    }

    // ---- expressions ----

    Value* emit_typed(const kir::ExprRef& e, Type want) {
        if (!e || e->type != want) fail(Bailout::backend_error, "malformed kernel: expression of an unexpected type");
        return emit(e);
    }

    Value* emit(const kir::ExprRef& e) {
        if (!e) fail(Bailout::backend_error, "malformed kernel: null expression");
        auto it = memo_.find(e.get());
        if (it != memo_.end()) return it->second;
        Value* v = emit_uncached(*e);
        memo_.emplace(e.get(), v);
        return v;
    }

    Value* emit_uncached(const Expr& e) {
        switch (e.kind) {
        case ExprKind::Const:
            if (kir::is_float(e.type)) return llvm::ConstantFP::get(ltype(e.type), e.f);
            if (e.type == Type::boolean) return b_.getInt1(e.i != 0);
            return llvm::ConstantInt::get(ltype(e.type), static_cast<std::uint64_t>(e.i), true);
        case ExprKind::Param:
            if (e.id < 0 || static_cast<std::size_t>(e.id) >= params_.size())
                fail(Bailout::backend_error, "malformed kernel: param out of range");
            return params_[static_cast<std::size_t>(e.id)];
        case ExprKind::Outer: return outer_;
        case ExprKind::Var: {
            if (e.id < 0 || e.id >= k_.num_vars || !vars_[static_cast<std::size_t>(e.id)])
                fail(Bailout::backend_error, "malformed kernel: loop variable used outside its loop");
            return vars_[static_cast<std::size_t>(e.id)];
        }
        case ExprKind::Temp: {
            if (e.id < 0 || static_cast<std::size_t>(e.id) >= temps_.size() || k_.temps[static_cast<std::size_t>(e.id)] != e.type)
                fail(Bailout::backend_error, "malformed kernel: bad temp reference");
            return b_.CreateLoad(ltype(e.type), temps_[static_cast<std::size_t>(e.id)]);
        }
        case ExprKind::Load: {
            const kir::Buffer& buf = buffer(e.id);
            if (e.type != kir::compute_type(buf.dtype))
                fail(Bailout::unsupported_dtype, "load of type " + std::string(kir::type_name(e.type)) + " from " +
                                                     std::string(dtype_name(buf.dtype)) + " buffer '" + buf.name + "'");
            if (e.args.size() != 1) fail(Bailout::backend_error, "malformed kernel: load arity");
            return load_elem(e.id, emit_typed(e.args[0], Type::index));
        }
        case ExprKind::Unary:
            if (e.args.size() != 1) fail(Bailout::backend_error, "malformed kernel: unary arity");
            return emit_unary(e.uop, e.args[0]->type, emit(e.args[0]));
        case ExprKind::Binary:
            if (e.args.size() != 2 || e.args[0]->type != e.args[1]->type)
                fail(Bailout::backend_error, "malformed kernel: binary operands");
            return emit_binary(e.bop, e.args[0]->type, emit(e.args[0]), emit(e.args[1]));
        case ExprKind::Select:
            if (e.args.size() != 3 || e.args[0]->type != Type::boolean || e.args[1]->type != e.type ||
                e.args[2]->type != e.type)
                fail(Bailout::backend_error, "malformed kernel: select operands");
            return b_.CreateSelect(emit(e.args[0]), emit(e.args[1]), emit(e.args[2]));
        case ExprKind::Cast:
            if (e.args.size() != 1) fail(Bailout::backend_error, "malformed kernel: cast arity");
            return emit_cast(e.args[0]->type, e.type, emit(e.args[0]));
        }
        fail(Bailout::backend_error, "malformed kernel: unknown expression");
    }

    [[noreturn]] void unsupported(std::string_view op, Type t) {
        fail(Bailout::unsupported_op, std::string(op) + " on " + std::string(kir::type_name(t)));
    }

    // ---- unary ----

    Value* emit_unary(UnaryOp op, Type t, Value* x) {
        if (kir::is_float(t)) return float_unary(op, t, x);
        if (t == Type::boolean) {
            if (op == UnaryOp::logical_not) return b_.CreateNot(x);
            unsupported(kir::op_name(op), t);
        }
        const bool s = is_signed_int(t);
        llvm::Type* ty = x->getType();
        Value* zero = llvm::ConstantInt::get(ty, 0);
        switch (op) {
        case UnaryOp::neg: return b_.CreateSub(zero, x);  // wraps: -INT_MIN == INT_MIN
        case UnaryOp::abs: return s ? b_.CreateSelect(b_.CreateICmpSLT(x, zero), b_.CreateSub(zero, x), x) : x;
        case UnaryOp::relu: return s ? b_.CreateSelect(b_.CreateICmpSGT(x, zero), x, zero) : x;
        case UnaryOp::sign:
            if (s) return b_.CreateSub(b_.CreateZExt(b_.CreateICmpSGT(x, zero), ty), b_.CreateZExt(b_.CreateICmpSLT(x, zero), ty));
            return b_.CreateZExt(b_.CreateICmpNE(x, zero), ty);
        default: unsupported(kir::op_name(op), t);
        }
    }

    Value* fconst(llvm::Type* ty, double v) { return llvm::ConstantFP::get(ty, v); }
    Value* isnan(Value* x) { return b_.CreateFCmpUNO(x, x); }
    Value* fma(Value* a, Value* b, Value* c) { return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {a->getType()}, {a, b, c}); }
    template <std::size_t N> Value* horner(const float (&c)[N], Value* x) {
        llvm::Type* ty = x->getType();
        Value* p = fconst(ty, c[0]);
        for (std::size_t i = 1; i < N; ++i) p = fma(p, x, fconst(ty, c[i]));
        return p;
    }
    Value* libm(const char* name, Value* x) {
        llvm::Type* d = b_.getDoubleTy();
        llvm::FunctionCallee f = m_.getOrInsertFunction(name, llvm::FunctionType::get(d, {d}, false));
        if (auto* fn = llvm::dyn_cast<llvm::Function>(f.getCallee())) {
            fn->addFnAttr(llvm::Attribute::NoUnwind);
            fn->addFnAttr(llvm::Attribute::WillReturn);
            fn->setDoesNotAccessMemory();
        }
        return b_.CreateCall(f, {x});
    }

    Value* float_unary(UnaryOp op, Type t, Value* x) {
        llvm::Type* ty = x->getType();
        const bool f32 = t == Type::f32;
        Value* zero = fconst(ty, 0.0);
        Value* one = fconst(ty, 1.0);
        switch (op) {
        case UnaryOp::neg: return b_.CreateFNeg(x);
        case UnaryOp::abs: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
        case UnaryOp::exp: return f32 ? exp_f32(x) : libm("exp", x);
        case UnaryOp::log: return f32 ? log_f32(x) : libm("log", x);
        case UnaryOp::sqrt: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
        case UnaryOp::rsqrt: return b_.CreateFDiv(one, b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x));
        case UnaryOp::reciprocal: return b_.CreateFDiv(one, x);
        case UnaryOp::sin: return f32 ? sincos_f32(x, false) : libm("sin", x);
        case UnaryOp::cos: return f32 ? sincos_f32(x, true) : libm("cos", x);
        case UnaryOp::tanh: return f32 ? tanh_f32(x) : libm("tanh", x);
        case UnaryOp::sigmoid: return sigmoid(x, f32);
        case UnaryOp::relu: return b_.CreateSelect(b_.CreateFCmpUGT(x, zero), x, zero);  // keeps NaN, relu(-0) = +0
        case UnaryOp::gelu_erf: {
            Value* s = b_.CreateFMul(x, fconst(ty, 0.70710678118654752440));
            Value* er = f32 ? erf_f32(s) : libm("erf", s);
            return b_.CreateFMul(b_.CreateFMul(fconst(ty, 0.5), x), b_.CreateFAdd(one, er));
        }
        case UnaryOp::gelu_tanh: {
            Value* x3 = b_.CreateFMul(b_.CreateFMul(b_.CreateFMul(fconst(ty, 0.044715), x), x), x);
            Value* in = b_.CreateFMul(fconst(ty, 0.79788456080286535588), b_.CreateFAdd(x, x3));
            // f32: 0.5 * (1 + tanh(u)) == sigmoid(2u) exactly, so gelu = x * sigmoid(2u): one
            // exp and one division instead of tanh's two branches (same NaN/inf results).
            if (f32) return b_.CreateFMul(x, sigmoid(b_.CreateFAdd(in, in), true));
            Value* th = libm("tanh", in);
            return b_.CreateFMul(b_.CreateFMul(fconst(ty, 0.5), x), b_.CreateFAdd(one, th));
        }
        case UnaryOp::silu: return b_.CreateFMul(x, sigmoid(x, f32));
        case UnaryOp::erf: return f32 ? erf_f32(x) : libm("erf", x);
        case UnaryOp::floor: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, x);
        case UnaryOp::ceil: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::ceil, x);
        case UnaryOp::round: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, x);
        case UnaryOp::sign: {
            Value* r = b_.CreateSelect(isnan(x), x, zero);
            r = b_.CreateSelect(b_.CreateFCmpOLT(x, zero), fconst(ty, -1.0), r);
            return b_.CreateSelect(b_.CreateFCmpOGT(x, zero), one, r);
        }
        case UnaryOp::logical_not: unsupported(kir::op_name(op), t);
        }
        unsupported(kir::op_name(op), t);
    }

    // Stable for both signs (as the interpreter): e = exp(-|x|); x >= 0 ? 1/(1+e) : e/(1+e).
    Value* sigmoid(Value* x, bool f32) {
        llvm::Type* ty = x->getType();
        Value* na = b_.CreateFNeg(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x));
        Value* e = f32 ? exp_f32(na) : libm("exp", na);
        Value* den = b_.CreateFAdd(fconst(ty, 1.0), e);
        // A true division: the divider runs beside the FMA pipes this code saturates (a
        // reciprocal estimate + Newton step measured 8% slower on the elementwise chain).
        Value* r = b_.CreateFDiv(fconst(ty, 1.0), den);
        return b_.CreateSelect(b_.CreateFCmpOGE(x, fconst(ty, 0.0)), r, b_.CreateFMul(e, r));
    }

    // Max error 1.06 ulp over all floats (measured against exp in double); exp(NaN) is NaN,
    // results are subnormal down to exp(-103.97) and overflow to inf from 88.73 on.
    // x = n ln2 + r with |r| <= ln2/2, exp(r) by a polynomial, 2^n applied as two factors
    // 2^n1 * 2^n2 (each normal for n in [-150, 128], so a subnormal result is rounded once).
    // No instruction turns NaN into a number: the clamps keep it and it reaches the result
    // through r, so no final select is needed (and no fptosi, which would be poison on NaN).
    Value* exp_f32(Value* x) {
        llvm::Type* ty = x->getType();
        // `x < lo ? lo : x` keeps NaN and is one max instruction (maxnum would make NaN lo).
        Value* xc = b_.CreateSelect(b_.CreateFCmpOLT(x, fconst(ty, -104.0)), fconst(ty, -104.0), x);
        xc = b_.CreateSelect(b_.CreateFCmpOGT(xc, fconst(ty, 89.0)), fconst(ty, 89.0), xc);
        // Adding 1.5 * 2^23 rounds to an integer (the sum's last bit is worth 1) and leaves
        // it in the low mantissa bits: t = magic + 254 + n and t1 = magic + 127 + n1, with
        // n = round(x log2e) and n1 = round(x log2e / 2), so n2 = n - n1 is within 1 of n1.
        constexpr double magic = 12582912.0;
        Value* t = fma(xc, fconst(ty, 1.44269504088896341), fconst(ty, magic + 254.0));
        Value* t1 = fma(xc, fconst(ty, 0.5 * 1.44269504088896341), fconst(ty, magic + 127.0));
        Value* n = b_.CreateFSub(t, fconst(ty, magic + 254.0));  // exact
        Value* r = fma(n, fconst(ty, -0.693359375), xc);         // ln2 in two parts: n * hi is exact
        r = fma(n, fconst(ty, 2.12194440e-4), r);
        Value* y = fma(horner(kExpP, r), r, fconst(ty, 1.0));
        // Shifted left by 23, the bits of t1 are those of 2^n1 (127 + n1 in the exponent field;
        // magic's bits fall off the top), and bits(t) - bits(t1) = 127 + n2 those of 2^n2.
        llvm::Type* ity = b_.getInt32Ty();
        Value* bt = b_.CreateBitCast(t, ity);
        Value* bt1 = b_.CreateBitCast(t1, ity);
        Value* s1 = b_.CreateBitCast(b_.CreateShl(bt1, 23), ty);
        Value* s2 = b_.CreateBitCast(b_.CreateShl(b_.CreateSub(bt, bt1), 23), ty);
        return b_.CreateFMul(b_.CreateFMul(y, s1), s2);
    }

    // Max error 0.83 ulp; log(<0) = NaN, log(±0) = -inf, log(inf) = inf, subnormals handled.
    Value* log_f32(Value* x) {
        llvm::Type* ty = x->getType();
        llvm::Type* i32 = b_.getInt32Ty();
        Value* sub = b_.CreateFCmpOLT(x, fconst(ty, 1.17549435e-38));
        Value* xs = b_.CreateSelect(sub, b_.CreateFMul(x, fconst(ty, 8388608.0)), x);
        Value* bits = b_.CreateBitCast(xs, i32);
        Value* e = b_.CreateSub(b_.CreateAnd(b_.CreateLShr(bits, 23), u32(0xff)),
                                b_.CreateSelect(sub, u32(126 + 23), u32(126)));
        Value* m = b_.CreateBitCast(b_.CreateOr(b_.CreateAnd(bits, u32(0x7fffff)), u32(0x3f000000)), ty);
        Value* lt = b_.CreateFCmpOLT(m, fconst(ty, 0.707106781186547524));
        Value* ef = b_.CreateSIToFP(b_.CreateSub(e, b_.CreateZExt(lt, i32)), ty);
        Value* t = b_.CreateFSub(b_.CreateSelect(lt, b_.CreateFAdd(m, m), m), fconst(ty, 1.0));
        Value* z = b_.CreateFMul(t, t);
        Value* y = b_.CreateFMul(b_.CreateFMul(t, z), horner(kLogP, t));
        y = fma(ef, fconst(ty, -2.12194440e-4), y);
        y = fma(z, fconst(ty, -0.5), y);
        Value* r = fma(ef, fconst(ty, 0.693359375), b_.CreateFAdd(t, y));
        r = b_.CreateSelect(b_.CreateFCmpOEQ(x, fconst(ty, std::numeric_limits<double>::infinity())), x, r);
        r = b_.CreateSelect(b_.CreateFCmpOEQ(x, fconst(ty, 0.0)), fconst(ty, -std::numeric_limits<double>::infinity()), r);
        r = b_.CreateSelect(b_.CreateFCmpOLT(x, fconst(ty, 0.0)), fconst(ty, std::numeric_limits<double>::quiet_NaN()), r);
        return b_.CreateSelect(isnan(x), x, r);
    }

    // Within 2 ulp of the interpreter (tier test); odd (tanh(-0) = -0), NaN stays NaN.
    Value* tanh_f32(Value* x) {
        llvm::Type* ty = x->getType();
        Value* a = b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
        Value* z = b_.CreateFMul(a, a);
        Value* small = fma(b_.CreateFMul(a, z), horner(kTanhP, z), a);
        // |x| >= 0.625: (1 - e) / (1 + e) with e = exp(-2|x|) in [0, 0.29], so the
        // denominator lies in [1, 2] (tanh(inf) = 1 falls out of e = 0).
        Value* e = exp_f32(b_.CreateFNeg(b_.CreateFAdd(a, a)));
        Value* large = b_.CreateFDiv(b_.CreateFSub(fconst(ty, 1.0), e), b_.CreateFAdd(fconst(ty, 1.0), e));
        Value* r = b_.CreateSelect(b_.CreateFCmpOLT(a, fconst(ty, 0.625)), small, large);
        return b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, r, x);
    }

    // Max error 2.44 ulp; odd, erf(±inf) = ±1, NaN stays NaN.
    Value* erf_f32(Value* x) {
        llvm::Type* ty = x->getType();
        Value* a = b_.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x),
                                            fconst(ty, 4.0));
        Value* y = b_.CreateFMul(a, a);
        Value* small = b_.CreateFMul(a, horner(kErfA, y));
        Value* v = b_.CreateFSub(b_.CreateFDiv(fconst(ty, 1.0), a), fconst(ty, 0.625));
        Value* large = b_.CreateFSub(fconst(ty, 1.0), b_.CreateFMul(exp_f32(b_.CreateFNeg(y)), horner(kErfB, v)));
        Value* r = b_.CreateSelect(b_.CreateFCmpOLT(a, fconst(ty, 1.0)), small, large);
        r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, r, x);
        return b_.CreateSelect(isnan(x), x, r);
    }

    // Max error 1.56 ulp for |x| <= 1e7 (all floats measured), accurate to ~1e12 (sampled);
    // sin(±0) = ±0; ±inf and NaN give NaN; past ~1e14 a value in [-1, 1], not sin(x).
    Value* sincos_f32(Value* x, bool cosine) {
        llvm::Type* ty = x->getType();
        llvm::Type* d = b_.getDoubleTy();
        Value* xd = b_.CreateFPExt(x, d);
        Value* j = b_.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, b_.CreateFMul(xd, fconst(d, 0.63661977236758134308)));
        Value* nj = b_.CreateFNeg(j);
        Value* r = fma(nj, fconst(d, 1.57079632673412561417e+00), xd);
        r = fma(nj, fconst(d, 6.07710050650619224932e-11), r);
        // The quadrant: saturating conversion, defined for every j (NaN gives 0).
        Value* q = b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {b_.getInt32Ty(), d}, {j});
        if (cosine) q = b_.CreateAdd(q, u32(1));
        // Past |x| ~ 1e14 the reduction is meaningless: keep r in range so that the result is
        // at least a value in [-1, 1] (the interpreter reduces exactly; see codegen.h).
        r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, r, fconst(d, -0.7853981633974483));
        r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, r, fconst(d, 0.7853981633974483));
        Value* rf = b_.CreateFPTrunc(r, ty);
        Value* z = b_.CreateFMul(rf, rf);
        Value* s = fma(b_.CreateFMul(rf, z), horner(kSinP, z), rf);
        Value* c = fma(b_.CreateFMul(z, z), horner(kCosP, z), fma(fconst(ty, -0.5), z, fconst(ty, 1.0)));
        Value* v = b_.CreateSelect(b_.CreateICmpNE(b_.CreateAnd(q, u32(1)), u32(0)), c, s);
        v = b_.CreateSelect(b_.CreateICmpNE(b_.CreateAnd(q, u32(2)), u32(0)), b_.CreateFNeg(v), v);
        if (!cosine) v = b_.CreateSelect(b_.CreateFCmpOEQ(x, fconst(ty, 0.0)), x, v);
        // ±inf and NaN give NaN (the clamp above turned them into numbers).
        Value* bad = b_.CreateFCmpUGE(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x),
                                      fconst(ty, std::numeric_limits<double>::infinity()));
        return b_.CreateSelect(bad, b_.CreateFSub(x, x), v);
    }

    // ---- binary ----

    Value* emit_binary(BinaryOp op, Type t, Value* x, Value* y) {
        if (kir::is_float(t) && tiers::corrupt_op_for_testing() == op) x = b_.CreateFAdd(x, fconst(x->getType(), 1.0));  // tiers/test_hook.h
        switch (op) {
        case BinaryOp::eq: case BinaryOp::ne: case BinaryOp::lt: case BinaryOp::le: case BinaryOp::gt: case BinaryOp::ge:
            return compare(op, t, x, y);
        default: break;
        }
        if (t == Type::boolean) {
            if (op == BinaryOp::logical_and) return b_.CreateAnd(x, y);
            if (op == BinaryOp::logical_or) return b_.CreateOr(x, y);
            unsupported(kir::op_name(op), t);
        }
        if (kir::is_float(t)) {
            switch (op) {
            case BinaryOp::add: return b_.CreateFAdd(x, y);
            case BinaryOp::sub: return b_.CreateFSub(x, y);
            case BinaryOp::mul: return b_.CreateFMul(x, y);
            case BinaryOp::div: return b_.CreateFDiv(x, y);
            case BinaryOp::pow: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x, y);
            case BinaryOp::max: case BinaryOp::min: {
                // isnan(x) ? x : isnan(y) ? y : (y > x ? y : x)   (max; `<` for min)
                Value* better = op == BinaryOp::max ? b_.CreateFCmpOGT(y, x) : b_.CreateFCmpOLT(y, x);
                Value* r = b_.CreateSelect(better, y, x);
                r = b_.CreateSelect(isnan(y), y, r);
                return b_.CreateSelect(isnan(x), x, r);
            }
            default: unsupported(kir::op_name(op), t);
            }
        }
        const bool s = is_signed_int(t);
        llvm::Type* ty = x->getType();
        Value* zero = llvm::ConstantInt::get(ty, 0);
        Value* one = llvm::ConstantInt::get(ty, 1);
        switch (op) {
        case BinaryOp::add: return b_.CreateAdd(x, y);  // all wrap
        case BinaryOp::sub: return b_.CreateSub(x, y);
        case BinaryOp::mul: return b_.CreateMul(x, y);
        case BinaryOp::div: {
            // x / 0 == 0; INT_MIN / -1 == INT_MIN (computed as the wrapping -x).
            Value* y0 = b_.CreateICmpEQ(y, zero);
            if (!s) return b_.CreateSelect(y0, zero, b_.CreateUDiv(x, b_.CreateSelect(y0, one, y)));
            Value* ym1 = b_.CreateICmpEQ(y, llvm::ConstantInt::getSigned(ty, -1));
            Value* safe = b_.CreateSelect(b_.CreateOr(y0, ym1), one, y);
            Value* q = b_.CreateSDiv(x, safe);
            return b_.CreateSelect(y0, zero, b_.CreateSelect(ym1, b_.CreateSub(zero, x), q));
        }
        case BinaryOp::max:
            return b_.CreateBinaryIntrinsic(s ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, x, y);
        case BinaryOp::min:
            return b_.CreateBinaryIntrinsic(s ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, x, y);
        default: unsupported(kir::op_name(op), t);
        }
    }

    Value* compare(BinaryOp op, Type t, Value* x, Value* y) {
        using P = llvm::CmpInst::Predicate;
        if (kir::is_float(t)) {
            // IEEE: NaN is unordered, so only `ne` is true for it.
            P p = op == BinaryOp::eq ? P::FCMP_OEQ : op == BinaryOp::ne ? P::FCMP_UNE : op == BinaryOp::lt ? P::FCMP_OLT
                : op == BinaryOp::le ? P::FCMP_OLE : op == BinaryOp::gt ? P::FCMP_OGT : P::FCMP_OGE;
            return b_.CreateFCmp(p, x, y);
        }
        const bool s = is_signed_int(t);  // bool and u8 compare unsigned (false < true)
        P p = op == BinaryOp::eq ? P::ICMP_EQ : op == BinaryOp::ne ? P::ICMP_NE
            : op == BinaryOp::lt ? (s ? P::ICMP_SLT : P::ICMP_ULT) : op == BinaryOp::le ? (s ? P::ICMP_SLE : P::ICMP_ULE)
            : op == BinaryOp::gt ? (s ? P::ICMP_SGT : P::ICMP_UGT) : (s ? P::ICMP_SGE : P::ICMP_UGE);
        return b_.CreateICmp(p, x, y);
    }

    // ---- casts (core::convert) ----

    Value* emit_cast(Type from, Type to, Value* v) {
        if (from == to) return v;
        llvm::Type* ty = ltype(to);
        if (to == Type::boolean) {
            if (kir::is_float(from)) return b_.CreateFCmpUNE(v, fconst(v->getType(), 0.0));  // NaN -> true
            return b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
        }
        if (kir::is_float(from) && kir::is_float(to)) return b_.CreateFPCast(v, ty);
        if (kir::is_float(from)) {  // truncate toward zero, saturate, NaN -> 0
            auto id = to == Type::u8 ? llvm::Intrinsic::fptoui_sat : llvm::Intrinsic::fptosi_sat;
            return b_.CreateIntrinsic(id, {ty, v->getType()}, {v});
        }
        const bool s = is_signed_int(from);
        if (kir::is_float(to)) return s ? b_.CreateSIToFP(v, ty) : b_.CreateUIToFP(v, ty);
        if (!is_int(to)) fail(Bailout::unsupported_dtype, "cast to an unknown type");
        return b_.CreateIntCast(v, ty, s);  // narrower wraps; bool and u8 zero-extend
    }

    const kir::Kernel& k_;
    const kir::Specialization& spec_;
    llvm::Module& m_;
    llvm::LLVMContext& ctx_;
    llvm::IRBuilder<> b_;
    llvm::Function* fn_ = nullptr;
    std::vector<Value*> bufs_, params_, vars_;
    std::vector<llvm::MDNode*> scope_, noalias_;
    std::vector<llvm::AllocaInst*> temps_;
    std::vector<char> never_nan_;  // per temp: never holds NaN (find_nan_temps)
    Value* outer_ = nullptr;
    std::unordered_map<const Expr*, Value*> memo_;
};

}  // namespace

Value* bf16_to_float(llvm::IRBuilderBase& b, Value* raw) {
    llvm::Type* i32 = b.getInt32Ty();
    llvm::Type* f32 = b.getFloatTy();
    if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(raw->getType())) {
        i32 = llvm::FixedVectorType::get(i32, vt->getNumElements());
        f32 = llvm::FixedVectorType::get(f32, vt->getNumElements());
    }
    return b.CreateBitCast(b.CreateShl(b.CreateZExt(raw, i32), llvm::ConstantInt::get(i32, 16)), f32);
}

void emit_kernel(const kir::Kernel& kernel, const kir::Specialization& spec, const CodegenTarget& target,
                 const std::string& fn_name, llvm::Module& module) {
    Gen(kernel, spec, module).run(target, fn_name);
}

}  // namespace kiln::tiers::llvm_tier
