// KIR -> x86-64 with asmjit's x86::Compiler (see codegen.h). The kernel's loop nest is
// emitted as it stands: scalar code for every statement, and, for the loops the analysis
// marked, a vector loop (full vectors, then one masked vector for the tail). Every
// register is virtual; asmjit's allocator assigns and spills them.
//
// Scalar values live in general-purpose registers (integers, bools and indices, held
// sign- or zero-extended to 64 bits, so 64-bit compares and divides give the narrow
// type's answer) or in xmm lane 0 (f32, f64). f32 arithmetic, scalar or vector, goes through
// one LaneOps implementation (the Lanes class below), so vmath.h's sequences give the
// same value in every lane and in scalar code.
#include "tiers/asmjit/codegen.h"

#include "tiers/asmjit/vmath.h"

#include <kiln/dtype.h>

#include <asmjit/x86.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <map>
#include <utility>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace kiln::tiers::asmjit_tier {
namespace {

namespace aj = asmjit;
namespace x86 = asmjit::x86;
using kir::BinaryOp;
using kir::Expr;
using kir::ExprKind;
using kir::ExprRef;
using kir::Stmt;
using kir::StmtKind;
using kir::Type;
using kir::UnaryOp;

[[noreturn]] void backend(const std::string& msg) { throw Unsupported{Bailout::backend_error, msg}; }

// ---- helpers called from generated code (exactly the interpreter's formulas) ----

double f64_sigmoid(double v) {
    if (v >= 0.0) return 1.0 / (1.0 + std::exp(-v));
    const double e = std::exp(v);
    return e / (1.0 + e);
}
double f64_gelu_erf(double v) { return 0.5 * v * (1.0 + std::erf(v * 0.70710678118654752440)); }
double f64_gelu_tanh(double v) { return 0.5 * v * (1.0 + std::tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v))); }
double f64_silu(double v) { return v * f64_sigmoid(v); }
double f64_exp(double v) { return std::exp(v); }
double f64_log(double v) { return std::log(v); }
double f64_sin(double v) { return std::sin(v); }
double f64_cos(double v) { return std::cos(v); }
double f64_tanh(double v) { return std::tanh(v); }
double f64_erf(double v) { return std::erf(v); }
double f64_pow(double a, double b) { return std::pow(a, b); }
float f32_sin(float v) { return std::sin(v); }
float f32_cos(float v) { return std::cos(v); }
float f32_pow(float a, float b) { return std::pow(a, b); }
float half_to_f32(std::uint32_t b) {
    Half h;
    h.bits = static_cast<std::uint16_t>(b);
    return static_cast<float>(h);
}
std::uint32_t f32_to_half(float f) { return Half(f).bits; }
std::uint32_t f32_to_bf16(float f) { return BFloat16(f).bits; }

// Records the first error asmjit reports (emitters return errors; this also sees the ones
// of calls whose result is not checked one by one).
class ErrorSink final : public aj::ErrorHandler {
public:
    void handleError(aj::Error err, const char* message, aj::BaseEmitter*) override {
        if (error == aj::kErrorOk) {
            error = err;
            text = message ? message : aj::DebugUtils::errorAsString(err);
        }
    }
    aj::Error error = aj::kErrorOk;
    std::string text;
};

int dtype_shift(DType d) {
    switch (d) {
    case DType::f64: case DType::i64: return 3;
    case DType::f32: case DType::i32: return 2;
    case DType::f16: case DType::bf16: return 1;
    case DType::i8: case DType::u8: case DType::boolean: return 0;
    }
    return 0;
}

// ---- f32 lanes (LaneOps on xmm, ymm or zmm registers) ----

class Lanes final : public LaneOps {
public:
    Lanes(x86::Compiler& cc, int bytes) : cc_(cc), bytes_(bytes) {}

    // A value as a register; a constant (a full-width vector in the function's constant
    // pool) is loaded into a fresh one at the cursor.
    x86::Vec reg(F f) {
        const Slot& s = slot(f);
        if (!s.is_mem) return s.reg;
        x86::Vec r = new_vec(s.bytes);
        cc_.vmovaps(r, s.mem);
        return r;
    }
    F wrap(const x86::Vec& v) {
        f_.push_back(Slot{v, x86::Mem(), false, static_cast<int>(v.size())});
        return F{static_cast<int>(f_.size()) - 1};
    }
    F fresh(int bytes = 0) { return wrap(new_vec(bytes ? bytes : bytes_)); }
    // Masks: a vector of all-ones/zero lanes (xmm, ymm) or a mask register (zmm).
    bool kmask(F f) { return slot(f).bytes == 64; }
    K wrap_mask(const x86::Vec& v) {
        mv_.push_back(v);
        mk_.emplace_back();
        return K{static_cast<int>(mv_.size()) - 1};
    }
    K wrap_kmask(const x86::KReg& k) {
        mv_.emplace_back();
        mk_.push_back(k);
        return K{static_cast<int>(mk_.size()) - 1};
    }
    bool is_k(K m) const { return mk_[static_cast<std::size_t>(m.id)].isValid(); }
    const x86::Vec& mvec(K m) { return mv_[static_cast<std::size_t>(m.id)]; }
    const x86::KReg& mk(K m) { return mk_[static_cast<std::size_t>(m.id)]; }

