// KIR -> LLVM IR (see codegen.h for what is generated): the kernel function, its buffers and
// params, the loop nest and its statements, reductions in the forms the loop vectoriser
// recognises, prefetching of row kernels, loads and stores, and the expressions, whose ops
// OpEmitter emits (ops.cpp; f32 polynomials in vmath.cpp). Only IRBuilder-level LLVM here;
// the JIT, the pass pipeline and dumping live in llvm_tier.cpp, the blocked GEMM in gemm.cpp.
#include "tiers/llvm/codegen.h"
#include "tiers/kir_forms.h"
#include "tiers/llvm/ops.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>

#include <cmath>
#include <limits>
#include <optional>
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

class Gen final : public KernelEmitter {
public:
    Gen(const kir::Kernel& k, const kir::Specialization& spec, llvm::Module& m)
        : k_(k), spec_(spec), m_(m), ctx_(m.getContext()), b_(ctx_) {}

    // ---- KernelEmitter (for the blocked GEMM of matmul kernels) ----
    llvm::IRBuilderBase& builder() override { return b_; }
    llvm::Function* function() override { return fn_; }
    bool reads_derived() const { return reads_derived_; }
    Value* buffer_ptr(int id) override {
        // Past the buffers: the derived ones (kir::Derived), loaded after them.
        if (id >= 0 && static_cast<std::size_t>(id) >= k_.buffers.size() && static_cast<std::size_t>(id) < bufs_.size()) {
            reads_derived_ = true;
            return bufs_[static_cast<std::size_t>(id)];
        }
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
        const int temp = k_.matmul ? k_.matmul->acc_temp : k_.nchwc ? k_.nchwc->acc_temp : -1;
        if (temp < 0 || static_cast<std::size_t>(temp) >= temps_.size())
            fail(Bailout::backend_error, "malformed kernel: the hint's accumulator is out of range");
        b_.CreateStore(acc, temps_[static_cast<std::size_t>(temp)]);
        for (const auto& s : hint_epilogue()) emit_stmt(*s);
        memo_.clear();
    }
    bool lanes_ok(int var) override {
        auto it = lanes_ok_.find(var);
        if (it == lanes_ok_.end()) it = lanes_ok_.emplace(var, check_lanes(var)).first;
        return it->second;
    }
    bool check_lanes(int var) const {
        if (var < 0 || var >= k_.num_vars) return false;
        std::vector<char> lane_temp(k_.temps.size(), 0);
        const int acc = hint_acc();
        if (acc < 0 || static_cast<std::size_t>(acc) >= lane_temp.size()) return false;
        lane_temp[static_cast<std::size_t>(acc)] = 1;
        for (const auto& s : hint_epilogue()) {
            if (s->kind == kir::StmtKind::Loop || !s->value || !lane_expr_ok(*s->value, var, lane_temp)) return false;
            if (s->kind == kir::StmtKind::Store) {
                if (s->buffer < 0 || static_cast<std::size_t>(s->buffer) >= k_.buffers.size() || !s->index ||
                    unit_coefficient(*s->index, var) != 1)
                    return false;
            } else {  // an assignment: the temp holds lanes from here on
                if (s->var < 0 || static_cast<std::size_t>(s->var) >= lane_temp.size()) return false;
                lane_temp[static_cast<std::size_t>(s->var)] = 1;
            }
        }
        return true;
    }
    void epilogue_lanes(Value* acc, int var, Value* first, Value* mask) override {
        auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(acc->getType());
        if (!vt || !lanes_ok(var)) fail(Bailout::backend_error, "epilogue_lanes: the epilogue cannot run across lanes");
        lane_ = {var, vt->getNumElements(), first, mask};
        bind_var(var, first);
        lane_temps_.clear();
        lane_temps_[hint_acc()] = acc;
        ops_.set_lanes(lane_.lanes);
        for (const auto& s : hint_epilogue()) {
            memo_.clear();
            lane_memo_.clear();
            varies_.clear();
            Value* v = lane_value(s->value);
            if (s->kind == kir::StmtKind::Assign) {
                lane_temps_[s->var] = v;
                continue;
            }
            const kir::Buffer& buf = buffer(s->buffer);
            if (s->value->type != kir::compute_type(buf.dtype))
                fail(Bailout::unsupported_dtype, "store of a value that is not the compute type of buffer '" + buf.name + "'");
            store_elem(s->buffer, scalar_value(s->index, Type::index), v, lane_.lanes, lane_.mask);
        }
        memo_.clear();
        lane_memo_.clear();
        varies_.clear();
        lane_temps_.clear();
        lane_ = {};
        ops_.set_lanes(0);
    }
    void need_loop_vectoriser() override { loop_vectoriser_ = true; }
    bool loop_vectoriser() const { return loop_vectoriser_; }

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

