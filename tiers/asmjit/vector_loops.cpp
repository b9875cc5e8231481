// The generator's vector loops (gen_p.h): one masked body (lanes [0, n - i) live) that
// covers the full vectors and the tail, f32 values as Lanes, bools as lane masks, unit-stride
// accesses through pointers computed in the preheader, loop invariants broadcast there, and
// reductions kept in vector accumulators and combined horizontally after the loop.
#include "tiers/asmjit/gen_p.h"

#include <cmath>
#include <cstdint>
#include <string>

namespace kiln::tiers::asmjit_tier {

// Runs f with the cursor in the current vector loop's preheader and the preheader's memo.
template <class Fn> void Gen::in_preheader(Fn f) {
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

void Gen::vector_loop(LoopVar v, const LoopPlan& plan, const x86::Gp& begin, const x86::Gp& end,
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
F Gen::horizontal(Lanes& o, const LoopPlan::Reduction& red, F acc) {
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

void Gen::vector_body(const std::vector<kir::StmtRef>& body, bool masked) {
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
x86::Mem Gen::element(int buffer, const ExprRef& index) {
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

bool Gen::varying(const ExprRef& e) const {
    auto it = vl_->plan->varying.find(e.get());
    return it != vl_->plan->varying.end() && it->second;
}

// A value of the vector loop's body, f32 lanes.
F Gen::vf(const ExprRef& e) {
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
K Gen::vk(const ExprRef& e) {
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

}  // namespace kiln::tiers::asmjit_tier
