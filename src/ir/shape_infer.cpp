#include "src/ir/shape_infer.h"

#include "src/support/check.h"
#include "src/support/checked.h"

#include <algorithm>
#include <sstream>

namespace kiln::ir {
namespace {

struct Ctx {
    Op op;
    const std::vector<const TensorType*>& in;
    const Attrs& attrs;
    SymbolGen* gen;

    std::string operands() const {
        std::string s;
        for (std::size_t i = 0; i < in.size(); ++i) s += (i ? ", " : "") + in[i]->to_string();
        return s;
    }
    [[noreturn]] void fail(const std::string& rule) const {
        if (in.empty()) KILN_USER_ERROR(op_name(op) << ": " << rule);
        KILN_USER_ERROR(op_name(op) << ": " << rule << " (operands: " << operands() << ")");
    }
    void require(bool cond, const std::string& rule) const {
        if (!cond) fail(rule);
    }
    Dim fresh() const {
        KILN_CHECK(gen != nullptr, "a fresh symbol was needed for static shapes in " << op_name(op));
        return gen->fresh();
    }
    const TensorType& x(std::size_t i = 0) const { return *in[i]; }
};

std::string dstr(const Dim& d) { return d.to_string(); }

// Window sizes, strides, paddings and pads are bounded so that size arithmetic cannot overflow.
constexpr std::int64_t kMaxExtent = std::int64_t{1} << 40;
void require_extent(const Ctx& c, std::int64_t v, const char* what) {
    c.require(v >= 0 && v <= kMaxExtent, std::string(what) + " " + std::to_string(v) + " is out of range [0, 2^40]");
}

// May two dims be equal at run time?
bool compatible(const Dim& a, const Dim& b) { return a == b || !a.is_static() || !b.is_static(); }

Dim broadcast_dim(const Ctx& c, const Dim& a, const Dim& b, std::int64_t axis_from_back) {
    if (a == b) return a;
    if (a.is_static() && a.value() == 1) return b;
    if (b.is_static() && b.value() == 1) return a;
    if (a.is_static() && b.is_static())
        c.fail("cannot broadcast: dims " + dstr(a) + " and " + dstr(b) + " differ at axis " +
               std::to_string(axis_from_back) + " (NumPy broadcasting needs equal dims or 1)");
    if (a.is_static()) return a;
    if (b.is_static()) return b;
    return c.fresh();
}

std::vector<Dim> broadcast_dims(const Ctx& c, const std::vector<Dim>& a, const std::vector<Dim>& b) {
    std::size_t n = std::max(a.size(), b.size());
    std::vector<Dim> out(n);
    for (std::size_t i = 0; i < n; ++i) {
        std::int64_t from_back = -static_cast<std::int64_t>(i) - 1;
        const Dim one(1);
        const Dim& da = i < a.size() ? a[a.size() - 1 - i] : one;
        const Dim& db = i < b.size() ? b[b.size() - 1 - i] : one;
        out[n - 1 - i] = broadcast_dim(c, da, db, from_back);
    }
    return out;
}

bool unary_float_only(Op op) {
    switch (op) {
    case Op::neg: case Op::abs: case Op::relu: case Op::sign: case Op::clamp:
    case Op::cast: case Op::logical_not: return false;
    default: return true;
    }
}

TensorType infer_unary(const Ctx& c) {
    const TensorType& t = c.x();
    if (c.op == Op::cast) return {c.attrs.dtype("dtype"), t.dims};
    if (c.op == Op::logical_not) {
        c.require(t.dtype == DType::boolean, "expected a boolean operand");
        return t;
    }
    if (unary_float_only(c.op))
        c.require(is_floating(t.dtype), "expected a floating operand (f32, f64, f16, bf16)");
    else
        c.require(t.dtype != DType::boolean, "expected a numeric operand, got bool");
    if (c.op == Op::clamp) c.require(c.attrs.f("lo") <= c.attrs.f("hi"), "expected lo <= hi");
    return t;
}

TensorType infer_binary(const Ctx& c) {
    const TensorType &a = c.x(0), &b = c.x(1);
    c.require(a.dtype == b.dtype, "operands must have the same dtype; cast one of them");
    if (c.op == Op::pow) c.require(is_floating(a.dtype), "expected floating operands");
    else if (op_kind(c.op) == OpKind::Binary) c.require(a.dtype != DType::boolean, "expected numeric operands, got bool");
    DType out = op_kind(c.op) == OpKind::Compare ? DType::boolean : a.dtype;
    return {out, broadcast_dims(c, a.dims, b.dims)};
}

TensorType infer_where(const Ctx& c) {
    c.require(c.x(0).dtype == DType::boolean, "the condition must be boolean");
    c.require(c.x(1).dtype == c.x(2).dtype, "both branches must have the same dtype");
    return {c.x(1).dtype, broadcast_dims(c, broadcast_dims(c, c.x(0).dims, c.x(1).dims), c.x(2).dims)};
}

void check_axes(const Ctx& c, const std::vector<std::int64_t>& axes, std::int64_t rank, const char* what) {
    for (std::size_t i = 0; i < axes.size(); ++i) {
        c.require(axes[i] >= 0 && axes[i] < rank,
                  std::string(what) + " axis " + std::to_string(axes[i]) + " is out of range for rank " + std::to_string(rank));
        c.require(i == 0 || axes[i] > axes[i - 1], std::string(what) + " axes must be sorted and unique");
    }
}

TensorType infer_reduce(const Ctx& c) {
    const TensorType& t = c.x();
    const auto& axes = c.attrs.ints("axes");
    check_axes(c, axes, t.rank(), "reduction");
    c.require(!axes.empty(), "expected at least one axis to reduce");
    bool keep = c.attrs.i("keepdim") != 0;
    bool arg = c.op == Op::argmax || c.op == Op::argmin;
    if (arg) c.require(axes.size() == 1, "expected exactly one axis");
    if (c.op == Op::mean) c.require(is_floating(t.dtype), "expected a floating operand");
    else c.require(t.dtype != DType::boolean, "expected a numeric operand, got bool");
    if (c.op == Op::max || c.op == Op::min || arg)
        for (auto a : axes)
            c.require(!(t.dims[a].is_static() && t.dims[a].value() == 0),
                      "cannot reduce a zero-size axis " + std::to_string(a) + " (no identity)");
    TensorType out{arg ? DType::i64 : t.dtype, {}};
    for (std::int64_t i = 0; i < t.rank(); ++i) {
        bool reduced = std::binary_search(axes.begin(), axes.end(), i);
        if (!reduced) out.dims.push_back(t.dims[i]);
        else if (keep) out.dims.push_back(Dim(1));
    }
    return out;
}

TensorType infer_norm(const Ctx& c) {
    const TensorType& t = c.x();
    c.require(is_floating(t.dtype), "expected a floating operand");
    for (std::size_t i = 1; i < c.in.size(); ++i)
        c.require(c.x(i).dtype == t.dtype, "parameters must have the input's dtype");
    switch (c.op) {
    case Op::softmax:
    case Op::log_softmax: {
        std::int64_t a = c.attrs.i("axis");
        c.require(a >= 0 && a < t.rank(), "axis " + std::to_string(a) + " is out of range for rank " + std::to_string(t.rank()));
        break;
    }
    case Op::layer_norm:
    case Op::rms_norm:
        c.require(t.rank() >= 1, "expected rank >= 1");
        for (std::size_t i = 1; i < c.in.size(); ++i)
            c.require(c.x(i).rank() == 1 && compatible(c.x(i).dims[0], t.dims.back()),
                      "gamma and beta must have shape [" + dstr(t.dims.back()) + "] (the last axis)");
        break;
    case Op::batch_norm:
        c.require(t.rank() >= 2, "expected rank >= 2 ([N, C, ...])");
        for (std::size_t i = 1; i < c.in.size(); ++i)
            c.require(c.x(i).rank() == 1 && compatible(c.x(i).dims[0], t.dims[1]),
                      "mean, var, gamma and beta must have shape [" + dstr(t.dims[1]) + "] (axis 1)");
        break;
    default: KILN_UNREACHABLE("not a norm op");
    }
    return t;
}

TensorType infer_matmul(const Ctx& c) {
    const TensorType &a = c.x(0), &b = c.x(1);
    c.require(a.dtype == b.dtype, "operands must have the same dtype");
    c.require(is_floating(a.dtype), "expected floating operands");
    c.require(a.rank() >= 1 && b.rank() >= 1, "operands must have rank >= 1");
    std::vector<Dim> ad = a.dims, bd = b.dims;
    bool a1 = ad.size() == 1, b1 = bd.size() == 1;
    if (a1) ad.insert(ad.begin(), Dim(1));
    if (b1) bd.push_back(Dim(1));
    const Dim& k1 = ad.back();
    const Dim& k2 = bd[bd.size() - 2];
    c.require(compatible(k1, k2), "contracted dims " + dstr(k1) + " and " + dstr(k2) + " differ");
    std::vector<Dim> ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
    std::vector<Dim> out = broadcast_dims(c, ab, bb);
    if (!a1) out.push_back(ad[ad.size() - 2]);
    if (!b1) out.push_back(bd.back());
    return {a.dtype, out};
}

// (in + pad_total - dil*(k-1) - 1) / stride + 1 for a dim that may be symbolic.
Dim window_out(const Ctx& c, const Dim& in, std::int64_t k, std::int64_t stride, std::int64_t pad_total,
               std::int64_t dil, const char* what) {
    std::int64_t span = dil * (k - 1) + 1;
    if (in.is_static()) {
        require_extent(c, in.value(), "input size");
        std::int64_t n = in.value() + pad_total - span;
        c.require(n >= 0, std::string(what) + " window of extent " + std::to_string(span) +
                              " does not fit the padded input of size " + std::to_string(in.value() + pad_total));
        return Dim(n / stride + 1);
    }
    if (stride == 1) return in + Dim(pad_total - span + 1);
    return c.fresh();
}

// Stride, padding and dilation of a conv (conv2d, conv2d_nchwc) and its kernel dims kh, kw.
void require_window(const Ctx& c, std::int64_t kh, std::int64_t kw) {
    const auto &st = c.attrs.ints("stride"), &pd = c.attrs.ints("padding"), &dl = c.attrs.ints("dilation");
    c.require(st.size() == 2 && pd.size() == 2 && dl.size() == 2, "stride, padding and dilation must hold 2 values");
    for (int i = 0; i < 2; ++i) {
        c.require(st[i] >= 1 && dl[i] >= 1 && pd[i] >= 0, "stride and dilation must be >= 1, padding >= 0");
        require_extent(c, st[i], "stride");
        require_extent(c, dl[i], "dilation");
        require_extent(c, pd[i], "padding");
        require_extent(c, i == 0 ? kh : kw, "kernel size");
    }
}

TensorType infer_conv(const Ctx& c) {
    const TensorType &x = c.x(0), &w = c.x(1);
    c.require(is_floating(x.dtype) && w.dtype == x.dtype, "expected floating operands of one dtype");
    c.require(x.rank() == 4, "input must be NCHW (rank 4)");
    c.require(w.rank() == 4, "weight must be OIHW (rank 4)");
    std::int64_t groups = c.attrs.i("groups");
    c.require(groups >= 1, "groups must be >= 1");
    c.require(w.dims[2].is_static() && w.dims[3].is_static() && w.dims[0].is_static() && w.dims[1].is_static(),
              "weight dims must be static");
    require_window(c, w.dims[2].value(), w.dims[3].value());
    const auto &st = c.attrs.ints("stride"), &pd = c.attrs.ints("padding"), &dl = c.attrs.ints("dilation");
    std::int64_t o = w.dims[0].value(), ipg = w.dims[1].value();
    c.require(o % groups == 0, "output channels " + std::to_string(o) + " must divide by groups " + std::to_string(groups));
    c.require(compatible(x.dims[1], Dim(ipg * groups)),
              "input channels " + dstr(x.dims[1]) + " must equal weight dim 1 (" + std::to_string(ipg) + ") * groups (" +
                  std::to_string(groups) + ")");
    if (c.in.size() == 3)
        c.require(c.x(2).dtype == x.dtype && c.x(2).rank() == 1 && compatible(c.x(2).dims[0], Dim(o)),
                  "bias must have shape [" + std::to_string(o) + "]");
    Dim h = window_out(c, x.dims[2], w.dims[2].value(), st[0], 2 * pd[0], dl[0], "conv2d");
    Dim ww = window_out(c, x.dims[3], w.dims[3].value(), st[1], 2 * pd[1], dl[1], "conv2d");
    return {x.dtype, {x.dims[0], Dim(o), h, ww}};
}

TensorType infer_conv_nchwc(const Ctx& c) {
    const TensorType &x = c.x(0), &w = c.x(1);
    c.require(is_floating(x.dtype) && w.dtype == x.dtype, "expected floating operands of one dtype");
    const std::int64_t blocked = c.attrs.i("blocked_input"), dw = c.attrs.i("depthwise");
    c.require((blocked == 0 || blocked == 1) && (dw == 0 || dw == 1), "blocked_input and depthwise must be 0 or 1");
    c.require(w.rank() == 5, "weight must be [Ob, CG, KH, KW, B] (rank 5)");
    for (const Dim& d : w.dims) c.require(d.is_static(), "weight dims must be static");
    const std::int64_t ob = w.dims[0].value(), cg = w.dims[1].value(), blk = w.dims[4].value();
    c.require(ob >= 1 && cg >= 1 && blk >= 1, "weight dims must be >= 1");
    if (c.attrs.has("channels")) {
        const std::int64_t ch = c.attrs.i("channels");
        c.require(!dw, "channels is for dense convs only (a depthwise conv2d_nchwc has it)");
        c.require(ch > (ob - 1) * blk && ch <= ob * blk, "channels must lie in the last block: (" + std::to_string((ob - 1) * blk) +
                                                            ", " + std::to_string(ob * blk) + "], got " + std::to_string(ch));
    }
    require_window(c, w.dims[2].value(), w.dims[3].value());
    c.require(x.rank() == (blocked ? 5 : 4), blocked ? "input must be [N, Cb, H, W, B] (rank 5)" : "input must be NCHW (rank 4)");
    if (blocked) {
        c.require(compatible(x.dims[4], Dim(blk)), "input block " + dstr(x.dims[4]) + " must equal the weight's " + std::to_string(blk));
        if (x.dims[1].is_static())
            c.require(dw ? x.dims[1].value() == ob : cg <= x.dims[1].value() * blk,
                      dw ? "a depthwise input must have " + std::to_string(ob) + " channel blocks, got " + dstr(x.dims[1])
                         : "weight dim 1 (" + std::to_string(cg) + ") exceeds the input's " + dstr(x.dims[1]) + " blocks of " +
                               std::to_string(blk));
    } else {
        c.require(!dw, "a depthwise conv2d_nchwc needs a blocked input");
        c.require(compatible(x.dims[1], Dim(cg)), "input channels " + dstr(x.dims[1]) + " must equal weight dim 1 (" +
                                                      std::to_string(cg) + ")");
    }
    if (dw) c.require(cg == 1, "a depthwise weight must have dim 1 = 1");
    if (c.in.size() == 3)
        c.require(c.x(2).dtype == x.dtype && c.x(2).rank() == 2 && compatible(c.x(2).dims[0], Dim(ob)) &&
                      compatible(c.x(2).dims[1], Dim(blk)),
                  "bias must have shape [" + std::to_string(ob) + ", " + std::to_string(blk) + "]");
    const auto &st = c.attrs.ints("stride"), &pd = c.attrs.ints("padding"), &dl = c.attrs.ints("dilation");
    Dim h = window_out(c, x.dims[2], w.dims[2].value(), st[0], 2 * pd[0], dl[0], "conv2d_nchwc");
    Dim ww = window_out(c, x.dims[3], w.dims[3].value(), st[1], 2 * pd[1], dl[1], "conv2d_nchwc");
    return {x.dtype, {x.dims[0], Dim(ob), h, ww, Dim(blk)}};
}

TensorType infer_pool(const Ctx& c) {
    const TensorType& x = c.x();
    c.require(x.rank() == 4, "input must be NCHW (rank 4)");
    if (c.op == Op::max_pool2d) c.require(x.dtype != DType::boolean, "expected a numeric operand");
    else c.require(is_floating(x.dtype), "expected a floating operand");
    if (c.op == Op::global_avg_pool2d) return {x.dtype, {x.dims[0], x.dims[1], Dim(1), Dim(1)}};
    const auto &k = c.attrs.ints("kernel"), &st = c.attrs.ints("stride"), &pd = c.attrs.ints("padding");
    c.require(k.size() == 2 && st.size() == 2 && pd.size() == 2, "kernel, stride and padding must hold 2 values");
    for (int i = 0; i < 2; ++i) {
        c.require(k[i] >= 1 && st[i] >= 1, "kernel and stride must be >= 1");
        require_extent(c, k[i], "kernel");
        require_extent(c, st[i], "stride");
        c.require(pd[i] >= 0 && 2 * pd[i] <= k[i], "padding must be in [0, kernel/2]");
    }
    Dim h = window_out(c, x.dims[2], k[0], st[0], 2 * pd[0], 1, op_name(c.op).data());
    Dim w = window_out(c, x.dims[3], k[1], st[1], 2 * pd[1], 1, op_name(c.op).data());
    return {x.dtype, {x.dims[0], x.dims[1], h, w}};
}

bool has_symbol_not_in(const std::vector<Dim>& target, const Dim& source) {
    for (const Dim& d : target)
    {
        const std::vector<std::string> have = source.symbol_names();
        for (const auto& s : d.symbol_names())
            if (!std::binary_search(have.begin(), have.end(), s)) return true;
    }
    return false;
}

TensorType infer_reshape(const Ctx& c) {
    const auto& shape = c.attrs.dims("shape");
    for (const Dim& d : shape) c.require(!d.is_static() || d.value() >= 0, "dims must be >= 0 (resolve -1 first)");
    Dim from = dims_product(c.x().dims), to = dims_product(shape);
    if (from != to) {
        bool both_static = from.is_static() && to.is_static();
        c.require(!both_static && has_symbol_not_in(shape, from),
                  "cannot reshape " + c.x().to_string() + " (" + dstr(from) + " elements) to " + dims_to_string(shape) +
                      " (" + dstr(to) + " elements)");
    }
    return {c.x().dtype, shape};
}

TensorType infer_permute(const Ctx& c) {
    const auto& perm = c.attrs.ints("perm");
    const TensorType& x = c.x();
    c.require(static_cast<std::int64_t>(perm.size()) == x.rank(), "perm must list every axis once");
    std::vector<bool> seen(perm.size(), false);
    TensorType out{x.dtype, {}};
    for (auto p : perm) {
        c.require(p >= 0 && p < x.rank() && !seen[p], "perm must list every axis once");
        seen[p] = true;
        out.dims.push_back(x.dims[p]);
    }
    return out;
}

TensorType infer_squeeze(const Ctx& c) {
    const auto& axes = c.attrs.ints("axes");
    const TensorType& x = c.x();
    check_axes(c, axes, x.rank(), "squeeze");
    TensorType out{x.dtype, {}};
    for (std::int64_t i = 0; i < x.rank(); ++i) {
        if (std::binary_search(axes.begin(), axes.end(), i)) {
            c.require(x.dims[i] == Dim(1), "axis " + std::to_string(i) + " has size " + dstr(x.dims[i]) + ", expected 1");
            continue;
        }
        out.dims.push_back(x.dims[i]);
    }
    return out;
}

TensorType infer_unsqueeze(const Ctx& c) {
    const auto& axes = c.attrs.ints("axes");
    const TensorType& x = c.x();
    std::int64_t rank = x.rank() + static_cast<std::int64_t>(axes.size());
    check_axes(c, axes, rank, "unsqueeze");
    TensorType out{x.dtype, {}};
    std::size_t j = 0;
    for (std::int64_t i = 0; i < rank; ++i)
        out.dims.push_back(std::binary_search(axes.begin(), axes.end(), i) ? Dim(1) : x.dims[j++]);
    return out;
}

TensorType infer_broadcast_to(const Ctx& c) {
    const auto& shape = c.attrs.dims("shape");
    const TensorType& x = c.x();
    c.require(shape.size() >= x.dims.size(), "target rank must be >= the operand's rank");
    std::size_t lead = shape.size() - x.dims.size();
    for (std::size_t i = 0; i < x.dims.size(); ++i) {
        const Dim& d = x.dims[i];
        const Dim& t = shape[lead + i];
        c.require(d == t || (d.is_static() && d.value() == 1) || compatible(d, t),
                  "cannot broadcast dim " + dstr(d) + " to " + dstr(t) + " at axis " + std::to_string(lead + i));
    }
    return {x.dtype, shape};
}

TensorType infer_slice(const Ctx& c) {
    const TensorType& x = c.x();
    std::int64_t axis = c.attrs.i("axis"), start = c.attrs.i("start"), end = c.attrs.i("end"), step = c.attrs.i("step");
    c.require(axis >= 0 && axis < x.rank(), "axis " + std::to_string(axis) + " is out of range");
    c.require(step >= 1, "step must be >= 1");
    TensorType out = x;
    const Dim& d = x.dims[axis];
    if (d.is_static()) {
        std::int64_t n = d.value();
        c.require(n >= 0, "dims must be >= 0");
        auto cl = [n](std::int64_t v) { return v < 0 ? std::max<std::int64_t>(v + n, 0) : std::min(v, n); };
        std::int64_t b = cl(start), e = cl(end);
        out.dims[axis] = Dim(e > b ? (e - b - 1) / step + 1 : 0);
    } else if (!(start == 0 && end == INT64_MAX && step == 1)) {
        out.dims[axis] = c.fresh();
    }
    return out;
}

// Sum of dims (a polynomial in their symbols).
Dim dims_sum(const std::vector<Dim>& ds) {
    Dim r;
    for (const Dim& d : ds) r = r + d;
    return r;
}

TensorType infer_concat(const Ctx& c) {
    const TensorType& x = c.x();
    std::int64_t axis = c.attrs.i("axis");
    c.require(axis >= 0 && axis < x.rank(), "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(x.rank()));
    std::vector<Dim> parts;
    TensorType out = x;
    for (std::size_t i = 0; i < c.in.size(); ++i) {
        const TensorType& y = c.x(i);
        c.require(y.dtype == x.dtype, "operands must have the same dtype");
        c.require(y.rank() == x.rank(), "operands must have the same rank");
        for (std::int64_t d = 0; d < x.rank(); ++d) {
            if (d == axis) continue;
            c.require(compatible(y.dims[d], x.dims[d]), "operands differ at axis " + std::to_string(d));
            if (!out.dims[d].is_static() && y.dims[d].is_static()) out.dims[d] = y.dims[d];
        }
        parts.push_back(y.dims[axis]);
    }
    out.dims[axis] = dims_sum(parts);
    return out;
}

TensorType infer_gather(const Ctx& c) {
    const TensorType &x = c.x(0), &idx = c.x(1);
    std::int64_t axis = c.attrs.i("axis");
    c.require(axis >= 0 && axis < x.rank(), "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(x.rank()));
    c.require(is_integer(idx.dtype), "indices must be integers");
    TensorType out{x.dtype, {}};
    out.dims.insert(out.dims.end(), x.dims.begin(), x.dims.begin() + axis);
    out.dims.insert(out.dims.end(), idx.dims.begin(), idx.dims.end());
    out.dims.insert(out.dims.end(), x.dims.begin() + axis + 1, x.dims.end());
    return out;
}

TensorType infer_pad(const Ctx& c) {
    const TensorType& x = c.x();
    const auto& pads = c.attrs.ints("pads");
    c.require(static_cast<std::int64_t>(pads.size()) == 2 * x.rank(),
              "pads must hold 2 * rank = " + std::to_string(2 * x.rank()) + " values");
    TensorType out = x;
    for (std::int64_t i = 0; i < x.rank(); ++i) {
        std::int64_t before = pads[2 * i], after = pads[2 * i + 1];
        c.require(before >= 0 && after >= 0, "pads must be >= 0");
        require_extent(c, before, "pad");
        require_extent(c, after, "pad");
        if (before + after == 0) continue;
        if (x.dims[i].is_static()) require_extent(c, x.dims[i].value(), "padded dim");
        out.dims[i] = x.dims[i] + Dim(before + after);
    }
    return out;
}

// The one dim of dims attribute `name` (narrow's and arange's start and length).
const Dim& one_dim(const Ctx& c, const char* name) {
    const auto& ds = c.attrs.dims(name);
    c.require(ds.size() == 1, std::string(name) + " must hold exactly one dim, got " + dims_to_string(ds));
    return ds[0];
}

// A dim that may be a size: static >= 0, or symbolic with some positive coefficient.
bool may_be_size(const Dim& d) {
    if (d.is_static()) return d.value() >= 0;
    return std::any_of(d.terms().begin(), d.terms().end(), [](const Dim::Term& t) { return t.coeff > 0; });
}

TensorType infer_narrow(const Ctx& c) {
    const TensorType& x = c.x();
    const std::int64_t axis = c.attrs.i("axis");
    c.require(axis >= 0 && axis < x.rank(), "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(x.rank()));
    const Dim &start = one_dim(c, "start"), &length = one_dim(c, "length");
    const Dim& n = x.dims[static_cast<std::size_t>(axis)];
    c.require(!start.is_static() || start.value() >= 0, "start " + dstr(start) + " must be >= 0");
    c.require(may_be_size(length), "length " + dstr(length) + " must be >= 0");
    // Static when both are (at run time, always: jit/exec/shape_plan.cpp), or when the symbols cancel.
    Dim room;
    try {
        room = n - start - length;
    } catch (const Error&) {
        c.fail("start " + dstr(start) + " + length " + dstr(length) + " overflows int64");
    }
    c.require(!room.is_static() || room.value() >= 0,
              "start " + dstr(start) + " + length " + dstr(length) + " exceeds dim " + dstr(n) + " of axis " +
                  std::to_string(axis));
    TensorType out = x;
    out.dims[static_cast<std::size_t>(axis)] = length;
    return out;
}

TensorType infer_arange(const Ctx& c) {
    const DType dt = c.attrs.dtype("dtype");
    c.require(dt != DType::boolean, "dtype must be numeric, got bool");
    const Dim &start = one_dim(c, "start"), &length = one_dim(c, "length");
    const std::int64_t step = c.attrs.i("step");
    c.require(step != 0, "step must be nonzero");
    c.require(may_be_size(length), "length " + dstr(length) + " must be >= 0");
    if (start.is_static() && length.is_static() && length.value() > 0) {  // the last value fits in int64
        std::int64_t span = 0, last = 0;
        c.require(support::mul_fits(length.value() - 1, step, &span) && support::add_fits(start.value(), span, &last),
                  "start " + dstr(start) + " + (length " + dstr(length) + " - 1) * step " + std::to_string(step) +
                      " overflows int64");
    }
    return {dt, {length}};
}

TensorType infer(const Ctx& c) {
    switch (op_kind(c.op)) {
    case OpKind::Source: KILN_UNREACHABLE("source ops have no inferred type");
    case OpKind::Unary: return infer_unary(c);
    case OpKind::Binary:
    case OpKind::Compare: return infer_binary(c);
    case OpKind::Select: return infer_where(c);
    case OpKind::Reduce: return infer_reduce(c);
    case OpKind::Other: break;
    }
    switch (c.op) {
    case Op::softmax: case Op::log_softmax: case Op::layer_norm: case Op::rms_norm: case Op::batch_norm:
        return infer_norm(c);
    case Op::matmul: return infer_matmul(c);
    case Op::conv2d: return infer_conv(c);
    case Op::conv2d_nchwc: return infer_conv_nchwc(c);
    case Op::max_pool2d: case Op::avg_pool2d: case Op::global_avg_pool2d: return infer_pool(c);
    case Op::reshape: return infer_reshape(c);
    case Op::permute: return infer_permute(c);
    case Op::squeeze: return infer_squeeze(c);
    case Op::unsqueeze: return infer_unsqueeze(c);
    case Op::broadcast_to: return infer_broadcast_to(c);
    case Op::slice: return infer_slice(c);
    case Op::concat: return infer_concat(c);
    case Op::gather: return infer_gather(c);
    case Op::pad: return infer_pad(c);
    case Op::narrow: return infer_narrow(c);
    case Op::arange: return infer_arange(c);
    default: KILN_UNREACHABLE("no shape rule for " << op_name(c.op));
    }
}

// The result's static part (static dims, and the coefficients of symbolic ones) must have a
// byte size that fits in int64: a larger result can never be computed.
void check_size(const Ctx& c, const TensorType& t) {
    Shape known;
    known.reserve(t.dims.size());
    for (const Dim& d : t.dims) known.push_back(d.is_monomial() ? d.coeff() : 1);
    if (!support::bytes_fit(known, dtype_size(t.dtype)))
        support::checked_bytes(known, dtype_size(t.dtype),
                               std::string(op_name(c.op)) + " gives " + t.to_string() + " (operands: " + c.operands() + ")");
}

}  // namespace

Dim dims_product(const std::vector<Dim>& dims) {
    Dim p(1);
    for (const Dim& d : dims) p = p * d;
    return p;
}

TensorType infer_type(Op op, const std::vector<const TensorType*>& inputs, const Attrs& attrs, SymbolGen* fresh) {
    Ctx c{op, inputs, attrs, fresh};
    int n = static_cast<int>(inputs.size());
    c.require(n >= op_min_inputs(op) && (op_max_inputs(op) < 0 || n <= op_max_inputs(op)),
              "wrong number of operands: " + std::to_string(n));
    TensorType t = infer(c);
    check_size(c, t);
    return t;
}

}  // namespace kiln::ir