    F constant(float v) override {
        std::uint32_t b;
        std::memcpy(&b, &v, 4);
        return bits(b);
    }
    // Constants stay in memory and are used as memory operands: no register is held for
    // them across a loop (fewer long-lived registers: much faster register allocation).
    F bits(std::uint32_t v) override {
        std::uint32_t data[16];
        for (auto& d : data) d = v;
        x86::Mem m = cc_.newConst(aj::ConstPoolScope::kLocal, data, static_cast<std::size_t>(bytes_));
        f_.push_back(Slot{x86::Vec(), m, true, bytes_});
        return F{static_cast<int>(f_.size()) - 1};
    }
    F add(F a, F b) override { return op3(x86::Inst::kIdVaddps, a, b, true); }
    F sub(F a, F b) override { return op3(x86::Inst::kIdVsubps, a, b, false); }
    F mul(F a, F b) override { return op3(x86::Inst::kIdVmulps, a, b, true); }
    F div(F a, F b) override { return op3(x86::Inst::kIdVdivps, a, b, false); }
    F min_x86(F a, F b) override { return op3(x86::Inst::kIdVminps, a, b, false); }
    F max_x86(F a, F b) override { return op3(x86::Inst::kIdVmaxps, a, b, false); }
    F fma(F a, F b, F c) override {
        if (slot(a).is_mem && !slot(b).is_mem) std::swap(a, b);
        F r = like(a);
        cc_.emit(x86::Inst::kIdVmovaps, reg(r), src(c));
        cc_.emit(x86::Inst::kIdVfmadd231ps, reg(r), reg(a), src(b));
        return r;
    }
    F sqrt(F a) { return op2(x86::Inst::kIdVsqrtps, a); }
    F round(F a, int mode) override {
        F r = like(a);
        cc_.emit(kmask(a) ? x86::Inst::kIdVrndscaleps : x86::Inst::kIdVroundps, reg(r), src(a), aj::imm(mode | 8));
        return r;
    }
    F bit_and(F a, F b) override { return op3(kmask(a) ? x86::Inst::kIdVpandd : x86::Inst::kIdVandps, a, b, true); }
    F bit_or(F a, F b) override { return op3(kmask(a) ? x86::Inst::kIdVpord : x86::Inst::kIdVorps, a, b, true); }
    F bit_xor(F a, F b) override { return op3(kmask(a) ? x86::Inst::kIdVpxord : x86::Inst::kIdVxorps, a, b, true); }
    K cmp(F a, F b, Cmp p) override {
        if (kmask(a)) {
            x86::KReg k = cc_.newKw();
            cc_.emit(x86::Inst::kIdVcmpps, k, reg(a), src(b), aj::imm(static_cast<int>(p)));
            return wrap_kmask(k);
        }
        x86::Vec r = new_vec(slot(a).bytes);
        cc_.emit(x86::Inst::kIdVcmpps, r, reg(a), src(b), aj::imm(static_cast<int>(p)));
        return wrap_mask(r);
    }
    F select(K m, F a, F b) override {
        F r = like(a);
        const x86::Vec rb = reg(b);  // before k(): a constant's load must not take the mask
        if (is_k(m)) {
            // r = b, then a merge-masked move of a: the register allocator sees r defined
            // first (a masked vblendmps into a fresh register reads it as uninitialised).
            cc_.vmovaps(reg(r), rb);
            cc_.k(mk(m)).emit(x86::Inst::kIdVmovups, reg(r), src(a));
        } else {
            cc_.emit(x86::Inst::kIdVblendvps, reg(r), rb, src(a), mvec(m));
        }
        return r;
    }
    F to_i32(F a) override { return op2(x86::Inst::kIdVcvtps2dq, a); }
    F from_i32(F a) override { return op2(x86::Inst::kIdVcvtdq2ps, a); }
    F add_i32(F a, F b) override { return op3(x86::Inst::kIdVpaddd, a, b, true); }
    F sub_i32(F a, F b) override { return op3(x86::Inst::kIdVpsubd, a, b, false); }
    F shl_i32(F a, int n) override { return shift(x86::Inst::kIdVpslld, a, n); }
    F shr_i32(F a, int n) override { return shift(x86::Inst::kIdVpsrld, a, n); }
    F sar_i32(F a, int n) override { return shift(x86::Inst::kIdVpsrad, a, n); }

    // Lane masks as KIR bools.
    K mask_and(K a, K b) { return mask_op(a, b, 0); }
    K mask_or(K a, K b) { return mask_op(a, b, 1); }
    K mask_not(K a) {
        if (is_k(a)) {
            x86::KReg k = cc_.newKw();
            cc_.knotw(k, mk(a));
            return wrap_kmask(k);
        }
        F ones = bits(0xffffffffu);
        x86::Vec r = new_vec(static_cast<int>(mvec(a).size()));
        cc_.emit(x86::Inst::kIdVxorps, r, mvec(a), src(ones));
        return wrap_mask(r);
    }

private:
    struct Slot {
        x86::Vec reg;
        x86::Mem mem;
        bool is_mem = false;
        int bytes = 16;
    };
    x86::Compiler& cc_;
    int bytes_;
    std::vector<Slot> f_;
    std::vector<x86::Vec> mv_;
    std::vector<x86::KReg> mk_;

    const Slot& slot(F f) const { return f_[static_cast<std::size_t>(f.id)]; }
    aj::Operand src(F f) const {
        const Slot& s = slot(f);
        return s.is_mem ? aj::Operand(s.mem) : aj::Operand(s.reg);
    }
    x86::Vec new_vec(int bytes) {
        return bytes == 64 ? x86::Vec(cc_.newZmm()) : bytes == 32 ? x86::Vec(cc_.newYmm()) : x86::Vec(cc_.newXmm());
    }
    F like(F a) { return fresh(slot(a).bytes); }
    F op3(x86::Inst::Id id, F a, F b, bool commutes) {
        if (commutes && slot(a).is_mem && !slot(b).is_mem) std::swap(a, b);
        F r = like(a);
        cc_.emit(id, reg(r), reg(a), src(b));
        return r;
    }
    F op2(x86::Inst::Id id, F a) {
        F r = like(a);
        cc_.emit(id, reg(r), src(a));
        return r;
    }
    F shift(x86::Inst::Id id, F a, int n) {
        F r = like(a);
        cc_.emit(id, reg(r), reg(a), aj::imm(n));
        return r;
    }
    K mask_op(K a, K b, int which) {
        if (is_k(a)) {
            x86::KReg k = cc_.newKw();
            if (which == 0) cc_.kandw(k, mk(a), mk(b));
            else cc_.korw(k, mk(a), mk(b));
            return wrap_kmask(k);
        }
        x86::Vec r = new_vec(static_cast<int>(mvec(a).size()));
        cc_.emit(which == 0 ? x86::Inst::kIdVandps : x86::Inst::kIdVorps, r, mvec(a), mvec(b));
        return wrap_mask(r);
    }
};

// KIR max/min on lanes: isnan(x) ? x : isnan(y) ? y : (y > x ? y : x)   (`<` for min).
F kir_minmax(Lanes& o, BinaryOp op, F x, F y) {
    F r = op == BinaryOp::max ? o.max_x86(y, x) : o.min_x86(y, x);  // y op x, else x (also when either is NaN)
    r = o.select(visnan(o, y), y, r);
    return o.select(visnan(o, x), x, r);
}

// One step of a reduction on lanes: acc + x, KIR's max/min, or a NaN-skipping extreme
// x > acc ? x : acc (x86's max with x first gives acc when either is NaN; `<` for min).
F reduce_step(Lanes& o, const LoopPlan::Reduction& r, F acc, F x) {
    if (r.op == BinaryOp::add) return o.add(acc, x);
    if (!r.skips_nan) return kir_minmax(o, r.op, acc, x);
    return r.op == BinaryOp::max ? o.max_x86(x, acc) : o.min_x86(x, acc);
}

// The f32 unary ops that are the same in scalar and vector code (all but sin and cos).
F f32_unary(Lanes& o, UnaryOp op, F x) {
    switch (op) {
    case UnaryOp::neg: return vneg(o, x);
    case UnaryOp::abs: return vabs(o, x);
    case UnaryOp::exp: return vexp(o, x);
    case UnaryOp::log: return vlog(o, x);
    case UnaryOp::sqrt: return o.sqrt(x);
    case UnaryOp::rsqrt: return o.div(o.constant(1.0f), o.sqrt(x));
    case UnaryOp::reciprocal: return o.div(o.constant(1.0f), x);
    case UnaryOp::tanh: return vtanh(o, x);
    case UnaryOp::sigmoid: return vsigmoid(o, x);
    case UnaryOp::relu: {
        F zero = o.constant(0.0f);
        return o.select(o.cmp(x, zero, Cmp::nle_uq), x, zero);  // NaN stays NaN, relu(-0) = +0
    }
    case UnaryOp::gelu_erf: return vgelu_erf(o, x);
    case UnaryOp::gelu_tanh: return vgelu_tanh(o, x);
    case UnaryOp::silu: return vsilu(o, x);
    case UnaryOp::erf: return verf(o, x);
    case UnaryOp::floor: return o.round(x, 1);
    case UnaryOp::ceil: return o.round(x, 2);
    case UnaryOp::round: return o.round(x, 0);
    case UnaryOp::sign: {
        F zero = o.constant(0.0f);
        F r = o.select(visnan(o, x), x, zero);
        r = o.select(o.cmp(x, zero, Cmp::lt_os), o.constant(-1.0f), r);
        return o.select(o.cmp(x, zero, Cmp::gt_os), o.constant(1.0f), r);
    }
    default: break;
    }
    backend("f32 " + std::string(kir::op_name(op)) + " has no lane sequence");
}

