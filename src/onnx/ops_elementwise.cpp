// Arithmetic, comparisons, logic, unary math, Where, Clip, Identity.
#include "src/onnx/registry.h"

#include <cmath>
#include <limits>
#include <optional>

namespace kiln::onnx_import {
namespace {

template <Var (*F)(const Var&)> void unary(NodeCtx& c) { c.set_out(0, F(c.in(0))); }

Var add_(const Var& a, const Var& b) { return a + b; }
Var sub_(const Var& a, const Var& b) { return a - b; }
Var mul_(const Var& a, const Var& b) { return a * b; }
Var div_(const Var& a, const Var& b) { return a / b; }
Var eq_(const Var& a, const Var& b) { return a == b; }
Var lt_(const Var& a, const Var& b) { return a < b; }
Var le_(const Var& a, const Var& b) { return a <= b; }
Var gt_(const Var& a, const Var& b) { return a > b; }
Var ge_(const Var& a, const Var& b) { return a >= b; }
template <Var (*F)(const Var&, const Var&)> void binary(NodeCtx& c) {
    c.require(c.in(0).dtype() == c.in(1).dtype(), "",
              "operands must have one element type, got " + std::string(dtype_name(c.in(0).dtype())) + " and " +
                  std::string(dtype_name(c.in(1).dtype())));
    c.set_out(0, F(c.in(0), c.in(1)));
}

// Max, Min, Sum, Mean: one or more operands, broadcast together.
template <Var (*F)(const Var&, const Var&)> void variadic(NodeCtx& c) {
    std::vector<Var> xs = c.all_inputs();
    c.require(!xs.empty(), "", "expected at least one input");
    Var acc = xs[0];
    for (std::size_t i = 1; i < xs.size(); ++i) acc = F(acc, xs[i]);
    c.set_out(0, acc);
}
void mean_variadic(NodeCtx& c) {
    std::vector<Var> xs = c.all_inputs();
    c.require(!xs.empty(), "", "expected at least one input");
    c.require(is_floating(xs[0].dtype()), "", "Mean of integers is not supported");
    Var acc = xs[0];
    for (std::size_t i = 1; i < xs.size(); ++i) acc = acc + xs[i];
    c.set_out(0, xs.size() == 1 ? acc : acc / static_cast<double>(xs.size()));
}

void pow_(NodeCtx& c) {
    Var x = c.in(0), y = c.in(1);
    if (is_floating(x.dtype())) {
        // A constant exponent of 2 or 3 (GPT-2's gelu: x^3) becomes products, which every tier
        // vectorises (a pow is a libm call per element): x^2 is x*x exactly; x*x*x rounds twice
        // where pow rounds once (within an ulp or two). Only where the output keeps x's shape.
        if (std::optional<Tensor> cy = constant_value(y); cy && cy->numel() == 1 && y.rank() <= x.rank()) {
            const double e = cy->to_doubles()[0];
            if (e == 2.0) return c.set_out(0, x * x);
            if (e == 3.0) return c.set_out(0, x * x * x);
        }
        c.set_out(0, pow(x, y.dtype() == x.dtype() ? y : cast(y, x.dtype())));
        return;
    }
    c.require(is_integer(x.dtype()), "", "the base must be numeric");
    // Integer powers: computed in f64 (exact below 2^53) and converted back.
    c.set_out(0, cast(pow(cast(x, DType::f64), cast(y, DType::f64)), x.dtype()));
}

void tan_(NodeCtx& c) { c.set_out(0, sin(c.in(0)) / cos(c.in(0))); }

void logic(NodeCtx& c) {
    Var a = c.in(0), b = c.in(1);
    c.require(a.dtype() == DType::boolean && b.dtype() == DType::boolean, "", "expected boolean operands");
    const std::string& op = c.op();
    if (op == "And") c.set_out(0, where(a, b, a));
    else if (op == "Or") c.set_out(0, where(a, a, b));
    else c.set_out(0, a != b);  // Xor
}
void not_(NodeCtx& c) { c.set_out(0, logical_not(c.in(0))); }

void where_(NodeCtx& c) { c.set_out(0, where(c.in(0), c.in(1), c.in(2))); }

void identity(NodeCtx& c) { c.set_out(0, c.in(0)); }

void clip(NodeCtx& c) {
    Var x = c.in(0);
    if (c.opset() < 11) {
        double lo = c.attr_f("min", -std::numeric_limits<double>::infinity());
        double hi = c.attr_f("max", std::numeric_limits<double>::infinity());
        c.set_out(0, minimum(maximum(x, scalar_like(x, lo)), scalar_like(x, hi)));
        return;
    }
    c.require(!c.has_attr("min") && !c.has_attr("max"), "min", "from opset 11 the bounds are inputs, not attributes");
    // min(max(x, lo), hi): when lo > hi every element is hi, as ONNX specifies.
    if (c.has(1)) x = maximum(x, c.in(1));
    if (c.has(2)) x = minimum(x, c.in(2));
    c.set_out(0, x);
}

void isnan_(NodeCtx& c) { c.set_out(0, c.in(0) != c.in(0)); }
void isinf_(NodeCtx& c) {
    Var x = c.in(0);
    c.require(is_floating(x.dtype()), "", "expected a floating input");
    bool pos = c.attr_i("detect_positive", 1) != 0, neg_ = c.attr_i("detect_negative", 1) != 0;
    double inf = std::numeric_limits<double>::infinity();
    Var p = x == scalar_like(x, inf), n = x == scalar_like(x, -inf);
    if (pos && neg_) c.set_out(0, where(p, p, n));
    else if (pos) c.set_out(0, p);
    else if (neg_) c.set_out(0, n);
    else c.set_out(0, where(p, n, p));  // x == inf and x == -inf: all false
}

}  // namespace

void add_elementwise_ops(Registry& r) {
    r["Add"] = {binary<add_>, {}, {}};
    r["Sub"] = {binary<sub_>, {}, {}};
    r["Mul"] = {binary<mul_>, {}, {}};
    r["Div"] = {binary<div_>, {}, {}};
    r["Pow"] = {pow_, {}, {}};
    r["Equal"] = {binary<eq_>, {}, {}};
    r["Less"] = {binary<lt_>, {}, {}};
    r["LessOrEqual"] = {binary<le_>, {}, {}};
    r["Greater"] = {binary<gt_>, {}, {}};
    r["GreaterOrEqual"] = {binary<ge_>, {}, {}};
    r["Max"] = {variadic<maximum>, {}, {}};
    r["Min"] = {variadic<minimum>, {}, {}};
    r["Sum"] = {variadic<add_>, {}, {}};
    r["Mean"] = {mean_variadic, {}, {}};
    r["And"] = {logic, {}, {}};
    r["Or"] = {logic, {}, {}};
    r["Xor"] = {logic, {}, {}};
    r["Not"] = {not_, {}, {}};
    r["Where"] = {where_, {}, {}};
    r["Identity"] = {identity, {}, {}};
    r["Clip"] = {clip, {"min", "max"}, {}};
    r["IsNaN"] = {isnan_, {}, {}};
    r["IsInf"] = {isinf_, {"detect_positive", "detect_negative"}, {}};
    r["Neg"] = {unary<neg>, {}, {}};
    r["Abs"] = {unary<abs>, {}, {}};
    r["Exp"] = {unary<exp>, {}, {}};
    r["Log"] = {unary<log>, {}, {}};
    r["Sqrt"] = {unary<sqrt>, {}, {}};
    r["Reciprocal"] = {unary<reciprocal>, {}, {}};
    r["Sin"] = {unary<sin>, {}, {}};
    r["Cos"] = {unary<cos>, {}, {}};
    r["Tan"] = {tan_, {}, {}};
    r["Tanh"] = {unary<tanh>, {}, {}};
    r["Sigmoid"] = {unary<sigmoid>, {}, {}};
    r["Relu"] = {unary<relu>, {}, {}};
    r["Erf"] = {unary<erf>, {}, {}};
    r["Floor"] = {unary<floor>, {}, {}};
    r["Ceil"] = {unary<ceil>, {}, {}};
    r["Round"] = {unary<round>, {}, {}};
    r["Sign"] = {unary<sign>, {}, {}};
}

}  // namespace kiln::onnx_import
