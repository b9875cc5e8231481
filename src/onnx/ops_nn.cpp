// MatMul, Gemm, Conv and pooling. Kiln's conv2d and pools are 2-D (NCHW) with symmetric
// padding: 1-D ops run as 2-D ones on a unit height, and asymmetric or ceil-mode padding
// becomes an explicit pad before the window op.
#include "src/onnx/registry.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::onnx_import {
namespace {

void matmul_(NodeCtx& c) { c.set_out(0, matmul(c.in(0), c.in(1))); }

void gemm(NodeCtx& c) {
    Var a = c.in(0), b = c.in(1);
    c.require(a.rank() == 2 && b.rank() == 2, "", "A and B must be matrices, got " + dims_to_string(a.dims()) + " and " +
                                                      dims_to_string(b.dims()));
    if (c.attr_i("transA", 0) != 0) a = transpose(a, 0, 1);
    double alpha = c.attr_f("alpha", 1.0), beta = c.attr_f("beta", 1.0);
    // A @ B^T is linear(A, B): a constant B (the usual weight) is transposed once at load,
    // not on every call.
    Var y = c.attr_i("transB", 0) != 0 ? linear(a, b) : matmul(a, b);
    if (alpha != 1.0) y = y * alpha;
    if (c.has(2) && beta != 0.0) {
        Var cc = c.in(2);
        y = y + (beta == 1.0 ? cc : cc * beta);
    }
    c.set_out(0, y);
}

// The window geometry of one Conv or pooling node, normalised to two spatial axes.
struct Window {
    bool one_d = false;                // the op was 1-D: runs on a unit height
    std::int64_t k[2]{1, 1}, s[2]{1, 1}, d[2]{1, 1};
    std::int64_t begin[2]{0, 0}, end[2]{0, 0};  // padding
};

// Reads kernel (from `kernel` when given, else the attribute), strides, dilations, pads and
// auto_pad. `x` is the (possibly unsqueezed) NCHW input.
Window window(const NodeCtx& c, const Var& x, bool one_d, const std::vector<std::int64_t>& kernel) {
    Window w;
    w.one_d = one_d;
    const std::size_t n = one_d ? 1 : 2, off = one_d ? 1 : 0;
    auto ks = c.attr_ints("kernel_shape", kernel);
    c.require(ks.size() == n, "kernel_shape", "expected " + std::to_string(n) + " values, got " + std::to_string(ks.size()));
    c.require(kernel.empty() || ks == kernel, "kernel_shape", "does not match the weight's spatial dims");
    auto st = c.attr_ints("strides", std::vector<std::int64_t>(n, 1));
    auto dl = c.attr_ints("dilations", std::vector<std::int64_t>(n, 1));
    auto pd = c.attr_ints("pads", std::vector<std::int64_t>(2 * n, 0));
    c.require(st.size() == n, "strides", "expected " + std::to_string(n) + " values");
    c.require(dl.size() == n, "dilations", "expected " + std::to_string(n) + " values");
    c.require(pd.size() == 2 * n, "pads", "expected " + std::to_string(2 * n) + " values");
    for (std::size_t i = 0; i < n; ++i) {
        c.require(ks[i] >= 1, "kernel_shape", "values must be >= 1");
        c.require(st[i] >= 1, "strides", "values must be >= 1");
        c.require(dl[i] >= 1, "dilations", "values must be >= 1");
        c.require(pd[i] >= 0 && pd[i + n] >= 0, "pads", "values must be >= 0");
        w.k[i + off] = ks[i];
        w.s[i + off] = st[i];
        w.d[i + off] = dl[i];
        w.begin[i + off] = pd[i];
        w.end[i + off] = pd[i + n];
    }
    std::string auto_pad = c.attr_s("auto_pad", "NOTSET");
    if (auto_pad == "NOTSET") return w;
    c.require(!c.has_attr("pads"), "pads", "cannot be given with auto_pad " + auto_pad);
    if (auto_pad == "VALID") return w;
    c.require(auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER", "auto_pad",
              "expected NOTSET, VALID, SAME_UPPER or SAME_LOWER, got " + auto_pad);
    for (int i = 0; i < 2; ++i) {
        Dim in = x.dim(2 + i);
        c.require(in.is_static(), "auto_pad", auto_pad + " needs static spatial dims, got " + dims_to_string(x.dims()));
        std::int64_t out = (in.value() + w.s[i] - 1) / w.s[i];
        std::int64_t total = std::max<std::int64_t>(0, (out - 1) * w.s[i] + (w.k[i] - 1) * w.d[i] + 1 - in.value());
        w.begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        w.end[i] = total - w.begin[i];
    }
    return w;
}

bool symmetric(const Window& w) { return w.begin[0] == w.end[0] && w.begin[1] == w.end[1]; }

Var pad_hw(const Var& x, const std::int64_t begin[2], const std::int64_t end[2], double value) {
    if (begin[0] == 0 && begin[1] == 0 && end[0] == 0 && end[1] == 0) return x;
    return pad(x, {0, 0, 0, 0, begin[0], end[0], begin[1], end[1]}, value);
}

Var to_2d(const Var& x) { return unsqueeze(x, 2); }
Var from_2d(const Var& y, const Window& w) { return w.one_d ? squeeze(y, {2}) : y; }

void check_spatial_rank(const NodeCtx& c, const Var& x) {
    c.require(x.rank() == 3 || x.rank() == 4, "",
              "only 1-D and 2-D windows are supported (input of rank 3 or 4), got " + dims_to_string(x.dims()));
}

void conv(NodeCtx& c) {
    Var x = c.in(0), wt = c.in(1);
    check_spatial_rank(c, x);
    c.require(wt.rank() == x.rank(), "", "the weight's rank must equal the input's");
    bool one_d = x.rank() == 3;
    if (one_d) {
        x = to_2d(x);
        wt = to_2d(wt);
    }
    std::vector<std::int64_t> kernel;
    for (std::int64_t i = one_d ? 3 : 2; i < 4; ++i) {
        Dim d = wt.dim(i);
        c.require(d.is_static(), "", "the weight's dims must be static");
        kernel.push_back(d.value());
    }
    Window w = window(c, x, one_d, kernel);
    std::int64_t groups = c.attr_i("group", 1);
    c.require(groups >= 1, "group", "must be >= 1");
    Pair padding{0, 0};
    if (symmetric(w)) padding = {w.begin[0], w.begin[1]};
    else x = pad_hw(x, w.begin, w.end, 0.0);
    Var b = c.has(2) ? c.in(2) : Var();
    Var y = conv2d(x, wt, b, {w.s[0], w.s[1]}, padding, {w.d[0], w.d[1]}, groups);
    c.set_out(0, from_2d(y, w));
}

// Extra padding at the end so that floor division gives ONNX's ceil-mode output size.
void ceil_extra(const NodeCtx& c, const Var& x, Window& w, std::int64_t extra[2]) {
    extra[0] = extra[1] = 0;
    if (c.attr_i("ceil_mode", 0) == 0) return;
    for (int i = 0; i < 2; ++i) {
        Dim in = x.dim(2 + i);
        c.require(in.is_static(), "ceil_mode", "needs static spatial dims, got " + dims_to_string(x.dims()));
        std::int64_t span = (w.k[i] - 1) * w.d[i] + 1, padded = in.value() + w.begin[i] + w.end[i];
        if (padded < span) continue;
        std::int64_t out = (padded - span + w.s[i] - 1) / w.s[i] + 1;
        extra[i] = (out - 1) * w.s[i] + span - padded;
    }
}

// A pool's input as the 2-D pools see it (a 1-D input gains a unit dim, in place) and its
// window; dilated windows are refused.
Window pool_window(NodeCtx& c, Var& x) {
    check_spatial_rank(c, x);
    const bool one_d = x.rank() == 3;
    if (one_d) x = to_2d(x);
    Window w = window(c, x, one_d, {});
    c.require(w.d[0] == 1 && w.d[1] == 1, "dilations", "dilated pooling is not supported");
    return w;
}

void max_pool(NodeCtx& c) {
    Var x = c.in(0);
    Window w = pool_window(c, x);
    c.require(c.attr_i("storage_order", 0) == 0 || !c.wants(1), "storage_order", "only applies to the Indices output");
    std::int64_t extra[2];
    ceil_extra(c, x, w, extra);
    Var y;
    if (symmetric(w) && extra[0] == 0 && extra[1] == 0 && 2 * w.begin[0] <= w.k[0] && 2 * w.begin[1] <= w.k[1]) {
        y = max_pool2d(x, {w.k[0], w.k[1]}, {w.s[0], w.s[1]}, {w.begin[0], w.begin[1]});
    } else {
        double lowest = is_floating(x.dtype()) ? -std::numeric_limits<double>::infinity()
                                               : (x.dtype() == DType::u8 ? 0.0 : x.dtype() == DType::i8 ? -128.0 : -2147483648.0);
        c.require(x.dtype() != DType::i64, "pads", "padding of i64 inputs is not supported");
        std::int64_t end[2]{w.end[0] + extra[0], w.end[1] + extra[1]};
        y = max_pool2d(pad_hw(x, w.begin, end, lowest), {w.k[0], w.k[1]}, {w.s[0], w.s[1]});
    }
    c.set_out(0, from_2d(y, w));
}

void avg_pool(NodeCtx& c) {
    Var x = c.in(0);
    Window w = pool_window(c, x);
    bool include_pad = c.attr_i("count_include_pad", 0) != 0;
    std::int64_t extra[2];
    ceil_extra(c, x, w, extra);
    bool no_pad = w.begin[0] == 0 && w.begin[1] == 0 && w.end[0] == 0 && w.end[1] == 0;
    if (extra[0] == 0 && extra[1] == 0 && (no_pad || (!include_pad && symmetric(w) && 2 * w.begin[0] <= w.k[0] &&
                                                      2 * w.begin[1] <= w.k[1]))) {
        c.set_out(0, from_2d(avg_pool2d(x, {w.k[0], w.k[1]}, {w.s[0], w.s[1]}, {w.begin[0], w.begin[1]}), w));
        return;
    }
    if (include_pad && extra[0] == 0 && extra[1] == 0) {
        c.set_out(0, from_2d(avg_pool2d(pad_hw(x, w.begin, w.end, 0.0), {w.k[0], w.k[1]}, {w.s[0], w.s[1]}), w));
        return;
    }
    // General case: window sums over the zero-padded input, divided by how many positions
    // of each window count (the input, plus the explicit pads when count_include_pad).
    Shape hw;
    for (int i = 0; i < 2; ++i) {
        Dim in = x.dim(2 + i);
        c.require(in.is_static(), "pads", "this padding needs static spatial dims, got " + dims_to_string(x.dims()));
        hw.push_back(in.value());
    }
    std::int64_t end[2]{w.end[0] + extra[0], w.end[1] + extra[1]};
    std::int64_t out[2];
    for (int i = 0; i < 2; ++i) out[i] = (hw[static_cast<std::size_t>(i)] + w.begin[i] + end[i] - w.k[i]) / w.s[i] + 1;
    std::vector<double> counts(static_cast<std::size_t>(out[0] * out[1]));
    for (std::int64_t oh = 0; oh < out[0]; ++oh)
        for (std::int64_t ow = 0; ow < out[1]; ++ow) {
            std::int64_t n[2];
            for (int i = 0; i < 2; ++i) {
                std::int64_t o = i == 0 ? oh : ow;
                std::int64_t lo = o * w.s[i] - w.begin[i], hi = lo + w.k[i];  // in input coordinates
                std::int64_t clo = include_pad ? -w.begin[i] : 0;
                std::int64_t chi = include_pad ? hw[static_cast<std::size_t>(i)] + w.end[i] : hw[static_cast<std::size_t>(i)];
                n[i] = std::max<std::int64_t>(0, std::min(hi, chi) - std::max(lo, clo));
            }
            counts[static_cast<std::size_t>(oh * out[1] + ow)] = static_cast<double>(std::max<std::int64_t>(1, n[0] * n[1]));
        }
    Tensor count_t = Tensor::from_vector(counts, {out[0], out[1]}).astype(x.dtype());
    Var sums = avg_pool2d(pad_hw(x, w.begin, end, 0.0), {w.k[0], w.k[1]}, {w.s[0], w.s[1]}) *
               static_cast<double>(w.k[0] * w.k[1]);
    c.set_out(0, from_2d(sums / Var(count_t), w));
}

std::vector<std::int64_t> spatial_axes(const Var& x) {
    std::vector<std::int64_t> axes;
    for (std::int64_t i = 2; i < x.rank(); ++i) axes.push_back(i);
    return axes;
}

void global_avg_pool(NodeCtx& c) {
    Var x = c.in(0);
    c.require(x.rank() >= 3, "", "expected an input [N, C, spatial...], got " + dims_to_string(x.dims()));
    c.set_out(0, x.rank() == 4 ? global_avg_pool2d(x) : mean(x, spatial_axes(x), true));
}
void global_max_pool(NodeCtx& c) {
    Var x = c.in(0);
    c.require(x.rank() >= 3, "", "expected an input [N, C, spatial...], got " + dims_to_string(x.dims()));
    c.set_out(0, max(x, spatial_axes(x), true));
}

}  // namespace

void add_nn_ops(Registry& r) {
    r["MatMul"] = {matmul_, {}, {}};
    r["Gemm"] = {gemm, {"alpha", "beta", "transA", "transB"}, {}};
    r["Conv"] = {conv, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}, {}};
    r["MaxPool"] = {max_pool, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}, {}};
    r["AveragePool"] = {avg_pool, {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"}, {}};
    r["GlobalAveragePool"] = {global_avg_pool, {}, {}};
    r["GlobalMaxPool"] = {global_max_pool, {}, {}};
}

}  // namespace kiln::onnx_import