Cmp f32_pred(BinaryOp op) {
    switch (op) {
    case BinaryOp::eq: return Cmp::eq_oq;
    case BinaryOp::ne: return Cmp::ne_uq;
    case BinaryOp::lt: return Cmp::lt_os;
    case BinaryOp::le: return Cmp::le_os;
    case BinaryOp::gt: return Cmp::gt_os;
    default: return Cmp::ge_os;
    }
}


// ---- the kernel ----

class Gen {
public:
    Gen(x86::Compiler& cc, const kir::Kernel& k, const Analysis& a, int vbytes)
        : cc_(cc), k_(k), a_(a), vbytes_(vbytes), s_(cc, 16) {}

    void run() {
        aj::FuncNode* fn = cc_.addFunc(aj::FuncSignatureT<void, void* const*, const std::int64_t*, std::int64_t, std::int64_t>(
            aj::CallConvId::kHost));
        fn->frame().setAvxEnabled();
        if (vbytes_ == 64) fn->frame().setAvx512Enabled();
        fn->frame().setAvxCleanup();
        bufs_ = cc_.newIntPtr("bufs");
        params_ = cc_.newIntPtr("params");
        x86::Gp begin = cc_.newInt64("begin"), end = cc_.newInt64("end");
        fn->setArg(0, bufs_);
        fn->setArg(1, params_);
        fn->setArg(2, begin);
        fn->setArg(3, end);
        vars_.assign(static_cast<std::size_t>(k_.num_vars), x86::Gp());
        for (Type t : k_.temps) {
            Temp tr;
            if (t == Type::f32) tr.f = s_.fresh();
            else if (t == Type::f64) tr.x = cc_.newXmm();
            else tr.g = cc_.newInt64();
            temps_.push_back(tr);
        }
        if (a_.outer.vector) {
            vector_loop(LoopVar{true, -1}, a_.outer, begin, end, k_.body);
        } else {
            outer_ = cc_.newInt64("outer");
            cc_.mov(outer_, begin);
            scalar_loop(outer_, end, [&] { stmts(k_.body); });
        }
        cc_.endFunc();
    }

private:
    struct Temp {
        x86::Gp g;   // ints, bools, index
        x86::Xmm x;  // f64
        F f;         // f32 (lane 0 of a scalar Lanes register)
    };
    // Memos of one statement's scalar values (expressions are DAGs; straight-line code).
    struct Memo {
        std::unordered_map<const Expr*, x86::Gp> g;
        std::unordered_map<const Expr*, x86::Xmm> x;
        std::unordered_map<const Expr*, F> f;
        void clear() {
            g.clear();
            x.clear();
            f.clear();
        }
    };
    // The state of the vector loop being emitted.
    struct VecLoop {
        LoopVar var;
        const LoopPlan* plan = nullptr;
        Lanes* o = nullptr;
        aj::BaseNode* pre = nullptr;  // the preheader: where invariant values are computed
        Memo pre_memo;                // scalar values computed in the preheader
        x86::Gp first, i;             // the variable's first value; the lane offset from it
        std::map<std::pair<int, const Expr*>, x86::Gp> ptrs;  // element `first` of each access
        std::unordered_map<const Expr*, F> invariant;          // broadcast invariants
        std::vector<F> acc;                                    // per reduction
        bool masked = false;
        K tail;
        std::unordered_map<int, F> local_f;
        std::unordered_map<int, K> local_k;
        std::unordered_map<const Expr*, F> memo_f;
        std::unordered_map<const Expr*, K> memo_k;
    };

    x86::Compiler& cc_;
    const kir::Kernel& k_;
    const Analysis& a_;
    int vbytes_;
    Lanes s_;  // scalar f32: lane 0 of xmm registers
    x86::Gp bufs_, params_, outer_;
    std::vector<x86::Gp> vars_;
    std::vector<Temp> temps_;
    Memo memo_;
    VecLoop* vl_ = nullptr;

    // ---- loops ----

    // for (iv; iv < end; ++iv) body(); iv must be a register the body does not write.
    template <class Body> void scalar_loop(const x86::Gp& iv, const x86::Gp& end, Body body) {
        aj::Label head = cc_.newLabel(), exit = cc_.newLabel();
        cc_.bind(head);
        cc_.cmp(iv, end);
        cc_.jge(exit);
        body();
        cc_.inc(iv);
        cc_.jmp(head);
        cc_.bind(exit);
    }

    void stmts(const std::vector<kir::StmtRef>& ss) {
        for (const auto& s : ss) stmt(*s);
    }

    void stmt(const Stmt& s) {
        memo_.clear();
        switch (s.kind) {
        case StmtKind::Loop: {
            x86::Gp b = cc_.newInt64(), e = cc_.newInt64();
            cc_.mov(b, gp(s.begin));
            cc_.mov(e, gp(s.end));
            memo_.clear();
            const LoopPlan& plan = a_.loops.at(&s);
            if (plan.vector) {
                vector_loop(LoopVar{false, s.var}, plan, b, e, s.body);
            } else {
                x86::Gp saved = vars_[static_cast<std::size_t>(s.var)];
                vars_[static_cast<std::size_t>(s.var)] = b;
                scalar_loop(b, e, [&] { stmts(s.body); });
                vars_[static_cast<std::size_t>(s.var)] = saved;
            }
            memo_.clear();
            return;
        }
        case StmtKind::Store: store(s); return;
        case StmtKind::Assign: {
            Temp& t = temps_[static_cast<std::size_t>(s.var)];
            const Type ty = k_.temps[static_cast<std::size_t>(s.var)];
            if (ty == Type::f32) cc_.vmovaps(s_.reg(t.f), s_.reg(f32(s.value)));
            else if (ty == Type::f64) cc_.vmovaps(t.x, f64(s.value));
            else cc_.mov(t.g, gp(s.value));
            return;
        }
        }
    }

    // ---- vector loops ----

