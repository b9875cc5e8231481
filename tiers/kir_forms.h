#pragma once
// KIR forms that the tiers recognise and compile specially (both CPU tiers, and the GPU
// printer's warp-per-row reductions), matched the same way by all so that they agree on
// what is compiled as what.
#include "src/kir/kir.h"

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

}  // namespace kiln::tiers
