// When the warp-per-row form applies (print_p.h: WarpPlan), decided on the kernel IR alone.
// The kernel's body (one outer index: one row) must be top-level assignments, stores and
// loops, where every top-level loop can be split across lanes:
// - each temp it assigns is either a reduction (assigned once, at the loop body's top level,
//   as t = t op e with op add, max or min on f32 or f64, or as the NaN-skipping maximum or
//   minimum of tiers/kir_forms.h (select(e > t, e, t)), e not reading t, t read nowhere else in the loop, and for a
//   sum t's last top-level assignment before the loop 0; max and min, being idempotent, may
//   start from any value) or local to an iteration (its first access in the iteration is a write, and
//   nothing after the loop reads it);
// - each store in it writes an element indexed by the loop variable (distinct iterations,
//   distinct elements);
// and at least one top-level loop has a reduction (a row reduction: elementwise rows keep the
// generic form). Reordering a sum across lanes changes it within the float tolerance the CPU
// tiers' vector code has too.
#include "tiers/gpu/print_p.h"

#include "tiers/kir_forms.h"

#include <optional>
#include <set>

namespace kiln::tiers::gpu::detail {
namespace {

using kir::BinaryOp;
using kir::Expr;
using kir::ExprKind;
using kir::ExprRef;
using kir::Stmt;
using kir::StmtKind;
using kir::StmtRef;
using kir::Type;

void temps_read(const ExprRef& e, std::set<int>& out) {
    if (!e) return;
    if (e->kind == ExprKind::Temp) out.insert(e->id);
    for (const auto& a : e->args) temps_read(a, out);
}
// Temps read and assigned by statements (nested loops included).
void accesses(const std::vector<StmtRef>& body, std::set<int>& reads, std::set<int>& writes) {
    for (const auto& s : body) {
        temps_read(s->begin, reads);
        temps_read(s->end, reads);
        temps_read(s->index, reads);
        temps_read(s->value, reads);
        if (s->kind == StmtKind::Assign) writes.insert(s->var);
        if (s->kind == StmtKind::Loop) accesses(s->body, reads, writes);
    }
}
bool stores_use_var(const std::vector<StmtRef>& body, int v) {
    for (const auto& s : body) {
        if (s->kind == StmtKind::Store && !kir::uses_var(s->index, v)) return false;
        if (s->kind == StmtKind::Loop && !stores_use_var(s->body, v)) return false;
    }
    return true;
}
// The update of reduction temp t in `v`, or nullopt: t op e (add, max, min), or the
// NaN-skipping extreme of tiers/kir_forms.h, select(e > t, e, t) (returned as gt) or
// select(e < t, e, t) (lt). *e receives the operand e.
std::optional<std::pair<BinaryOp, bool>> reduction_update(const Expr& v, int t, ExprRef* e) {
    if (v.kind == ExprKind::Binary && (v.bop == BinaryOp::add || v.bop == BinaryOp::max || v.bop == BinaryOp::min) &&
        v.args[0]->kind == ExprKind::Temp && v.args[0]->id == t) {
        *e = v.args[1];
        return std::make_pair(v.bop, false);
    }
    bool max = false;
    if (ExprRef x = nan_skipping_extreme(t, v, max)) {
        *e = std::move(x);
        return std::make_pair(max ? BinaryOp::gt : BinaryOp::lt, true);
    }
    return std::nullopt;
}
// Whether temp t's first access in every iteration of `body` is a write (top level, in order).
bool written_before_read(const std::vector<StmtRef>& body, int t) {
    for (const auto& s : body) {
        std::set<int> r, w;
        accesses({s}, r, w);
        if (s->kind == StmtKind::Assign) {
            temps_read(s->value, r);
            if (r.count(t)) return false;
            if (s->var == t) return true;
            continue;
        }
        if (r.count(t) || w.count(t)) return false;  // read, or written only inside a nested loop
    }
    return true;  // never accessed
}

}  // namespace

bool plan_warp_rows(const kir::Kernel& k, WarpPlan* plan) {
    plan->loops.clear();
    if (k.matmul) return false;
    bool any_reduction = false;
    for (std::size_t i = 0; i < k.body.size(); ++i) {
        const Stmt& loop = *k.body[i];
        if (loop.kind != StmtKind::Loop) continue;
        if (!stores_use_var(loop.body, loop.var)) return false;
        std::set<int> reads, writes;
        accesses(loop.body, reads, writes);
        // What the statements after the loop read.
        std::set<int> later_reads, later_writes;
        accesses(std::vector<StmtRef>(k.body.begin() + static_cast<std::ptrdiff_t>(i) + 1, k.body.end()), later_reads,
                 later_writes);
        std::vector<WarpReduction> reductions;
        for (int t : writes) {
            const Type tt = k.temps[static_cast<std::size_t>(t)];
            // A reduction: one top-level update t = t op e.
            const Stmt* update = nullptr;
            int assigns = 0;
            for (const auto& s : loop.body)
                if (s->kind == StmtKind::Assign && s->var == t) {
                    update = s.get();
                    ++assigns;
                }
            std::set<int> nested_reads, nested_writes;
            for (const auto& s : loop.body)
                if (s->kind == StmtKind::Loop) accesses({s}, nested_reads, nested_writes);
            bool reduction = false;
            if (assigns == 1 && !nested_writes.count(t) && (tt == Type::f32 || tt == Type::f64)) {
                const Expr& v = *update->value;
                ExprRef operand;
                if (const auto form = reduction_update(v, t, &operand)) {
                    std::set<int> e_reads;
                    temps_read(operand, e_reads);
                    // Read nowhere else in the loop: only the update's own operand.
                    std::set<int> other_reads;
                    for (const auto& s : loop.body) {
                        if (s.get() == update) continue;
                        std::set<int> w;
                        accesses({s}, other_reads, w);
                    }
                    // The last top-level assignment before the loop: the identity of op.
                    const Expr* init = nullptr;
                    for (std::size_t j = i; j-- > 0;)
                        if (k.body[j]->kind == StmtKind::Assign && k.body[j]->var == t) {
                            init = k.body[j]->value.get();
                            break;
                        } else if (k.body[j]->kind == StmtKind::Loop) {
                            std::set<int> r, w;
                            accesses({k.body[j]}, r, w);
                            if (w.count(t)) break;
                        }
                    // max and min are idempotent: the value t holds before the loop (the same in
                    // every lane) may enter every lane's partial result; a sum needs 0 there.
                    const bool idempotent = form->first != BinaryOp::add;
                    reduction = !e_reads.count(t) && !other_reads.count(t) && (idempotent || (init && init->kind == ExprKind::Const && init->f == 0.0));
                    if (reduction) reductions.push_back({t, form->first, form->second, tt});
                }
            }
            if (!reduction && (!written_before_read(loop.body, t) || later_reads.count(t))) return false;
        }
        any_reduction = any_reduction || !reductions.empty();
        plan->loops.emplace_back(&loop, std::move(reductions));
    }
    return any_reduction;
}

}  // namespace kiln::tiers::gpu::detail