    void vector_loop(LoopVar v, const LoopPlan& plan, const x86::Gp& begin, const x86::Gp& end,
                     const std::vector<kir::StmtRef>& body) {
        const int W = vbytes_ / 4;
        Lanes o(cc_, vbytes_);
        VecLoop L;
        L.var = v;
        L.plan = &plan;
        L.o = &o;
        L.first = cc_.newInt64("first");
        L.i = cc_.newInt64("i");
        x86::Gp n = cc_.newInt64("n");
        aj::Label exit = cc_.newLabel(), main = cc_.newLabel(), post = cc_.newLabel();
        cc_.mov(L.first, begin);
        cc_.cmp(L.first, end);
        cc_.jge(exit);
        cc_.mov(n, end);
        cc_.sub(n, L.first);
        // The preheader: code hoisted later goes between these two labels (so it is never
        // inserted after the cursor itself, which would put it behind later code).
        cc_.bind(cc_.newLabel());
        L.pre = cc_.cursor();
        cc_.bind(cc_.newLabel());
        VecLoop* outer_vl = vl_;
        vl_ = &L;
        for (const auto& r : plan.reductions) {
            const float init = r.op == BinaryOp::add ? -0.0f : r.op == BinaryOp::max ? -INFINITY : INFINITY;
            F acc = o.fresh();
            cc_.vmovaps(o.reg(acc), o.reg(o.constant(init)));
            L.acc.push_back(acc);
        }
        // One body, masked: lanes [0, n - i) are live (iota < broadcast(n - i)), so full
        // vectors and the tail share the code (half the code to allocate registers for).
        std::int32_t iota[16];
        for (int j = 0; j < 16; ++j) iota[j] = j;
        x86::Mem iv = cc_.newConst(aj::ConstPoolScope::kLocal, iota, static_cast<std::size_t>(vbytes_));
        cc_.xor_(L.i, L.i);
        cc_.bind(main);
        cc_.cmp(L.i, n);
        cc_.jge(post);
        {
            // rem = min(n - i, W): lanes past W are never live, and the 32-bit broadcast below
            // stays exact however many elements remain (2^31 and more included).
            x86::Gp rem = cc_.newInt64();
            x86::Gp w = cc_.newInt64();
            cc_.mov(rem, n);
            cc_.sub(rem, L.i);
            cc_.mov(w, W);
            cc_.cmp(rem, w);
            cc_.cmovg(rem, w);
            F vr = o.fresh();
            if (vbytes_ == 64) {
                cc_.vpbroadcastd(o.reg(vr), rem.r32());
                x86::KReg k = cc_.newKw();
                cc_.vpcmpgtd(k, o.reg(vr), iv);
                L.tail = o.wrap_kmask(k);
            } else {
                x86::Xmm t = cc_.newXmm();
                cc_.vmovd(t, rem.r32());
                cc_.vpbroadcastd(o.reg(vr), t);
                F m = o.fresh();
                cc_.vpcmpgtd(o.reg(m), o.reg(vr), iv);
                L.tail = o.wrap_mask(o.reg(m));
            }
        }
        vector_body(body, true);
        cc_.add(L.i, W);
        cc_.jmp(main);
        cc_.bind(post);
        for (std::size_t r = 0; r < plan.reductions.size(); ++r) {
            const auto& red = plan.reductions[r];
            F total = horizontal(o, red, L.acc[r]);
            Temp& t = temps_[static_cast<std::size_t>(red.temp)];
            F combined = reduce_step(s_, red, t.f, total);
            cc_.vmovaps(s_.reg(t.f), s_.reg(combined));
        }
        cc_.bind(exit);
        vl_ = outer_vl;
        memo_.clear();
    }

    // Reduces the lanes of `acc` to lane 0 of an xmm register of the scalar Lanes.
    F horizontal(Lanes& o, const LoopPlan::Reduction& red, F acc) {
        x86::Vec v = o.reg(acc);
        auto combine = [&](const x86::Vec& a, const x86::Vec& b) {
            Lanes& l = s_;
            return l.reg(reduce_step(l, red, l.wrap(a), l.wrap(b)));
        };
        if (v.size() == 64) {
            x86::Ymm hi = cc_.newYmm();
            cc_.vextractf64x4(hi, v, 1);
            x86::Ymm lo = cc_.newYmm();
            cc_.vmovaps(lo, v.ymm());
            v = combine(lo, hi);
        }
        if (v.size() == 32) {
            x86::Xmm hi = cc_.newXmm();
            cc_.vextractf128(hi, v, 1);
            x86::Xmm lo = cc_.newXmm();
            cc_.vmovaps(lo, v.xmm());
            v = combine(lo, hi);
        }
        x86::Xmm h = cc_.newXmm();
        cc_.vmovhlps(h, v.xmm(), v.xmm());
        v = combine(v, h);
        x86::Xmm h1 = cc_.newXmm();
        cc_.vpermilps(h1, v, 1);
        v = combine(v, h1);
        return s_.wrap(v);
    }

    void vector_body(const std::vector<kir::StmtRef>& body, bool masked) {
        VecLoop& L = *vl_;
        Lanes& o = *L.o;
        L.masked = masked;
        L.local_f.clear();
        L.local_k.clear();
        for (const auto& sp : body) {
            const Stmt& s = *sp;
            L.memo_f.clear();
            L.memo_k.clear();
            if (s.kind == StmtKind::Store) {
                const x86::Vec v = o.reg(vf(s.value));  // before k(): see Lanes::select
                x86::Mem m = element(s.buffer, s.index);
                if (!masked) cc_.vmovups(m, v);
                else if (o.is_k(L.tail)) cc_.k(o.mk(L.tail)).vmovups(m, v);
                else cc_.vmaskmovps(m, o.mvec(L.tail), v);
                continue;
            }
            // Assign: an accumulator update or a per-iteration temp.
            if (auto it = L.plan->reduction_of.find(&s); it != L.plan->reduction_of.end()) {
                const auto& red = L.plan->reductions[static_cast<std::size_t>(it->second)];
                F acc = L.acc[static_cast<std::size_t>(it->second)];
                F x = vf(red.operand);
                F r = reduce_step(o, red, acc, x);
                if (masked) r = o.select(L.tail, r, acc);
                cc_.vmovaps(o.reg(acc), o.reg(r));
                continue;
            }
            if (k_.temps[static_cast<std::size_t>(s.var)] == Type::boolean) L.local_k[s.var] = vk(s.value);
            else L.local_f[s.var] = vf(s.value);
        }
    }

    // The address of lane 0 of a unit-stride access in this iteration.
    x86::Mem element(int buffer, const ExprRef& index) {
        VecLoop& L = *vl_;
        auto key = std::make_pair(buffer, index.get());
        auto it = L.ptrs.find(key);
        if (it == L.ptrs.end()) {
            in_preheader([&] {
                x86::Gp saved = L.var.outer ? outer_ : vars_[static_cast<std::size_t>(L.var.var)];
                (L.var.outer ? outer_ : vars_[static_cast<std::size_t>(L.var.var)]) = L.first;
                x86::Gp idx = gp(index);
                (L.var.outer ? outer_ : vars_[static_cast<std::size_t>(L.var.var)]) = saved;
                x86::Gp p = cc_.newIntPtr();
                cc_.mov(p, x86::ptr(bufs_, buffer * 8));
                cc_.lea(p, x86::ptr(p, idx, 2));
                it = L.ptrs.emplace(key, p).first;
            });
        }
        return x86::ptr(it->second, L.i, 2);
    }

    // Runs f with the cursor in the current vector loop's preheader and the preheader's memo.
    template <class Fn> void in_preheader(Fn f) {
        VecLoop& L = *vl_;
        aj::BaseNode* saved = cc_.setCursor(L.pre);
        std::swap(memo_, L.pre_memo);
        VecLoop* v = vl_;
        vl_ = nullptr;  // scalar code from here
        f();
        vl_ = v;
        std::swap(memo_, L.pre_memo);
        L.pre = cc_.setCursor(saved);
    }

    bool varying(const ExprRef& e) const {
        auto it = vl_->plan->varying.find(e.get());
        return it != vl_->plan->varying.end() && it->second;
    }