        loop_vectoriser_ = !gemm_applies(k_) && !nchwc_applies(k_);
        if (gemm_applies(k_)) {
            emit_gemm(k_, target, *this, fn_->getArg(2), fn_->getArg(3));
        } else if (nchwc_applies(k_)) {
            emit_nchwc(k_, target, *this, fn_->getArg(2), fn_->getArg(3));
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

    llvm::Type* ltype(Type t) { return ops_.ltype(t); }
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
        for (std::size_t i = 0; i < k_.derived.size(); ++i) {
            Value* slot = b_.CreateConstInBoundsGEP1_64(llvm::PointerType::getUnqual(ctx_), arg, n + i);
            auto* p = b_.CreateAlignedLoad(llvm::PointerType::getUnqual(ctx_), slot, llvm::Align(8), "derived");
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
        Value* id = ops_.fconst(ty, max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity());
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

    // Element idx of buffer `id`, or with `lanes` (epilogue_lanes) the lanes' elements from
    // idx on, masked by `mask` (null: all of them).
    Value* load_elem(int id, Value* idx, unsigned lanes = 0, Value* mask = nullptr) {
        const DType d = buffer(id).dtype;
        llvm::Type* st = storage_type(d);
        llvm::Type* vt = lanes ? llvm::FixedVectorType::get(st, lanes) : st;
        Value* p = b_.CreateInBoundsGEP(st, bufs_[static_cast<std::size_t>(id)], idx);
        const llvm::Align a(dtype_size(d));
        llvm::Instruction* raw = nullptr;
        if (mask) raw = b_.CreateMaskedLoad(vt, p, a, mask, llvm::Constant::getNullValue(vt));
        else raw = b_.CreateAlignedLoad(vt, p, a);
        tag_buffer(raw, id);
        switch (d) {
        case DType::f16: return ops_.half_to_float(raw);
        case DType::bf16: return bf16_to_float(b_, raw);
        case DType::boolean: return b_.CreateICmpNE(raw, llvm::Constant::getNullValue(vt));
        default: return raw;
        }
    }

    void store_elem(int id, Value* idx, Value* v, unsigned lanes = 0, Value* mask = nullptr) {
        const DType d = buffer(id).dtype;
        llvm::Type* st = storage_type(d);
        switch (d) {
        case DType::f16: v = ops_.float_to_half(v); break;
        case DType::bf16: v = ops_.float_to_bf16(v); break;
        case DType::boolean:
            v = b_.CreateZExt(v, lanes ? static_cast<llvm::Type*>(llvm::FixedVectorType::get(b_.getInt8Ty(), lanes)) : b_.getInt8Ty());
            break;
        default: break;
        }
        Value* p = b_.CreateInBoundsGEP(st, bufs_[static_cast<std::size_t>(id)], idx);
        const llvm::Align a(dtype_size(d));
        if (mask) tag_buffer(b_.CreateMaskedStore(v, p, a, mask), id);
        else tag_buffer(b_.CreateAlignedStore(v, p, a), id);
    }

    // ---- the hint's epilogue across vector lanes (epilogue_lanes) ----

    const std::vector<kir::StmtRef>& hint_epilogue() const { return k_.matmul ? k_.matmul->epilogue : k_.nchwc->epilogue; }
    int hint_acc() const { return k_.matmul ? k_.matmul->acc_temp : k_.nchwc ? k_.nchwc->acc_temp : -1; }

    // The coefficient of `var` in an index expression affine in it (sums, differences and
    // products by constants); nullopt where it is not affine or reads a temp.
    static std::optional<std::int64_t> unit_coefficient_of(const Expr& e, int var) {
        if (e.kind == ExprKind::Var && e.id == var) return 1;
        if (e.kind == ExprKind::Temp) return std::nullopt;
        bool uses = false;
        for (const auto& a : e.args) uses = uses || kir::uses_var(a, var);
        if (!uses) return 0;
        if (e.kind != ExprKind::Binary || e.args.size() != 2) return std::nullopt;
        const auto x = unit_coefficient_of(*e.args[0], var), y = unit_coefficient_of(*e.args[1], var);
        if (!x || !y) return std::nullopt;
        switch (e.bop) {
        case BinaryOp::add: return *x + *y;
        case BinaryOp::sub: return *x - *y;
        case BinaryOp::mul:
            if (*x == 0 && e.args[0]->kind == ExprKind::Const) return e.args[0]->i * *y;
            if (*y == 0 && e.args[1]->kind == ExprKind::Const) return e.args[1]->i * *x;
            return std::nullopt;
        default: return std::nullopt;
        }
    }
    static std::int64_t unit_coefficient(const Expr& e, int var) { return unit_coefficient_of(e, var).value_or(0); }

    // Does `e` vary across the lanes (read `var` or a temp that holds lanes)?
    static bool varies_with(const Expr& e, int var, const std::vector<char>& lane_temp) {
        if (e.kind == ExprKind::Var) return e.id == var;
        if (e.kind == ExprKind::Temp)
            return e.id >= 0 && static_cast<std::size_t>(e.id) < lane_temp.size() && lane_temp[static_cast<std::size_t>(e.id)];
        for (const auto& a : e.args)
            if (a && varies_with(*a, var, lane_temp)) return true;
        return false;
    }
    // Can `e` be emitted across lanes: its varying loads consecutive in `var`, no varying
    // f64 op that calls libm (codegen.h), no temp read before the epilogue assigns it
    // where the epilogue assigns it later (checked by the caller's order: a temp not yet
    // holding lanes reads its scalar value, which is only right for temps the epilogue
    // never assigns).
    bool lane_expr_ok(const Expr& e, int var, const std::vector<char>& lane_temp) const {
        if (!varies_with(e, var, lane_temp)) {
            if (e.kind == ExprKind::Temp) return !assigned_in_epilogue(e.id);
            for (const auto& a : e.args)
                if (a && !lane_expr_ok(*a, var, lane_temp)) return false;
            return true;
        }
        if (e.kind == ExprKind::Load) return e.args.size() == 1 && unit_coefficient(*e.args[0], var) == 1;
        if (e.type == Type::f64 || (!e.args.empty() && e.args[0] && e.args[0]->type == Type::f64)) {
            if (e.kind == ExprKind::Binary && e.bop == BinaryOp::pow) return false;
            if (e.kind == ExprKind::Unary) switch (e.uop) {
                case UnaryOp::exp: case UnaryOp::log: case UnaryOp::sin: case UnaryOp::cos: case UnaryOp::tanh:
                case UnaryOp::sigmoid: case UnaryOp::gelu_erf: case UnaryOp::gelu_tanh: case UnaryOp::silu:
                case UnaryOp::erf: return false;
                default: break;
                }
        }
        for (const auto& a : e.args)
            if (!a || !lane_expr_ok(*a, var, lane_temp)) return false;
        return true;
    }
    bool assigned_in_epilogue(int t) const {
        if (t == hint_acc()) return true;
        for (const auto& s : hint_epilogue())
            if (s->kind == kir::StmtKind::Assign && s->var == t) return true;
        return false;
    }

    Value* splat(Value* v) { return b_.CreateVectorSplat(lane_.lanes, v); }
    // A value the same in every lane (an index at the first lane), emitted as a scalar.
    Value* scalar_value(const kir::ExprRef& e, std::optional<Type> want = std::nullopt) {
        ops_.set_lanes(0);
        Value* v = want ? emit_typed(e, *want) : emit(e);
        ops_.set_lanes(lane_.lanes);
        return v;
    }

    Value* lane_value(const kir::ExprRef& e) {
        if (!e) fail(Bailout::backend_error, "malformed kernel: null expression");
        if (!lane_varies(*e)) return splat(scalar_value(e));  // the same in every lane
        auto it = lane_memo_.find(e.get());
        if (it != lane_memo_.end()) return it->second;
        Value* v = lane_value_uncached(*e);
        lane_memo_.emplace(e.get(), v);
        return v;
    }
    bool lane_varies(const Expr& e) {
        auto it = varies_.find(&e);
        if (it != varies_.end()) return it->second;
        bool v = false;
        if (e.kind == ExprKind::Var) v = e.id == lane_.var;
        else if (e.kind == ExprKind::Temp) v = lane_temps_.count(e.id) != 0;
        else
            for (const auto& a : e.args) v = v || lane_varies(*a);
        varies_.emplace(&e, v);
        return v;
    }
    Value* lane_value_uncached(const Expr& e) {
        switch (e.kind) {
        case ExprKind::Var: {
            std::vector<llvm::Constant*> iota;
            for (unsigned l = 0; l < lane_.lanes; ++l) iota.push_back(b_.getInt64(l));
            return b_.CreateAdd(splat(lane_.first), llvm::ConstantVector::get(iota));
        }
        case ExprKind::Temp: return lane_temps_.at(e.id);
        case ExprKind::Load: {
            const kir::Buffer& buf = buffer(e.id);
            if (e.type != kir::compute_type(buf.dtype) || e.args.size() != 1)
                fail(Bailout::unsupported_dtype, "load of another type from buffer '" + buf.name + "'");
            return load_elem(e.id, scalar_value(e.args[0], Type::index), lane_.lanes, lane_.mask);
        }
        case ExprKind::Unary: return ops_.emit_unary(e.uop, e.args[0]->type, lane_value(e.args[0]));
        case ExprKind::Binary:
            if (e.args.size() != 2 || e.args[0]->type != e.args[1]->type)
                fail(Bailout::backend_error, "malformed kernel: binary operands");
            return ops_.emit_binary(e.bop, e.args[0]->type, lane_value(e.args[0]), lane_value(e.args[1]));
        case ExprKind::Select:
            if (e.args.size() != 3) fail(Bailout::backend_error, "malformed kernel: select operands");
            return b_.CreateSelect(lane_value(e.args[0]), lane_value(e.args[1]), lane_value(e.args[2]));
        case ExprKind::Cast: return ops_.emit_cast(e.args[0]->type, e.type, lane_value(e.args[0]));
        default: break;
        }
        fail(Bailout::backend_error, "malformed kernel: an expression that cannot vary across lanes");
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
            return ops_.emit_unary(e.uop, e.args[0]->type, emit(e.args[0]));
        case ExprKind::Binary:
            if (e.args.size() != 2 || e.args[0]->type != e.args[1]->type)
                fail(Bailout::backend_error, "malformed kernel: binary operands");
            return ops_.emit_binary(e.bop, e.args[0]->type, emit(e.args[0]), emit(e.args[1]));
        case ExprKind::Select:
            if (e.args.size() != 3 || e.args[0]->type != Type::boolean || e.args[1]->type != e.type ||
                e.args[2]->type != e.type)
                fail(Bailout::backend_error, "malformed kernel: select operands");
            return b_.CreateSelect(emit(e.args[0]), emit(e.args[1]), emit(e.args[2]));
        case ExprKind::Cast:
            if (e.args.size() != 1) fail(Bailout::backend_error, "malformed kernel: cast arity");
            return ops_.emit_cast(e.args[0]->type, e.type, emit(e.args[0]));
        }
        fail(Bailout::backend_error, "malformed kernel: unknown expression");
    }

    const kir::Kernel& k_;
    const kir::Specialization& spec_;
    llvm::Module& m_;
    llvm::LLVMContext& ctx_;
    llvm::IRBuilder<> b_;
    OpEmitter ops_{b_, m_};
    llvm::Function* fn_ = nullptr;
    std::vector<Value*> bufs_, params_, vars_;
    bool reads_derived_ = false;  // the code took a derived buffer's pointer (buffer_ptr)
    std::vector<llvm::MDNode*> scope_, noalias_;
    std::vector<llvm::AllocaInst*> temps_;
    std::vector<char> never_nan_;  // per temp: never holds NaN (find_nan_temps)
    Value* outer_ = nullptr;
    std::unordered_map<const Expr*, Value*> memo_;
    bool loop_vectoriser_ = true;
    // epilogue_lanes' state: the varying variable, the lanes, its first value, the mask;
    // the temps that hold lanes, the lanes' values of the statement's expressions, and
    // which of them vary.
    struct Lanes {
        int var = -1;
        unsigned lanes = 0;
        Value* first = nullptr;
        Value* mask = nullptr;
    } lane_;
    std::unordered_map<int, Value*> lane_temps_;
    std::unordered_map<const Expr*, Value*> lane_memo_;
    std::unordered_map<const Expr*, bool> varies_;
    std::unordered_map<int, bool> lanes_ok_;  // per variable (check_lanes)
};

}  // namespace

EmitResult emit_kernel(const kir::Kernel& kernel, const kir::Specialization& spec, const CodegenTarget& target,
                       const std::string& fn_name, llvm::Module& module) {
    Gen gen(kernel, spec, module);
    gen.run(target, fn_name);
    return {gen.reads_derived(), gen.loop_vectoriser()};
}

}  // namespace kiln::tiers::llvm_tier
