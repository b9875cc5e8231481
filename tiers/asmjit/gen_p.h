#pragma once
// Internal to tiers/asmjit (included only by its .cpp files): the generator of one kernel,
// KIR -> x86-64 with asmjit's x86::Compiler. The kernel's loop nest is emitted as it stands:
// scalar code for every statement, and, for the loops the analysis marked, a vector loop
// (one masked body covers the full vectors and the tail). Every register is virtual;
// asmjit's allocator assigns and spills them.
//
// Scalar values live in general-purpose registers (integers, bools and indices, held sign-
// or zero-extended to 64 bits, so 64-bit compares and divides give the narrow type's
// answer) or in xmm lane 0 (f32, f64). f32 arithmetic, scalar or vector, goes through one
// LaneOps implementation (Lanes, lanes_p.h), so vmath.h's sequences give the same value in
// every lane and in scalar code.
//
// The methods are defined by concern:
//   loops.cpp         run(), statements, scalar loops, stores, calls to callouts.h
//   vector_loops.cpp  vector loops: the masked body, reductions, hoisted invariants
//   scalar_int.cpp    integer, bool and index expressions; casts to them
//   scalar_float.cpp  f64 and scalar f32 expressions
#include "src/kir/kir.h"
#include "tiers/asmjit/analyze.h"
#include "tiers/asmjit/lanes_p.h"

#include <asmjit/x86.h>

#include <initializer_list>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::tiers::asmjit_tier {

class Gen {
public:
    Gen(x86::Compiler& cc, const kir::Kernel& k, const Analysis& a, int vbytes)
        : cc_(cc), k_(k), a_(a), vbytes_(vbytes), s_(cc, 16) {}

    // Emits the kernel function into cc.
    void run();

private:
    using BinaryOp = kir::BinaryOp;
    using Expr = kir::Expr;
    using ExprKind = kir::ExprKind;
    using ExprRef = kir::ExprRef;
    using Stmt = kir::Stmt;
    using StmtKind = kir::StmtKind;
    using Type = kir::Type;
    using UnaryOp = kir::UnaryOp;

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

    // ---- statements and scalar loops (loops.cpp) ----
    // for (iv; iv < end; ++iv) body(); iv must be a register the body does not write.
    template <class Body> void scalar_loop(const x86::Gp& iv, const x86::Gp& end, Body body);
    void stmts(const std::vector<kir::StmtRef>& ss);
    void stmt(const Stmt& s);
    void store(const Stmt& s);
    x86::Mem scalar_element(int buffer, const ExprRef& index);
    // Calls a C function: args are xmm (float/double) or gp registers, as the signature says.
    void call(const void* fn, const aj::FuncSignature& sig, std::initializer_list<aj::BaseReg> args, const aj::BaseReg& ret);
    x86::Gp& var_reg(int id);

    // ---- vector loops (vector_loops.cpp) ----
    void vector_loop(LoopVar v, const LoopPlan& plan, const x86::Gp& begin, const x86::Gp& end,
                     const std::vector<kir::StmtRef>& body);
    // Reduces the lanes of `acc` to lane 0 of an xmm register of the scalar Lanes.
    F horizontal(Lanes& o, const LoopPlan::Reduction& red, F acc);
    void vector_body(const std::vector<kir::StmtRef>& body, bool masked);
    // The address of lane 0 of a unit-stride access in this iteration.
    x86::Mem element(int buffer, const ExprRef& index);
    // Runs f with the cursor in the current vector loop's preheader and the preheader's memo.
    template <class Fn> void in_preheader(Fn f);
    bool varying(const ExprRef& e) const;
    // A value of the vector loop's body, f32 lanes.
    F vf(const ExprRef& e);
    // A bool of the vector loop's body, as a lane mask.
    K vk(const ExprRef& e);

    // ---- integer, bool and index values (scalar_int.cpp) ----
    // Keeps a 64-bit register holding a value of type t in its canonical form.
    void normalise(const x86::Gp& r, Type t);
    // xmm mask register (lane 0) -> bool in a gp register.
    x86::Gp mask_to_bool(const x86::Vec& m);
    // bool in a gp register -> xmm with lane 0 (and 1) all ones when true.
    x86::Xmm bool_to_mask(const x86::Gp& b);
    x86::Gp gp(const ExprRef& e);
    x86::Gp gp_uncached(const Expr& e);
    x86::Gp int_unary(UnaryOp op, Type t, const x86::Gp& x);
    x86::Gp int_compare(BinaryOp op, const x86::Gp& a, const x86::Gp& b);
    x86::Gp int_binary(BinaryOp op, Type t, const x86::Gp& a, const x86::Gp& b);
    // core::convert to an integer, bool or index type.
    x86::Gp cast_to_gp(const ExprRef& a, Type to);

    // ---- f64 and scalar f32 values (scalar_float.cpp) ----
    x86::Xmm f64(const ExprRef& e);
    x86::Xmm dconst(double v);
    x86::Xmm dcall(double (*fn)(double), const x86::Xmm& x);
    x86::Xmm dblend(const x86::Xmm& mask, const x86::Xmm& a, const x86::Xmm& b);  // mask ? a : b
    x86::Xmm dcmp(const x86::Xmm& a, const x86::Xmm& b, Cmp p);
    x86::Xmm f64_uncached(const Expr& e);
    x86::Xmm f64_unary(UnaryOp op, const x86::Xmm& x);
    F f32(const ExprRef& e);
    F fcall1(float (*fn)(float), F x);
    F f32_uncached(const Expr& e);
};

}  // namespace kiln::tiers::asmjit_tier