    // A value of the vector loop's body, f32 lanes.
    F vf(const ExprRef& e) {
        VecLoop& L = *vl_;
        Lanes& o = *L.o;
        if (!varying(e)) {
            if (e->kind == ExprKind::Const) return o.constant(static_cast<float>(e->f));  // a memory operand
            auto it = L.invariant.find(e.get());
            if (it != L.invariant.end()) return it->second;
            F r;
            in_preheader([&] {
                F s = f32(e);
                r = o.fresh();
                cc_.vbroadcastss(o.reg(r), s_.reg(s).xmm());
            });
            L.invariant[e.get()] = r;
            return r;
        }
        if (auto it = L.memo_f.find(e.get()); it != L.memo_f.end()) return it->second;
        F r;
        switch (e->kind) {
        case ExprKind::Load: {
            x86::Mem m = element(e->id, e->args[0]);
            r = o.fresh();
            if (!L.masked) cc_.vmovups(o.reg(r), m);
            else if (o.is_k(L.tail)) cc_.k(o.mk(L.tail)).z().vmovups(o.reg(r), m);
            else cc_.vmaskmovps(o.reg(r), o.mvec(L.tail), m);
            break;
        }
        case ExprKind::Temp: r = L.local_f.at(e->id); break;
        case ExprKind::Unary: r = f32_unary(o, e->uop, vf(e->args[0])); break;
        case ExprKind::Binary: r = f32_binary(o, e->bop, vf(e->args[0]), vf(e->args[1])); break;
        case ExprKind::Select: r = o.select(vk(e->args[0]), vf(e->args[1]), vf(e->args[2])); break;
        case ExprKind::Cast: r = o.select(vk(e->args[0]), o.constant(1.0f), o.constant(0.0f)); break;  // bool -> f32
        default: backend("unexpected expression in a vector loop");
        }
        L.memo_f[e.get()] = r;
        return r;
    }

    // A bool of the vector loop's body, as a lane mask.
    K vk(const ExprRef& e) {
        VecLoop& L = *vl_;
        Lanes& o = *L.o;
        if (!varying(e)) backend("an invariant bool in a vector loop");
        if (auto it = L.memo_k.find(e.get()); it != L.memo_k.end()) return it->second;
        K r;
        switch (e->kind) {
        case ExprKind::Temp: r = L.local_k.at(e->id); break;
        case ExprKind::Unary: r = o.mask_not(vk(e->args[0])); break;
        case ExprKind::Binary:
            if (e->bop == BinaryOp::logical_and) r = o.mask_and(vk(e->args[0]), vk(e->args[1]));
            else if (e->bop == BinaryOp::logical_or) r = o.mask_or(vk(e->args[0]), vk(e->args[1]));
            else r = o.cmp(vf(e->args[0]), vf(e->args[1]), f32_pred(e->bop));
            break;
        case ExprKind::Cast: r = o.cmp(vf(e->args[0]), o.constant(0.0f), Cmp::ne_uq); break;  // f32 -> bool
        default: backend("unexpected bool in a vector loop");
        }
        L.memo_k[e.get()] = r;
        return r;
    }

    F f32_binary(Lanes& o, BinaryOp op, F a, F b) {
        switch (op) {
        case BinaryOp::add: return o.add(a, b);
        case BinaryOp::sub: return o.sub(a, b);
        case BinaryOp::mul: return o.mul(a, b);
        case BinaryOp::div: return o.div(a, b);
        case BinaryOp::max:
        case BinaryOp::min: return kir_minmax(o, op, a, b);
        default: break;
        }
        backend("f32 " + std::string(kir::op_name(op)) + " has no lane sequence");
    }

    // ---- scalar statements and expressions ----

    x86::Mem scalar_element(int buffer, const ExprRef& index) {
        x86::Gp p = cc_.newIntPtr();
        cc_.mov(p, x86::ptr(bufs_, buffer * 8));
        x86::Gp idx = gp(index);
        return x86::ptr(p, idx, static_cast<std::uint32_t>(dtype_shift(k_.buffers[static_cast<std::size_t>(buffer)].dtype)));
    }

    void store(const Stmt& s) {
        const DType dt = k_.buffers[static_cast<std::size_t>(s.buffer)].dtype;
        switch (dt) {
        case DType::f32: {
            F v = f32(s.value);
            cc_.vmovss(scalar_element(s.buffer, s.index), s_.reg(v).xmm());
            return;
        }
        case DType::f64: {
            x86::Xmm v = f64(s.value);
            cc_.vmovsd(scalar_element(s.buffer, s.index), v);
            return;
        }
        case DType::f16:
        case DType::bf16: {
            F v = f32(s.value);
            x86::Gp r = cc_.newInt32();
            call(dt == DType::f16 ? reinterpret_cast<const void*>(&f32_to_half) : reinterpret_cast<const void*>(&f32_to_bf16),
                 aj::FuncSignatureT<std::uint32_t, float>(aj::CallConvId::kHost), {s_.reg(v)}, r);
            x86::Mem m = scalar_element(s.buffer, s.index);
            m.setSize(2);
            cc_.mov(m, r.r16());
            return;
        }
        default: break;
        }
        x86::Gp v = gp(s.value);
        x86::Mem m = scalar_element(s.buffer, s.index);
        switch (dt) {
        case DType::i8: case DType::u8: case DType::boolean: m.setSize(1); cc_.mov(m, v.r8()); break;
        case DType::i32: m.setSize(4); cc_.mov(m, v.r32()); break;
        default: m.setSize(8); cc_.mov(m, v); break;
        }
    }

    // Calls a C function: args are xmm (float/double) or gp registers, as the signature says.
    void call(const void* fn, const aj::FuncSignature& sig, std::initializer_list<aj::BaseReg> args, const aj::BaseReg& ret) {
        aj::InvokeNode* inv = nullptr;
        cc_.invoke(&inv, aj::imm(reinterpret_cast<std::intptr_t>(fn)), sig);
        if (!inv) backend("invoke failed");
        std::size_t i = 0;
        for (const auto& a : args) inv->setArg(i++, a);
        inv->setRet(0, ret);
    }

    x86::Gp& var_reg(int id) {
        if (id < 0 || id >= k_.num_vars || !vars_[static_cast<std::size_t>(id)].isValid())
            backend("malformed kernel: loop variable used outside its loop");
        return vars_[static_cast<std::size_t>(id)];
    }

    // Keeps a 64-bit register holding a value of type t in its canonical form.
    void normalise(const x86::Gp& r, Type t) {
        switch (t) {
        case Type::i8: cc_.movsx(r, r.r8()); break;
        case Type::u8: cc_.movzx(r.r32(), r.r8()); break;
        case Type::i32: cc_.movsxd(r, r.r32()); break;
        case Type::boolean: cc_.and_(r, 1); break;
        default: break;
        }
    }

    // xmm mask register (lane 0) -> bool in a gp register.
    x86::Gp mask_to_bool(const x86::Vec& m) {
        x86::Gp r = cc_.newInt64();
        cc_.vmovd(r.r32(), m.xmm());
        cc_.and_(r.r32(), 1);
        return r;
    }
    // bool in a gp register -> xmm with lane 0 (and 1) all ones when true.
    x86::Xmm bool_to_mask(const x86::Gp& b) {
        x86::Gp t = cc_.newInt64();
        cc_.mov(t, b);
        cc_.neg(t);
        x86::Xmm m = cc_.newXmm();
        cc_.vmovq(m, t);
        return m;
    }

