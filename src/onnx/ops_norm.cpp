// Softmax, LogSoftmax, LayerNormalization, BatchNormalization (inference),
// InstanceNormalization, LpNormalization, MeanVarianceNormalization.
#include "src/onnx/registry.h"

namespace kiln::onnx_import {
namespace {

std::vector<std::int64_t> range(std::int64_t from, std::int64_t to) {
    std::vector<std::int64_t> v;
    for (std::int64_t i = from; i < to; ++i) v.push_back(i);
    return v;
}

// Before opset 13, Softmax and LogSoftmax flatten the input to 2-D at `axis` (default 1)
// and normalise each row; from 13 they normalise along `axis` (default -1).
template <bool Log> void softmax_op(NodeCtx& c) {
    Var x = c.in(0);
    auto apply = [](const Var& v, std::int64_t a) { return Log ? log_softmax(v, a) : softmax(v, a); };
    if (x.rank() == 0) c.fail("", "expected an input of rank >= 1");
    if (c.opset() >= 13) {
        c.set_out(0, apply(x, norm_axis(c, c.attr_i("axis", -1), x.rank(), "axis")));
        return;
    }
    std::int64_t axis = norm_axis(c, c.attr_i("axis", 1), x.rank(), "axis");
    if (axis == x.rank() - 1) {
        c.set_out(0, apply(x, axis));
        return;
    }
    std::vector<Dim> d = x.dims();
    Dim rows(1), cols(1);
    for (std::int64_t i = 0; i < x.rank(); ++i) {
        if (i < axis) rows = rows * d[static_cast<std::size_t>(i)];
        else cols = cols * d[static_cast<std::size_t>(i)];
    }
    c.set_out(0, reshape(apply(reshape(x, {rows, cols}), 1), d));
}

void layer_norm_op(NodeCtx& c) {
    Var x = c.in(0), scale = c.in(1);
    c.require(is_floating(x.dtype()), "", "expected a floating input");
    std::int64_t axis = norm_axis(c, c.attr_i("axis", -1), x.rank(), "axis");
    double eps = c.attr_f("epsilon", 1e-5);
    std::int64_t stash = c.attr_i("stash_type", 1);
    c.require(stash == 1 || stash == static_cast<std::int64_t>(pb::TensorProto::DOUBLE), "stash_type",
              "expected 1 (FLOAT) or 11 (DOUBLE), got " + std::to_string(stash));
    std::vector<Dim> d = x.dims();
    std::vector<std::int64_t> axes = range(axis, x.rank());
    if (!c.wants(1) && !c.wants(2)) {
        // One fused layer_norm over the trailing axes, flattened to one.
        Dim n(1);
        for (auto a : axes) n = n * d[static_cast<std::size_t>(a)];
        std::vector<Dim> flat(d.begin(), d.begin() + axis);
        flat.push_back(n);
        bool param_ok = n.is_static() && scale.rank() == x.rank() - axis &&
                        (!c.has(2) || c.in(2).rank() == x.rank() - axis);
        for (std::size_t i = 0; param_ok && i < axes.size(); ++i) {
            param_ok &= scale.dim(static_cast<std::int64_t>(i)) == d[static_cast<std::size_t>(axes[i])];
            if (c.has(2)) param_ok &= c.in(2).dim(static_cast<std::int64_t>(i)) == d[static_cast<std::size_t>(axes[i])];
        }
        if (param_ok) {
            Var g = scale.rank() == 1 ? scale : reshape(scale, {n});
            Var b = c.has(2) ? (c.in(2).rank() == 1 ? c.in(2) : reshape(c.in(2), {n})) : Var(Tensor::zeros({n.value()}, x.dtype()));
            Var xf = axes.size() == 1 ? x : reshape(x, flat);
            Var y = layer_norm(xf, g, b, eps);
            c.set_out(0, axes.size() == 1 ? y : reshape(y, d));
            return;
        }
    }
    // The composition, with the statistics as outputs.
    Var m = mean(x, axes, true);
    Var diff = x - m;
    Var inv = rsqrt(mean(diff * diff, axes, true) + eps);
    Var y = diff * inv * scale;
    if (c.has(2)) y = y + c.in(2);
    c.set_out(0, y);
    if (c.wants(1)) c.set_out(1, m);
    if (c.wants(2)) c.set_out(2, inv);
}

void batch_norm_op(NodeCtx& c) {
    c.require(c.attr_i("training_mode", 0) == 0, "training_mode", "training mode is not supported (inference only)");
    c.require(c.attr_i("spatial", 1) == 1, "spatial", "only spatial=1 is supported");
    for (std::size_t i = 1; i < c.num_outputs(); ++i)
        c.require(!c.wants(i), "", "output " + std::to_string(i) + " (a training statistic) is not supported");
    double eps = c.attr_f("epsilon", 1e-5);
    Var x = c.in(0);
    c.require(x.rank() >= 2, "", "expected an input [N, C, ...], got " + dims_to_string(x.dims()));
    if (x.rank() == 2) {  // [N, C]: Kiln's batch_norm wants a spatial part
        c.set_out(0, squeeze(batch_norm(unsqueeze(x, 2), c.in(3), c.in(4), c.in(1), c.in(2), eps), {2}));
        return;
    }
    c.set_out(0, batch_norm(x, c.in(3), c.in(4), c.in(1), c.in(2), eps));
}

// A [C] parameter as [C, 1, ..., 1] against an input [N, C, spatial...].
Var per_channel(const Var& p, std::int64_t rank) {
    std::vector<std::int64_t> axes = range(1, rank - 1);
    return axes.empty() ? p : unsqueeze(p, axes);
}

void instance_norm_op(NodeCtx& c) {
    Var x = c.in(0);
    c.require(x.rank() >= 3, "", "expected an input [N, C, spatial...], got " + dims_to_string(x.dims()));
    double eps = c.attr_f("epsilon", 1e-5);
    std::vector<std::int64_t> axes = range(2, x.rank());
    Var m = mean(x, axes, true);
    Var diff = x - m;
    Var y = diff * rsqrt(mean(diff * diff, axes, true) + eps);
    c.set_out(0, y * per_channel(c.in(1), x.rank()) + per_channel(c.in(2), x.rank()));
}

// GroupNormalization: statistics over each group of C / num_groups channels and the spatial
// dims. Opset 18 gives scale and bias per group, opset 21 per channel.
void group_norm_op(NodeCtx& c) {
    Var x = c.in(0);
    c.require(x.rank() >= 3, "", "expected an input [N, C, spatial...], got " + dims_to_string(x.dims()));
    const std::int64_t groups = c.attr_i("num_groups");
    const Dim C = x.dim(1);
    c.require(C.is_static() && groups >= 1 && C.value() % groups == 0, "num_groups",
              std::to_string(groups) + " does not divide the channels " + C.to_string());
    c.require(c.attr_i("stash_type", 1) == 1, "stash_type", "only 1 (statistics in f32) is supported");
    const double eps = c.attr_f("epsilon", 1e-5);
    std::vector<Dim> grouped = {x.dim(0), Dim(groups), Dim(-1)};
    Var g = reshape(x, grouped);
    Var m = mean(g, {2}, true);
    Var diff = g - m;
    Var y = reshape(diff * rsqrt(mean(diff * diff, {2}, true) + eps), x.dims());
    Var scale = c.in(1), bias = c.in(2);
    const std::int64_t per = c.opset() >= 21 ? C.value() : groups;
    c.require(scale.rank() == 1 && bias.rank() == 1 && scale.dim(0) == Dim(per) && bias.dim(0) == Dim(per), "",
              "scale and bias must have " + std::to_string(per) + (c.opset() >= 21 ? " (channels)" : " (groups)") +
                  " values, got " + dims_to_string(scale.dims()) + " and " + dims_to_string(bias.dims()));
    if (per != C.value()) {  // per group: each value repeats over the group's channels
        const std::vector<Dim> wide = {Dim(groups), Dim(C.value() / groups)};
        scale = reshape(broadcast_to(reshape(scale, {Dim(groups), Dim(1)}), wide), {C});
        bias = reshape(broadcast_to(reshape(bias, {Dim(groups), Dim(1)}), wide), {C});
    }
    c.set_out(0, y * per_channel(scale, x.rank()) + per_channel(bias, x.rank()));
}

void lp_norm_op(NodeCtx& c) {
    Var x = c.in(0);
    std::int64_t axis = norm_axis(c, c.attr_i("axis", -1), x.rank(), "axis");
    std::int64_t p = c.attr_i("p", 2);
    c.require(p == 1 || p == 2, "p", "expected 1 or 2, got " + std::to_string(p));
    Var norm = p == 1 ? sum(abs(x), axis, true) : sqrt(sum(x * x, axis, true));
    c.set_out(0, x / norm);
}

void mvn_op(NodeCtx& c) {
    Var x = c.in(0);
    std::vector<std::int64_t> axes = c.attr_ints("axes", {0, 2, 3});
    for (auto& a : axes) a = norm_axis(c, a, x.rank(), "axes");
    Var m = mean(x, axes, true);
    Var var = mean(x * x, axes, true) - m * m;
    c.set_out(0, (x - m) / (sqrt(var) + 1e-9));
}

}  // namespace

void add_norm_ops(Registry& r) {
    r["Softmax"] = {softmax_op<false>, {"axis"}, {}};
    r["LogSoftmax"] = {softmax_op<true>, {"axis"}, {}};
    r["LayerNormalization"] = {layer_norm_op, {"axis", "epsilon", "stash_type"}, {}};
    r["BatchNormalization"] = {batch_norm_op, {"epsilon", "momentum", "training_mode", "spatial", "is_test"}, {}};
    r["InstanceNormalization"] = {instance_norm_op, {"epsilon"}, {}};
    r["GroupNormalization"] = {group_norm_op, {"epsilon", "num_groups", "stash_type"}, {}};
    r["LpNormalization"] = {lp_norm_op, {"axis", "p"}, {}};
    r["MeanVarianceNormalization"] = {mvn_op, {"axes"}, {}};
}

}  // namespace kiln::onnx_import
