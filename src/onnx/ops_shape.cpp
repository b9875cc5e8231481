// Shape and data-movement ops: Reshape (0 and -1), Flatten, Transpose, Squeeze, Unsqueeze,
// Concat, Split, Slice (negative steps as a gather), Expand, Tile, Pad (constant mode),
// DepthToSpace, SpaceToDepth.
#include "src/onnx/registry.h"

#include <algorithm>

namespace kiln::onnx_import {
namespace {

void reshape_op(NodeCtx& c) {
    Var x = c.in(0);
    std::vector<Dim> shape = c.need_dims(1, "shape");
    bool allow_zero = c.attr_i("allowzero", 0) != 0;
    std::vector<Dim> dims;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (!shape[i].is_static()) {  // a size known at run time (a shape value)
            dims.push_back(shape[i]);
            continue;
        }
        std::int64_t v = shape[i].value();
        if (v == 0 && !allow_zero) {
            c.require(static_cast<std::int64_t>(i) < x.rank(), "",
                      "shape value 0 at position " + std::to_string(i) + " copies a dim the input does not have");
            dims.push_back(x.dim(static_cast<std::int64_t>(i)));
        } else {
            c.require(v >= -1, "", "shape values must be >= -1, got " + std::to_string(v));
            dims.emplace_back(v);
        }
    }
    c.set_out(0, reshape(x, dims));
}

void flatten_op(NodeCtx& c) {
    Var x = c.in(0);
    std::int64_t axis = c.attr_i("axis", 1);
    c.require(axis >= -x.rank() && axis <= x.rank(), "axis",
              "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(x.rank()));
    if (axis < 0) axis += x.rank();
    Dim rows(1), cols(1);
    std::vector<Dim> d = x.dims();
    for (std::int64_t i = 0; i < x.rank(); ++i) {
        if (i < axis) rows = rows * d[static_cast<std::size_t>(i)];
        else cols = cols * d[static_cast<std::size_t>(i)];
    }
    c.set_out(0, reshape(x, {rows, cols}));
}

void transpose_op(NodeCtx& c) {
    Var x = c.in(0);
    std::vector<std::int64_t> perm;
    for (std::int64_t i = x.rank() - 1; i >= 0; --i) perm.push_back(i);
    perm = c.attr_ints("perm", perm);
    c.require(static_cast<std::int64_t>(perm.size()) == x.rank(), "perm", "expected " + std::to_string(x.rank()) + " values");
    std::vector<std::int64_t> sorted = perm;
    for (auto& p : sorted) p = norm_axis(c, p, x.rank(), "perm");
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 0; i < sorted.size(); ++i)
        c.require(sorted[i] == static_cast<std::int64_t>(i), "perm", "is not a permutation");
    c.set_out(0, permute(x, perm));
}

// Axes from the attribute (before opset 13) or the optional input 1.
std::vector<std::int64_t> axes_arg(const NodeCtx& c) {
    if (c.has(1)) {
        c.require(!c.has_attr("axes"), "axes", "given both as an attribute and as an input");
        return c.need_ints(1, "axes");
    }
    return c.attr_ints("axes", {});
}

void squeeze_op(NodeCtx& c) {
    Var x = c.in(0);
    std::vector<std::int64_t> axes = axes_arg(c);
    for (auto a : axes) {
        Dim d = x.dim(norm_axis(c, a, x.rank(), "axes"));
        c.require(d == Dim(1), "axes", "axis " + std::to_string(a) + " has size " + d.to_string() + ", not 1");
    }
    c.set_out(0, squeeze(x, axes));
}

void unsqueeze_op(NodeCtx& c) {
    std::vector<std::int64_t> axes = axes_arg(c);
    c.require(!axes.empty(), "axes", "at least one axis is required");
    c.set_out(0, unsqueeze(c.in(0), axes));
}

void concat_op(NodeCtx& c) {
    std::vector<Var> xs = c.all_inputs();
    c.require(!xs.empty(), "", "expected at least one input");
    c.set_out(0, concat(xs, norm_axis(c, c.attr_i("axis"), xs[0].rank(), "axis")));
}

void split_op(NodeCtx& c) {
    Var x = c.in(0);
    std::int64_t axis = norm_axis(c, c.attr_i("axis", 0), x.rank(), "axis");
    std::vector<std::int64_t> sizes;
    if (c.has(1)) {
        c.require(!c.has_attr("split"), "split", "given both as an attribute and as an input");
        sizes = c.need_ints(1, "split");
    } else {
        sizes = c.attr_ints("split", {});
    }
    std::vector<Var> parts;
    if (c.has_attr("num_outputs")) {  // opset 18: ceil(dim / n) per part, the last one smaller
        const std::int64_t n = c.attr_i("num_outputs");
        c.require(sizes.empty(), "num_outputs", "given together with split sizes");
        c.require(n >= 1 && n == static_cast<std::int64_t>(c.num_outputs()), "num_outputs",
                  "is " + std::to_string(n) + " but the node has " + std::to_string(c.num_outputs()) + " outputs");
        Dim d = x.dim(axis);
        c.require(d.is_static(), "num_outputs", "splitting the symbolic dim " + d.to_string() + " needs split sizes");
        const std::int64_t part = (d.value() + n - 1) / n;
        for (std::int64_t i = 0; i < n; ++i) sizes.push_back(std::max<std::int64_t>(0, std::min(part, d.value() - i * part)));
    }
    if (sizes.empty()) {
        std::int64_t n = static_cast<std::int64_t>(c.num_outputs());
        Dim d = x.dim(axis);
        c.require(d.is_static() && d.value() % n == 0, "",
                  "splitting dim " + d.to_string() + " into " + std::to_string(n) + " equal parts needs a static, divisible dim");
        parts = split(x, n, axis);
    } else {
        c.require(sizes.size() == c.num_outputs(), "split",
                  "has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(c.num_outputs()) + " outputs");
        parts = split(x, sizes, axis);
    }
    for (std::size_t i = 0; i < parts.size(); ++i) c.set_out(i, parts[i]);
}

// One axis of a Slice with a negative step, as a gather of the selected indices.
Var reverse_slice(const NodeCtx& c, const Var& x, std::int64_t axis, std::int64_t start, std::int64_t end,
                  std::int64_t step) {
    Dim dd = x.dim(axis);
    c.require(dd.is_static(), "", "a negative step needs a static dim, got " + dd.to_string());
    std::int64_t d = dd.value();
    if (start < 0) start += d;
    if (end < 0) end += d;
    start = std::clamp<std::int64_t>(start, 0, d - 1);
    end = std::clamp<std::int64_t>(end, -1, d - 1);
    std::vector<std::int64_t> idx;
    for (std::int64_t i = start; i > end; i += step) idx.push_back(i);
    if (d == 0) idx.clear();
    return gather(x, Var(Tensor::from_vector(idx, {static_cast<std::int64_t>(idx.size())})), axis);
}

// Slice with bounds computed from sizes known only at run time: each axis with a symbolic
// bound is a narrow (no clamping: a bound outside the dim is an error at run time).
void symbolic_slice(NodeCtx& c) {
    Var x = c.in(0);
    std::vector<Dim> starts = c.need_dims(1, "starts"), ends = c.need_dims(2, "ends");
    std::vector<Dim> axes, steps;
    if (c.has(3)) axes = c.need_dims(3, "axes");
    if (c.has(4)) steps = c.need_dims(4, "steps");
    c.require(starts.size() == ends.size(), "", "starts and ends must have one length");
    if (axes.empty())
        for (std::size_t i = 0; i < starts.size(); ++i) axes.emplace_back(static_cast<std::int64_t>(i));
    if (steps.empty()) steps.assign(starts.size(), Dim(1));
    c.require(axes.size() == starts.size() && steps.size() == starts.size(), "", "starts, ends, axes and steps must have one length");
    for (std::size_t i = 0; i < starts.size(); ++i) {
        c.require(axes[i].is_static() && steps[i].is_static(), "", "axes and steps must be known while loading");
        const std::int64_t a = norm_axis(c, axes[i].value(), x.rank(), "axes"), step = steps[i].value();
        const Dim n = x.dim(a);
        if (starts[i].is_static() && ends[i].is_static()) {
            c.require(step != 0, "", "steps must not be 0");
            x = step > 0 ? slice(x, a, starts[i].value(), ends[i].value(), step)
                         : reverse_slice(c, x, a, starts[i].value(), ends[i].value(), step);
            continue;
        }
        c.require(step == 1, "", "a slice with bounds known only at run time (" + starts[i].to_string() + " to " +
                                     ends[i].to_string() + ") needs step 1, got " + std::to_string(step));
        // A static bound: negative counts from the end; past the end (INT64_MAX) is the end.
        auto bound = [&](const Dim& b) -> Dim {
            if (!b.is_static()) {  // an index from the start; one that is negative at run time is an error
                c.require(!(Dim(0) - b).surely_nonnegative(), "",
                          "the bound " + b.to_string() + " counts from the end by a size known only at run time; "
                          "Python's rules make its meaning depend on that size, which Kiln does not guess");
                return b;
            }
            const std::int64_t v = b.value();
            if (v < 0) return n + Dim(v);
            if (n.is_static()) return Dim(std::min(v, n.value()));
            return v >= (std::int64_t{1} << 40) ? n : Dim(v);
        };
        const Dim s = bound(starts[i]), e = bound(ends[i]);
        x = narrow(x, a, s, e - s);
    }
    c.set_out(0, x);
}

void slice_op(NodeCtx& c) {
    Var x = c.in(0);
    if (c.any_sym()) return symbolic_slice(c);
    std::vector<std::int64_t> starts, ends, axes, steps;
    if (c.opset() < 10) {
        starts = c.attr_ints("starts", {});
        ends = c.attr_ints("ends", {});
        axes = c.attr_ints("axes", {});
    } else {
        starts = c.need_ints(1, "starts");
        ends = c.need_ints(2, "ends");
        if (c.has(3)) axes = c.need_ints(3, "axes");
        if (c.has(4)) steps = c.need_ints(4, "steps");
    }
    c.require(starts.size() == ends.size(), "", "starts and ends must have one length");
    if (axes.empty())
        for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    c.require(axes.size() == starts.size() && steps.size() == starts.size(), "", "starts, ends, axes and steps must have one length");
    std::vector<std::int64_t> seen;
    for (std::size_t i = 0; i < starts.size(); ++i) {
        std::int64_t a = norm_axis(c, axes[i], x.rank(), "axes");
        c.require(std::find(seen.begin(), seen.end(), a) == seen.end(), "", "an axis repeats");
        seen.push_back(a);
        c.require(steps[i] != 0, "", "steps must not be 0");
        if (steps[i] > 0) x = slice(x, a, starts[i], ends[i], steps[i]);
        else x = reverse_slice(c, x, a, starts[i], ends[i], steps[i]);
    }
    c.set_out(0, x);
}

void expand_op(NodeCtx& c) {
    Var x = c.in(0);
    std::vector<Dim> shape = c.need_dims(1, "shape");
    std::vector<Dim> xd = x.dims();
    std::size_t n = std::max(xd.size(), shape.size());
    std::vector<Dim> out(n);
    for (std::size_t i = 0; i < n; ++i) {
        Dim a = i < n - xd.size() ? Dim(1) : xd[i - (n - xd.size())];
        Dim b = i < n - shape.size() ? Dim(1) : shape[i - (n - shape.size())];
        if (b == Dim(1) || a == b) out[i] = a;
        else if (a == Dim(1)) out[i] = b;
        else if (a.is_static() && b.is_static())
            c.fail("", "cannot broadcast " + dims_to_string(xd) + " to the shape " + dims_to_string(shape) + " at position " +
                           std::to_string(i));
        // One side symbolic: ONNX gives the other side unless this one is 1 at run time. A
        // static size > 1 decides; else the target's (a run-time mismatch is an error).
        else out[i] = a.is_static() ? a : b;
    }
    c.set_out(0, broadcast_to(x, out));
}

void tile_op(NodeCtx& c) {
    Var x = c.in(0);
    std::vector<std::int64_t> reps = c.need_ints(1, "repeats");
    c.require(static_cast<std::int64_t>(reps.size()) == x.rank(), "",
              "repeats must hold one value per axis (" + std::to_string(x.rank()) + ")");
    std::vector<Dim> d = x.dims(), wide, out;
    std::vector<std::int64_t> axes;
    for (std::size_t i = 0; i < d.size(); ++i) {
        c.require(reps[i] >= 0, "", "repeats must be >= 0");
        axes.push_back(static_cast<std::int64_t>(2 * i));
        wide.emplace_back(reps[i]);
        wide.push_back(d[i]);
        out.push_back(Dim(reps[i]) * d[i]);
    }
    if (d.empty()) {
        c.set_out(0, x);
        return;
    }
    c.set_out(0, reshape(broadcast_to(unsqueeze(x, axes), wide), out));
}

// Edge and reflect padding of one axis: a gather of the source index of every output position.
Var pad_by_gather(const NodeCtx& c, const Var& x, std::int64_t axis, std::int64_t b, std::int64_t e, bool reflect) {
    Dim dd = x.dim(axis);
    c.require(dd.is_static() && dd.value() >= 1, "mode", "edge and reflect padding need a static, non-empty dim");
    std::int64_t d = dd.value();
    c.require(!reflect || (d >= 2 && b < d && e < d), "pads", "reflect padding must be smaller than the dim");
    std::vector<std::int64_t> idx;
    for (std::int64_t o = -b; o < d + e; ++o) {
        std::int64_t i = o;
        if (reflect) i = i < 0 ? -i : (i >= d ? 2 * (d - 1) - i : i);
        else i = std::clamp<std::int64_t>(i, 0, d - 1);
        idx.push_back(i);
    }
    return gather(x, Var(Tensor::from_vector(idx, {static_cast<std::int64_t>(idx.size())})), axis);
}

void pad_op(NodeCtx& c) {
    Var x = c.in(0);
    std::string mode = c.attr_s("mode", "constant");
    c.require(mode == "constant" || mode == "edge" || mode == "reflect", "mode",
              "expected \"constant\", \"edge\" or \"reflect\", got \"" + mode + "\"");
    std::vector<std::int64_t> pads;
    double value = 0.0;
    if (c.opset() < 11) {
        pads = c.attr_ints("pads", {});
        value = c.attr_f("value", 0.0);
    } else {
        pads = c.need_ints(1, "pads");
        if (c.has(2)) value = c.need_scalar(2, "constant_value");
    }
    std::size_t r = static_cast<std::size_t>(x.rank());
    if (c.has(3)) {  // opset 18: pads for these axes only, the others unpadded
        std::vector<std::int64_t> axes = c.need_ints(3, "axes");
        c.require(pads.size() == 2 * axes.size(), "pads",
                  "expected " + std::to_string(2 * axes.size()) + " values for " + std::to_string(axes.size()) + " axes");
        std::vector<std::int64_t> full(2 * r, 0);
        std::vector<bool> seen(r, false);
        for (std::size_t k = 0; k < axes.size(); ++k) {
            const auto a = static_cast<std::size_t>(norm_axis(c, axes[k], x.rank(), "axes"));
            c.require(!seen[a], "", "axis " + std::to_string(axes[k]) + " repeats in axes");
            seen[a] = true;
            full[a] = pads[k];
            full[a + r] = pads[k + axes.size()];
        }
        pads = full;
    }
    c.require(pads.size() == 2 * r, "pads", "expected " + std::to_string(2 * r) + " values, got " + std::to_string(pads.size()));
    std::vector<std::int64_t> kpads(2 * r, 0);
    bool any = false;
    for (std::size_t i = 0; i < r; ++i) {
        std::int64_t b = pads[i], e = pads[i + r];
        if (b < 0 || e < 0) {  // negative pads crop
            Dim d = x.dim(static_cast<std::int64_t>(i));
            std::int64_t s = b < 0 ? -b : 0;
            if (e < 0) {
                c.require(d.is_static(), "pads", "negative pads need static dims");
                x = slice(x, static_cast<std::int64_t>(i), s, d.value() + e);
            } else {
                x = slice(x, static_cast<std::int64_t>(i), s);
            }
        }
        kpads[2 * i] = std::max<std::int64_t>(b, 0);
        kpads[2 * i + 1] = std::max<std::int64_t>(e, 0);
        any |= kpads[2 * i] > 0 || kpads[2 * i + 1] > 0;
        if (mode != "constant" && (kpads[2 * i] > 0 || kpads[2 * i + 1] > 0))
            x = pad_by_gather(c, x, static_cast<std::int64_t>(i), kpads[2 * i], kpads[2 * i + 1], mode == "reflect");
    }
    if (mode != "constant") any = false;
    c.set_out(0, any ? pad(x, kpads, value) : x);
}

void depth_to_space(NodeCtx& c) {
    Var x = c.in(0);
    c.require(x.rank() == 4, "", "expected an NCHW input");
    std::int64_t b = c.attr_i("blocksize");
    c.require(b >= 1, "blocksize", "must be >= 1");
    std::string mode = c.attr_s("mode", "DCR");
    c.require(mode == "DCR" || mode == "CRD", "mode", "expected DCR or CRD, got " + mode);
    Dim C = x.dim(1);
    c.require(C.is_static() && C.value() % (b * b) == 0, "", "channels must be static and divisible by blocksize^2");
    Dim n = x.dim(0), h = x.dim(2), w = x.dim(3);
    std::int64_t oc = C.value() / (b * b);
    Var y = mode == "DCR" ? permute(reshape(x, {n, b, b, oc, h, w}), {0, 3, 4, 1, 5, 2})
                          : permute(reshape(x, {n, oc, b, b, h, w}), {0, 1, 4, 2, 5, 3});
    c.set_out(0, reshape(y, {n, oc, h * Dim(b), w * Dim(b)}));
}

void space_to_depth(NodeCtx& c) {
    Var x = c.in(0);
    c.require(x.rank() == 4, "", "expected an NCHW input");
    std::int64_t b = c.attr_i("blocksize");
    c.require(b >= 1, "blocksize", "must be >= 1");
    Dim h = x.dim(2), w = x.dim(3);
    c.require(h.is_static() && w.is_static() && h.value() % b == 0 && w.value() % b == 0, "",
              "height and width must be static and divisible by blocksize");
    Dim n = x.dim(0), C = x.dim(1);
    Var y = permute(reshape(x, {n, C, h.value() / b, b, w.value() / b, b}), {0, 3, 5, 1, 2, 4});
    c.set_out(0, reshape(y, {n, C * Dim(b * b), h.value() / b, w.value() / b}));
}

}  // namespace

void add_shape_ops(Registry& r) {
    r["Reshape"] = {reshape_op, {"allowzero"}, {1}};
    r["Flatten"] = {flatten_op, {"axis"}, {}};
    r["Transpose"] = {transpose_op, {"perm"}, {}};
    r["Squeeze"] = {squeeze_op, {"axes"}, {1}};
    r["Unsqueeze"] = {unsqueeze_op, {"axes"}, {1}};
    r["Concat"] = {concat_op, {"axis"}, {}};
    r["Split"] = {split_op, {"axis", "num_outputs", "split"}, {1}};
    r["Slice"] = {slice_op, {"starts", "ends", "axes"}, {1, 2, 3, 4}};
    r["Expand"] = {expand_op, {}, {1}};
    r["Tile"] = {tile_op, {}, {1}};
    r["Pad"] = {pad_op, {"mode", "pads", "value"}, {1, 2, 3}};
    r["DepthToSpace"] = {depth_to_space, {"blocksize", "mode"}, {}};
    r["SpaceToDepth"] = {space_to_depth, {"blocksize"}, {}};
}

}  // namespace kiln::onnx_import