    x86::Gp gp(const ExprRef& e) {
        if (auto it = memo_.g.find(e.get()); it != memo_.g.end()) return it->second;
        x86::Gp r = gp_uncached(*e);
        memo_.g[e.get()] = r;
        return r;
    }

    x86::Gp gp_uncached(const Expr& e) {
        const Type t = e.type;
        switch (e.kind) {
        case ExprKind::Const: {
            x86::Gp r = cc_.newInt64();
            cc_.mov(r, t == Type::boolean ? std::int64_t(e.i != 0) : e.i);
            return r;
        }
        case ExprKind::Param: {
            x86::Gp r = cc_.newInt64();
            cc_.mov(r, x86::ptr(params_, e.id * 8));
            return r;
        }
        case ExprKind::Outer:
            if (!outer_.isValid()) backend("malformed kernel: outer index unavailable");
            return outer_;
        case ExprKind::Var: return var_reg(e.id);
        case ExprKind::Temp: return temps_[static_cast<std::size_t>(e.id)].g;
        case ExprKind::Load: {
            x86::Mem m = scalar_element(e.id, e.args[0]);
            x86::Gp r = cc_.newInt64();
            switch (k_.buffers[static_cast<std::size_t>(e.id)].dtype) {
            case DType::i8: m.setSize(1); cc_.movsx(r, m); break;
            case DType::u8: m.setSize(1); cc_.movzx(r.r32(), m); break;
            case DType::boolean:
                m.setSize(1);
                cc_.cmp(m, 0);
                cc_.setne(r.r8());
                cc_.movzx(r.r32(), r.r8());
                break;
            case DType::i32: m.setSize(4); cc_.movsxd(r, m); break;
            default: m.setSize(8); cc_.mov(r, m); break;
            }
            return r;
        }
        case ExprKind::Unary: return int_unary(e.uop, t, gp(e.args[0]));
        case ExprKind::Binary: {
            const Type at = e.args[0]->type;
            if (kir::is_comparison(e.bop)) {
                if (at == Type::f32) return mask_to_bool(s_.mvec(s_.cmp(f32(e.args[0]), f32(e.args[1]), f32_pred(e.bop))));
                if (at == Type::f64) {
                    x86::Xmm m = cc_.newXmm();
                    cc_.vcmpsd(m, f64(e.args[0]), f64(e.args[1]), static_cast<int>(f32_pred(e.bop)));
                    return mask_to_bool(m);
                }
                return int_compare(e.bop, gp(e.args[0]), gp(e.args[1]));
            }
            return int_binary(e.bop, t, gp(e.args[0]), gp(e.args[1]));
        }
        case ExprKind::Select: {
            x86::Gp c = gp(e.args[0]), a = gp(e.args[1]), b = gp(e.args[2]);
            x86::Gp r = cc_.newInt64();
            cc_.mov(r, b);
            cc_.test(c, c);
            cc_.cmovnz(r, a);
            return r;
        }
        case ExprKind::Cast: return cast_to_gp(e.args[0], t);
        }
        backend("malformed kernel: unknown expression");
    }

    x86::Gp int_unary(UnaryOp op, Type t, const x86::Gp& x) {
        x86::Gp r = cc_.newInt64();
        const bool sign = t != Type::u8;
        switch (op) {
        case UnaryOp::logical_not:
            cc_.mov(r, x);
            cc_.xor_(r, 1);
            return r;
        case UnaryOp::neg:
            cc_.mov(r, x);
            cc_.neg(r);
            normalise(r, t);
            return r;
        case UnaryOp::abs:
            cc_.mov(r, x);
            if (sign) {
                x86::Gp n = cc_.newInt64();
                cc_.mov(n, x);
                cc_.neg(n);
                cc_.test(x, x);
                cc_.cmovl(r, n);
                normalise(r, t);
            }
            return r;
        case UnaryOp::relu:
            if (!sign) {
                cc_.mov(r, x);
                return r;
            }
            cc_.xor_(r, r);
            cc_.test(x, x);
            cc_.cmovg(r, x);
            return r;
        case UnaryOp::sign: {
            x86::Gp lt = cc_.newInt64();
            cc_.xor_(r, r);
            cc_.xor_(lt, lt);
            cc_.test(x, x);
            if (sign) {
                cc_.setg(r.r8());
                cc_.setl(lt.r8());
                cc_.sub(r, lt);
            } else {
                cc_.setne(r.r8());
            }
            return r;
        }
        default: break;
        }
        backend(std::string(kir::op_name(op)) + " on an integer");
    }

    x86::Gp int_compare(BinaryOp op, const x86::Gp& a, const x86::Gp& b) {
        x86::Gp r = cc_.newInt64();
        cc_.xor_(r, r);
        cc_.cmp(a, b);
        switch (op) {
        case BinaryOp::eq: cc_.sete(r.r8()); break;
        case BinaryOp::ne: cc_.setne(r.r8()); break;
        case BinaryOp::lt: cc_.setl(r.r8()); break;
        case BinaryOp::le: cc_.setle(r.r8()); break;
        case BinaryOp::gt: cc_.setg(r.r8()); break;
        default: cc_.setge(r.r8()); break;
        }
        return r;
    }

    x86::Gp int_binary(BinaryOp op, Type t, const x86::Gp& a, const x86::Gp& b) {
        x86::Gp r = cc_.newInt64();
        switch (op) {
        case BinaryOp::logical_and: cc_.mov(r, a); cc_.and_(r, b); return r;
        case BinaryOp::logical_or: cc_.mov(r, a); cc_.or_(r, b); return r;
        case BinaryOp::add: cc_.mov(r, a); cc_.add(r, b); normalise(r, t); return r;
        case BinaryOp::sub: cc_.mov(r, a); cc_.sub(r, b); normalise(r, t); return r;
        case BinaryOp::mul: cc_.mov(r, a); cc_.imul(r, b); normalise(r, t); return r;
        case BinaryOp::max: cc_.mov(r, a); cc_.cmp(b, a); cc_.cmovg(r, b); return r;  // y > x ? y : x
        case BinaryOp::min: cc_.mov(r, a); cc_.cmp(b, a); cc_.cmovl(r, b); return r;
        case BinaryOp::div: {
            // x / 0 == 0; x / -1 == -x (wrapping: INT_MIN / -1 == INT_MIN); else truncating.
            aj::Label done = cc_.newLabel(), normal = cc_.newLabel();
            cc_.xor_(r, r);
            cc_.test(b, b);
            cc_.jz(done);
            cc_.cmp(b, -1);
            cc_.jne(normal);
            cc_.mov(r, a);
            cc_.neg(r);
            normalise(r, t);
            cc_.jmp(done);
            cc_.bind(normal);
            x86::Gp lo = cc_.newInt64(), hi = cc_.newInt64();
            cc_.mov(lo, a);
            cc_.cqo(hi, lo);
            cc_.idiv(hi, lo, b);
            cc_.mov(r, lo);
            normalise(r, t);
            cc_.bind(done);
            return r;
        }
        default: break;
        }
        backend(std::string(kir::op_name(op)) + " on an integer");
    }

