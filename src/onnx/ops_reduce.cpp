// Reductions (axes as an attribute or, from opset 13/18, as an input; keepdims;
// noop_with_empty_axes) and ArgMax / ArgMin.
#include "src/onnx/registry.h"

#include <limits>

namespace kiln::onnx_import {
namespace {

enum class Kind { sum, mean, max, min, prod, l1, l2, log_sum, log_sum_exp, sum_square };

struct Axes {
    std::vector<std::int64_t> axes;  // normalised; empty: every axis
    bool noop = false;               // empty axes with noop_with_empty_axes: no reduction
};

Axes reduce_axes(const NodeCtx& c, std::int64_t rank) {
    std::vector<std::int64_t> axes;
    if (c.has(1)) {
        c.require(!c.has_attr("axes"), "axes", "given both as an attribute and as an input");
        axes = c.need_ints(1, "axes");
    } else {
        axes = c.attr_ints("axes", {});
    }
    for (auto& a : axes) a = norm_axis(c, a, rank, "axes");
    Axes out;
    out.noop = axes.empty() && c.attr_i("noop_with_empty_axes", 0) != 0;
    if (axes.empty())
        for (std::int64_t i = 0; i < rank; ++i) axes.push_back(i);
    out.axes = axes;
    return out;
}

template <Kind K> void reduce_op(NodeCtx& c) {
    Var x = c.in(0);
    Axes ax = reduce_axes(c, x.rank());
    bool keep = c.attr_i("keepdims", 1) != 0;
    // The elementwise part before the reduction.
    Var y = x;
    if (K == Kind::l1) y = abs(x);
    if (K == Kind::l2 || K == Kind::sum_square) y = x * x;
    if (ax.noop || x.rank() == 0) {
        c.set_out(0, y);
        return;
    }
    Var out;
    switch (K) {
    case Kind::sum: case Kind::l1: case Kind::sum_square: out = sum(y, ax.axes, keep); break;
    case Kind::mean: out = mean(y, ax.axes, keep); break;
    case Kind::max: out = max(y, ax.axes, keep); break;
    case Kind::min: out = min(y, ax.axes, keep); break;
    case Kind::prod: out = prod(y, ax.axes, keep); break;
    case Kind::l2: out = sqrt(sum(y, ax.axes, keep)); break;
    case Kind::log_sum: out = log(sum(y, ax.axes, keep)); break;
    case Kind::log_sum_exp: {
        // log(sum(exp(x - m))) + m with m the maximum: the same value without overflow.
        Var m = max(x, ax.axes, true);
        Var safe_m = where(abs(m) == std::numeric_limits<double>::infinity(), scalar_like(m, 0.0), m);
        Var s = log(sum(exp(x - safe_m), ax.axes, true)) + safe_m;
        out = keep ? s : squeeze(s, ax.axes);
        break;
    }
    }
    c.set_out(0, out);
}

void arg_op(NodeCtx& c) {
    Var x = c.in(0);
    std::int64_t axis = norm_axis(c, c.attr_i("axis", 0), x.rank(), "axis");
    bool keep = c.attr_i("keepdims", 1) != 0;
    bool is_max = c.op() == "ArgMax";
    if (c.attr_i("select_last_index", 0) == 0) {
        c.set_out(0, is_max ? argmax(x, axis, keep) : argmin(x, axis, keep));
        return;
    }
    // The last extreme index: the first one along the reversed axis, counted from the end.
    Dim d = x.dim(axis);
    c.require(d.is_static(), "select_last_index", "needs a static dim on the axis, got " + d.to_string());
    std::vector<std::int64_t> rev(static_cast<std::size_t>(d.value()));
    for (std::size_t i = 0; i < rev.size(); ++i) rev[i] = d.value() - 1 - static_cast<std::int64_t>(i);
    Var xr = gather(x, Var(Tensor::from_vector(rev, {d.value()})), axis);
    Var first = is_max ? argmax(xr, axis, keep) : argmin(xr, axis, keep);
    c.set_out(0, Var(Tensor::full({}, static_cast<double>(d.value() - 1), DType::i64)) - first);
}

}  // namespace

void add_reduce_ops(Registry& r) {
    const std::vector<std::string> attrs{"axes", "keepdims", "noop_with_empty_axes"};
    r["ReduceSum"] = {reduce_op<Kind::sum>, attrs, {1}};
    r["ReduceMean"] = {reduce_op<Kind::mean>, attrs, {1}};
    r["ReduceMax"] = {reduce_op<Kind::max>, attrs, {1}};
    r["ReduceMin"] = {reduce_op<Kind::min>, attrs, {1}};
    r["ReduceProd"] = {reduce_op<Kind::prod>, attrs, {1}};
    r["ReduceL1"] = {reduce_op<Kind::l1>, attrs, {1}};
    r["ReduceL2"] = {reduce_op<Kind::l2>, attrs, {1}};
    r["ReduceLogSum"] = {reduce_op<Kind::log_sum>, attrs, {1}};
    r["ReduceLogSumExp"] = {reduce_op<Kind::log_sum_exp>, attrs, {1}};
    r["ReduceSumSquare"] = {reduce_op<Kind::sum_square>, attrs, {1}};
    r["ArgMax"] = {arg_op, {"axis", "keepdims", "select_last_index"}, {}};
    r["ArgMin"] = {arg_op, {"axis", "keepdims", "select_last_index"}, {}};
}

}  // namespace kiln::onnx_import
