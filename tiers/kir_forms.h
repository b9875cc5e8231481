#pragma once
// KIR forms that the tiers recognise and compile specially (both CPU tiers, and the GPU
// printer's warp-per-row reductions), matched the same way by all so that they agree on
// what is compiled as what.
#include "src/kir/kir.h"

#include <cmath>
#include <limits>

namespace kiln::tiers {

// `t = select(x > t, x, t)` (a max) or `t = select(x < t, x, t)` (a min) on a float temp
// t: an extreme that skips a NaN x (its comparison is false) and keeps a NaN t. Softmax rows
// take their max this way (src/kir/lower_row.cpp): it compiles to a plain max instruction,
// where KIR's NaN-propagating `max` needs fix-ups. Returns x and sets `max` when `value`
// (assigned to temp t) has this form; null otherwise.
inline kir::ExprRef nan_skipping_extreme(int t, const kir::Expr& value, bool& max) {
    using kir::ExprKind;
    if (value.kind != ExprKind::Select || !kir::is_float(value.type) || value.args.size() != 3) return nullptr;
    const kir::Expr& c = *value.args[0];
    if (c.kind != ExprKind::Binary || (c.bop != kir::BinaryOp::gt && c.bop != kir::BinaryOp::lt)) return nullptr;
    auto is_t = [t](const kir::Expr& e) { return e.kind == ExprKind::Temp && e.id == t; };
    if (!is_t(*c.args[1]) || !is_t(*value.args[2]) || !kir::same_expr(*c.args[0], *value.args[1])) return nullptr;
    max = c.bop == kir::BinaryOp::gt;
    return value.args[1];
}

// A clamp of v to constant bounds, as a kernel can apply it when it stores v:
// min(max(v, lo), hi), max(v, lo) or min(v, hi) (ONNX's Clip and relu6), v first and the
// bound, a constant of v's float type (not NaN), second; or clamp's form (src/kir/lower,
// Op::clamp) v < lo ? lo : (v > hi ? hi : v) with constant bounds lo <= hi. Each has the
// values of x86's min(hi, max(lo, v)) for every v (NaN kept, a v equal to a bound kept, -0
// and +0 included). Returns v and sets lo and hi (an absent bound: -inf or inf), or returns
// `value` itself with lo = -inf and hi = inf when it is none of these.
inline const kir::Expr* constant_clamp(const kir::Expr& value, double& lo, double& hi) {
    using kir::BinaryOp;
    using kir::ExprKind;
    lo = -std::numeric_limits<double>::infinity();
    hi = std::numeric_limits<double>::infinity();
    // op(v, c), a float v and a constant c of its type: v (c in *at), or null.
    auto bound = [](const kir::Expr& e, BinaryOp op, double* at) -> const kir::Expr* {
        if (e.kind != ExprKind::Binary || e.bop != op || !kir::is_float(e.args[0]->type)) return nullptr;
        const kir::Expr& c = *e.args[1];
        if (c.kind != ExprKind::Const || c.type != e.args[0]->type || std::isnan(c.f)) return nullptr;
        *at = c.f;
        return e.args[0].get();
    };
    // op(v, c) ? c : rest: v (rest in *rest), or null.
    auto pick = [&](const kir::Expr& e, BinaryOp op, double* at, const kir::Expr** rest) -> const kir::Expr* {
        if (e.kind != ExprKind::Select) return nullptr;
        const kir::Expr* v = bound(*e.args[0], op, at);
        if (!v || !kir::same_expr(*e.args[0]->args[1], *e.args[1])) return nullptr;
        *rest = e.args[2].get();
        return v;
    };
    const kir::Expr *rest = nullptr, *inner = nullptr;
    double l = 0, h = 0;
    if (const kir::Expr* v = pick(value, BinaryOp::lt, &l, &rest);
        v && (inner = pick(*rest, BinaryOp::gt, &h, &rest)) && kir::same_expr(*v, *inner) && kir::same_expr(*v, *rest) && l <= h) {
        lo = l;
        hi = h;
        return v;
    }
    const kir::Expr* v = &value;
    if (const kir::Expr* in = bound(*v, BinaryOp::min, &hi)) v = in;
    if (const kir::Expr* in = bound(*v, BinaryOp::max, &lo)) v = in;
    return v;
}

// SiLU of v, as a conv kernel can apply it when it stores v: silu(v), or v times sigmoid(v)
// either way round. Returns v, or null when `value` is neither.
inline const kir::Expr* silu_argument(const kir::Expr& value) {
    auto is_sigmoid_of = [](const kir::Expr& s, const kir::Expr& x) {
        return s.kind == kir::ExprKind::Unary && s.uop == kir::UnaryOp::sigmoid && kir::same_expr(*s.args[0], x);
    };
    if (value.kind == kir::ExprKind::Unary && value.uop == kir::UnaryOp::silu) return value.args[0].get();
    if (value.kind != kir::ExprKind::Binary || value.bop != kir::BinaryOp::mul) return nullptr;
    if (is_sigmoid_of(*value.args[1], *value.args[0])) return value.args[0].get();
    if (is_sigmoid_of(*value.args[0], *value.args[1])) return value.args[1].get();
    return nullptr;
}

}  // namespace kiln::tiers