    // core::convert to an integer, bool or index type.
    x86::Gp cast_to_gp(const ExprRef& a, Type to) {
        const Type from = a->type;
        if (to == Type::boolean) {
            if (from == Type::f32) return mask_to_bool(s_.mvec(s_.cmp(f32(a), s_.constant(0.0f), Cmp::ne_uq)));
            if (from == Type::f64) {
                x86::Xmm z = cc_.newXmm(), m = cc_.newXmm();
                cc_.vxorpd(z, z, z);
                cc_.vcmpsd(m, f64(a), z, static_cast<int>(Cmp::ne_uq));
                return mask_to_bool(m);
            }
            x86::Gp x = gp(a), r = cc_.newInt64();
            cc_.xor_(r, r);
            cc_.test(x, x);
            cc_.setne(r.r8());
            return r;
        }
        if (from == Type::f32 || from == Type::f64) {
            x86::Xmm d = from == Type::f64 ? f64(a) : cc_.newXmm();
            if (from == Type::f32) {
                x86::Xmm s = s_.reg(f32(a)).xmm();
                cc_.vcvtss2sd(d, s, s);
            }
            // NaN -> 0; <= min -> min; >= max -> max; else truncate.
            double lo, hi;
            std::int64_t imin, imax;
            switch (to) {
            case Type::i8: imin = INT8_MIN; imax = INT8_MAX; break;
            case Type::u8: imin = 0; imax = UINT8_MAX; break;
            case Type::i32: imin = INT32_MIN; imax = INT32_MAX; break;
            default: imin = INT64_MIN; imax = INT64_MAX; break;
            }
            lo = static_cast<double>(imin);
            hi = static_cast<double>(imax);
            x86::Gp r = cc_.newInt64(), t = cc_.newInt64();
            x86::Xmm clo = cc_.newXmm(), chi = cc_.newXmm();
            cc_.vmovsd(clo, cc_.newDoubleConst(aj::ConstPoolScope::kLocal, lo));
            cc_.vmovsd(chi, cc_.newDoubleConst(aj::ConstPoolScope::kLocal, hi));
            cc_.vcvttsd2si(r, d);  // out of range and NaN give INT64_MIN: fixed below
            cc_.mov(t, imax);
            cc_.vucomisd(d, chi);
            cc_.cmovae(r, t);  // d >= hi (not NaN: CF = 1 then)
            cc_.mov(t, imin);
            cc_.vucomisd(clo, d);
            cc_.cmovae(r, t);  // lo >= d
            cc_.xor_(t, t);
            cc_.vucomisd(d, d);
            cc_.cmovp(r, t);  // NaN
            return r;
        }
        x86::Gp x = gp(a), r = cc_.newInt64();
        cc_.mov(r, x);
        normalise(r, to);  // bool and u8 are zero-extended already: nothing changes widening
        return r;
    }

    // ---- f64 ----

    x86::Xmm f64(const ExprRef& e) {
        if (auto it = memo_.x.find(e.get()); it != memo_.x.end()) return it->second;
        x86::Xmm r = f64_uncached(*e);
        memo_.x[e.get()] = r;
        return r;
    }

    x86::Xmm dconst(double v) {
        x86::Xmm r = cc_.newXmm();
        cc_.vmovsd(r, cc_.newDoubleConst(aj::ConstPoolScope::kLocal, v));
        return r;
    }
    x86::Xmm dcall(double (*fn)(double), const x86::Xmm& x) {
        x86::Xmm r = cc_.newXmm();
        call(reinterpret_cast<const void*>(fn), aj::FuncSignatureT<double, double>(aj::CallConvId::kHost), {x}, r);
        return r;
    }
    x86::Xmm dblend(const x86::Xmm& mask, const x86::Xmm& a, const x86::Xmm& b) {  // mask ? a : b
        x86::Xmm r = cc_.newXmm();
        cc_.vblendvpd(r, b, a, mask);
        return r;
    }
    x86::Xmm dcmp(const x86::Xmm& a, const x86::Xmm& b, Cmp p) {
        x86::Xmm m = cc_.newXmm();
        cc_.vcmpsd(m, a, b, static_cast<int>(p));
        return m;
    }

    x86::Xmm f64_uncached(const Expr& e) {
        switch (e.kind) {
        case ExprKind::Const: return dconst(e.f);
        case ExprKind::Temp: return temps_[static_cast<std::size_t>(e.id)].x;
        case ExprKind::Load: {
            x86::Xmm r = cc_.newXmm();
            cc_.vmovsd(r, scalar_element(e.id, e.args[0]));
            return r;
        }
        case ExprKind::Unary: return f64_unary(e.uop, f64(e.args[0]));
        case ExprKind::Binary: {
            x86::Xmm a = f64(e.args[0]), b = f64(e.args[1]), r = cc_.newXmm();
            switch (e.bop) {
            case BinaryOp::add: cc_.vaddsd(r, a, b); return r;
            case BinaryOp::sub: cc_.vsubsd(r, a, b); return r;
            case BinaryOp::mul: cc_.vmulsd(r, a, b); return r;
            case BinaryOp::div: cc_.vdivsd(r, a, b); return r;
            case BinaryOp::pow:
                call(reinterpret_cast<const void*>(&f64_pow), aj::FuncSignatureT<double, double, double>(aj::CallConvId::kHost),
                     {a, b}, r);
                return r;
            case BinaryOp::max:
            case BinaryOp::min: {
                if (e.bop == BinaryOp::max) cc_.vmaxsd(r, b, a);
                else cc_.vminsd(r, b, a);
                x86::Xmm r2 = dblend(dcmp(b, b, Cmp::unord_q), b, r);
                return dblend(dcmp(a, a, Cmp::unord_q), a, r2);
            }
            default: break;
            }
            backend("f64 " + std::string(kir::op_name(e.bop)));
        }
        case ExprKind::Select: {
            x86::Xmm m = bool_to_mask(gp(e.args[0]));
            return dblend(m, f64(e.args[1]), f64(e.args[2]));
        }
        case ExprKind::Cast: {
            const Type from = e.args[0]->type;
            x86::Xmm r = cc_.newXmm();
            cc_.vxorpd(r, r, r);
            if (from == Type::f32) {
                x86::Xmm s = s_.reg(f32(e.args[0])).xmm();
                cc_.vcvtss2sd(r, r, s);
            } else {
                cc_.vcvtsi2sd(r, r, gp(e.args[0]));
            }
            return r;
        }
        default: break;
        }
        backend("malformed kernel: f64 expression");
    }

