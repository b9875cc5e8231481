// The generator's statements (gen_p.h): the kernel function and its outer loop, scalar
// loops, assignments to temps, stores (f16/bf16 through callouts.h) and calls from
// generated code to C functions.
#include "tiers/asmjit/callouts.h"
#include "tiers/asmjit/gen_p.h"

#include <cstdint>
#include <string>

namespace kiln::tiers::asmjit_tier {
namespace {

int dtype_shift(DType d) {
    switch (d) {
    case DType::f64: case DType::i64: return 3;
    case DType::f32: case DType::i32: return 2;
    case DType::f16: case DType::bf16: return 1;
    case DType::i8: case DType::u8: case DType::boolean: return 0;
    }
    return 0;
}

}  // namespace

// for (iv; iv < end; ++iv) body(); iv must be a register the body does not write.
template <class Body> void Gen::scalar_loop(const x86::Gp& iv, const x86::Gp& end, Body body) {
    aj::Label head = cc_.newLabel(), exit = cc_.newLabel();
    cc_.bind(head);
    cc_.cmp(iv, end);
    cc_.jge(exit);
    body();
    cc_.inc(iv);
    cc_.jmp(head);
    cc_.bind(exit);
}

void Gen::run() {
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

void Gen::stmts(const std::vector<kir::StmtRef>& ss) {
    for (const auto& s : ss) stmt(*s);
}

void Gen::stmt(const Stmt& s) {
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

void Gen::store(const Stmt& s) {
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
        call(dt == DType::f16 ? reinterpret_cast<const void*>(&callouts::f32_to_half) : reinterpret_cast<const void*>(&callouts::f32_to_bf16),
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

x86::Mem Gen::scalar_element(int buffer, const ExprRef& index) {
    x86::Gp p = cc_.newIntPtr();
    cc_.mov(p, x86::ptr(bufs_, buffer * 8));
    x86::Gp idx = gp(index);
    return x86::ptr(p, idx, static_cast<std::uint32_t>(dtype_shift(k_.buffers[static_cast<std::size_t>(buffer)].dtype)));
}

// Calls a C function: args are xmm (float/double) or gp registers, as the signature says.
void Gen::call(const void* fn, const aj::FuncSignature& sig, std::initializer_list<aj::BaseReg> args, const aj::BaseReg& ret) {
    aj::InvokeNode* inv = nullptr;
    cc_.invoke(&inv, aj::imm(reinterpret_cast<std::intptr_t>(fn)), sig);
    if (!inv) backend("invoke failed");
    std::size_t i = 0;
    for (const auto& a : args) inv->setArg(i++, a);
    inv->setRet(0, ret);
}

x86::Gp& Gen::var_reg(int id) {
    if (id < 0 || id >= k_.num_vars || !vars_[static_cast<std::size_t>(id)].isValid())
        backend("malformed kernel: loop variable used outside its loop");
    return vars_[static_cast<std::size_t>(id)];
}

}  // namespace kiln::tiers::asmjit_tier