    x86::Xmm f64_unary(UnaryOp op, const x86::Xmm& x) {
        x86::Xmm r = cc_.newXmm();
        switch (op) {
        case UnaryOp::neg: cc_.vxorpd(r, x, dconst(-0.0)); return r;
        case UnaryOp::abs: {
            x86::Xmm m = cc_.newXmm();
            cc_.vmovsd(m, cc_.newUInt64Const(aj::ConstPoolScope::kLocal, 0x7fffffffffffffffull));
            cc_.vandpd(r, x, m);
            return r;
        }
        case UnaryOp::sqrt: cc_.vsqrtsd(r, x, x); return r;
        case UnaryOp::rsqrt: {
            x86::Xmm s = cc_.newXmm();
            cc_.vsqrtsd(s, x, x);
            cc_.vdivsd(r, dconst(1.0), s);
            return r;
        }
        case UnaryOp::reciprocal: cc_.vdivsd(r, dconst(1.0), x); return r;
        case UnaryOp::relu: {
            x86::Xmm z = dconst(0.0);
            return dblend(dcmp(x, z, Cmp::nle_uq), x, z);
        }
        case UnaryOp::floor: cc_.vroundsd(r, x, x, 1 | 8); return r;
        case UnaryOp::ceil: cc_.vroundsd(r, x, x, 2 | 8); return r;
        case UnaryOp::round: cc_.vroundsd(r, x, x, 0 | 8); return r;
        case UnaryOp::sign: {
            x86::Xmm z = dconst(0.0);
            x86::Xmm v = dblend(dcmp(x, x, Cmp::unord_q), x, z);
            v = dblend(dcmp(x, z, Cmp::lt_os), dconst(-1.0), v);
            return dblend(dcmp(x, z, Cmp::gt_os), dconst(1.0), v);
        }
        case UnaryOp::exp: return dcall(&f64_exp, x);
        case UnaryOp::log: return dcall(&f64_log, x);
        case UnaryOp::sin: return dcall(&f64_sin, x);
        case UnaryOp::cos: return dcall(&f64_cos, x);
        case UnaryOp::tanh: return dcall(&f64_tanh, x);
        case UnaryOp::erf: return dcall(&f64_erf, x);
        case UnaryOp::sigmoid: return dcall(&f64_sigmoid, x);
        case UnaryOp::gelu_erf: return dcall(&f64_gelu_erf, x);
        case UnaryOp::gelu_tanh: return dcall(&f64_gelu_tanh, x);
        case UnaryOp::silu: return dcall(&f64_silu, x);
        case UnaryOp::logical_not: break;
        }
        backend("f64 " + std::string(kir::op_name(op)));
    }

    // ---- f32 (scalar: lane 0 of xmm) ----

    F f32(const ExprRef& e) {
        if (auto it = memo_.f.find(e.get()); it != memo_.f.end()) return it->second;
        F r = f32_uncached(*e);
        memo_.f[e.get()] = r;
        return r;
    }

    F fcall1(float (*fn)(float), F x) {
        F r = s_.fresh();
        call(reinterpret_cast<const void*>(fn), aj::FuncSignatureT<float, float>(aj::CallConvId::kHost), {s_.reg(x).xmm()},
             s_.reg(r).xmm());
        return r;
    }

    F f32_uncached(const Expr& e) {
        switch (e.kind) {
        case ExprKind::Const: return s_.constant(static_cast<float>(e.f));
        case ExprKind::Temp: return temps_[static_cast<std::size_t>(e.id)].f;
        case ExprKind::Load: {
            const DType dt = k_.buffers[static_cast<std::size_t>(e.id)].dtype;
            x86::Mem m = scalar_element(e.id, e.args[0]);
            F r = s_.fresh();
            if (dt == DType::f32) {
                cc_.vmovss(s_.reg(r).xmm(), m);
                return r;
            }
            x86::Gp h = cc_.newInt32();
            m.setSize(2);
            cc_.movzx(h, m);
            if (dt == DType::bf16) {
                cc_.shl(h, 16);
                cc_.vmovd(s_.reg(r).xmm(), h);
            } else {
                call(reinterpret_cast<const void*>(&half_to_f32), aj::FuncSignatureT<float, std::uint32_t>(aj::CallConvId::kHost),
                     {h}, s_.reg(r).xmm());
            }
            return r;
        }
        case ExprKind::Unary: {
            F x = f32(e.args[0]);
            if (e.uop == UnaryOp::sin) return fcall1(&f32_sin, x);
            if (e.uop == UnaryOp::cos) return fcall1(&f32_cos, x);
            return f32_unary(s_, e.uop, x);
        }
        case ExprKind::Binary: {
            F a = f32(e.args[0]), b = f32(e.args[1]);
            if (e.bop == BinaryOp::pow) {
                F r = s_.fresh();
                call(reinterpret_cast<const void*>(&f32_pow), aj::FuncSignatureT<float, float, float>(aj::CallConvId::kHost),
                     {s_.reg(a).xmm(), s_.reg(b).xmm()}, s_.reg(r).xmm());
                return r;
            }
            return f32_binary(s_, e.bop, a, b);
        }
        case ExprKind::Select: {
            K m = s_.wrap_mask(bool_to_mask(gp(e.args[0])));
            return s_.select(m, f32(e.args[1]), f32(e.args[2]));
        }
        case ExprKind::Cast: {
            const Type from = e.args[0]->type;
            F r = s_.fresh();
            x86::Xmm x = s_.reg(r).xmm();
            cc_.vxorps(x, x, x);
            if (from == Type::f64) cc_.vcvtsd2ss(x, x, f64(e.args[0]));
            else cc_.vcvtsi2ss(x, x, gp(e.args[0]));
            return r;
        }
        default: break;
        }
        backend("malformed kernel: f32 expression");
    }
};

// ---- the runtime ----

struct Runtime {
    aj::JitRuntime rt;
    std::mutex mu;  // add / release
    std::atomic<std::int64_t> kernels{0};
    std::atomic<std::size_t> bytes{0};
};

Runtime& runtime() {
    static Runtime* r = new Runtime;  // never destroyed: kernels may outlive static objects
    return *r;
}

}  // namespace

HostIsa host_isa() {
    static const HostIsa isa = [] {
        HostIsa h;
#if defined(__x86_64__) || defined(_M_X64)
        const auto& f = aj::CpuInfo::host().features().x86();
        h.usable = f.hasAVX2() && f.hasFMA();
        h.avx512 = h.usable && f.hasAVX512_F();
#endif
        return h;
    }();
    return isa;
}

JitCode generate(const kir::Kernel& k, const Analysis& a, int vector_bytes) {
    Runtime& R = runtime();
    aj::CodeHolder code;
    ErrorSink sink;
    if (aj::Error e = code.init(R.rt.environment())) backend(std::string("asmjit: ") + aj::DebugUtils::errorAsString(e));
    code.setErrorHandler(&sink);
    x86::Compiler cc(&code);
    Gen(cc, k, a, vector_bytes).run();
    if (sink.error) backend("asmjit: " + sink.text);
    if (aj::Error e = cc.finalize()) backend(std::string("asmjit finalize: ") + aj::DebugUtils::errorAsString(e));
    if (sink.error) backend("asmjit: " + sink.text);
    JitCode out;
    out.bytes = code.codeSize();
    {
        std::lock_guard<std::mutex> lock(R.mu);
        if (aj::Error e = R.rt.add(&out.fn, &code)) backend(std::string("asmjit runtime: ") + aj::DebugUtils::errorAsString(e));
    }
    R.kernels.fetch_add(1);
    R.bytes.fetch_add(out.bytes);
    return out;
}

void release(const JitCode& code) {
    if (!code.fn) return;
    Runtime& R = runtime();
    {
        std::lock_guard<std::mutex> lock(R.mu);
        R.rt.release(code.fn);
    }
    R.kernels.fetch_sub(1);
    R.bytes.fetch_sub(code.bytes);
}

std::int64_t live_kernels() { return runtime().kernels.load(); }
std::size_t live_code_bytes() { return runtime().bytes.load(); }

}  // namespace kiln::tiers::asmjit_tier
