// The tracing API's operators: each normalises its arguments (negative axes, -1 dims,
// defaults) and records one node, or a few for composite ops (linear, flatten, split).
#include <kiln/trace.h>

#include "src/ir/shape_infer.h"
#include "src/support/check.h"
#include "src/trace/tracer.h"

#include <algorithm>

namespace kiln {
namespace {
using detail::Tracer;
using ir::Attrs;
using ir::Op;

Tracer& tracer_for(std::initializer_list<const Var*> vars, const char* op) {
    for (const Var* v : vars)
        if (v->tracer() != nullptr) return *v->tracer();
    return Tracer::current(op);
}

Var unary(Op op, const Var& x, Attrs attrs = {}) {
    return tracer_for({&x}, ir::op_name(op).data()).add(op, {x}, std::move(attrs));
}
Var binary(Op op, const Var& a, const Var& b) {
    Tracer& t = tracer_for({&a, &b}, ir::op_name(op).data());
    if (a.is_scalar() && b.is_scalar()) return t.add(op, {t.add_constant(Tensor::full({}, a.scalar())), b});
    return t.add(op, {a, b});
}

std::string operand_string(const Var& x) {
    if (x.is_scalar()) return "scalar";
    return std::string(dtype_name(x.dtype())) + dims_to_string(x.dims());
}

std::int64_t norm_axis(std::int64_t axis, std::int64_t rank, const char* op, const Var& x) {
    KILN_USER_CHECK(axis >= -rank && axis < rank, op << ": axis " << axis << " is out of range for rank " << rank
                                                     << " (operands: " << operand_string(x) << ")");
    return axis < 0 ? axis + rank : axis;
}

// Normalised, sorted axes; empty means all when `empty_is_all`.
std::vector<std::int64_t> norm_axes(std::vector<std::int64_t> axes, std::int64_t rank, const char* op, const Var& x,
                                    bool empty_is_all) {
    if (axes.empty() && empty_is_all)
        for (std::int64_t i = 0; i < rank; ++i) axes.push_back(i);
    for (auto& a : axes) a = norm_axis(a, rank, op, x);
    std::sort(axes.begin(), axes.end());
    KILN_USER_CHECK(std::adjacent_find(axes.begin(), axes.end()) == axes.end(),
                    op << ": an axis repeats (operands: " << operand_string(x) << ")");
    return axes;
}

Var reduce(Op op, const Var& x, std::vector<std::int64_t> axes, bool keepdim) {
    const char* name = ir::op_name(op).data();
    Tracer& t = tracer_for({&x}, name);
    if (x.rank() == 0 && axes.empty()) return x;  // reducing a scalar over no axes: itself
    Attrs a;
    a.set("axes", norm_axes(std::move(axes), x.rank(), name, x, true));
    a.set("keepdim", std::int64_t{keepdim});
    return t.add(op, {x}, std::move(a));
}

// x divided by d: by a static d when every coefficient divides; as monomials when d's
// symbols are among x's and the coefficient divides.
std::optional<Dim> divide(const Dim& x, const Dim& d) {
    if (d.is_static()) return x.div_exact(d.value());
    if (!x.is_monomial() || !d.is_monomial()) return std::nullopt;
    if (d.coeff() == 0 || x.coeff() % d.coeff() != 0) return std::nullopt;
    std::vector<std::string> rest = x.symbols();
    for (const auto& s : d.symbols()) {
        auto it = std::find(rest.begin(), rest.end(), s);
        if (it == rest.end()) return std::nullopt;
        rest.erase(it);
    }
    Dim r(x.coeff() / d.coeff());
    for (const auto& s : rest) r = r * Dim::symbol(s);
    return r;
}
}  // namespace

// ---- arithmetic and comparisons ----
Var operator+(const Var& a, const Var& b) { return binary(Op::add, a, b); }
Var operator-(const Var& a, const Var& b) { return binary(Op::sub, a, b); }
Var operator*(const Var& a, const Var& b) { return binary(Op::mul, a, b); }
Var operator/(const Var& a, const Var& b) { return binary(Op::div, a, b); }
Var operator-(const Var& a) { return unary(Op::neg, a); }
Var operator<(const Var& a, const Var& b) { return binary(Op::lt, a, b); }
Var operator<=(const Var& a, const Var& b) { return binary(Op::le, a, b); }
Var operator>(const Var& a, const Var& b) { return binary(Op::gt, a, b); }
Var operator>=(const Var& a, const Var& b) { return binary(Op::ge, a, b); }
Var operator==(const Var& a, const Var& b) { return binary(Op::eq, a, b); }
Var operator!=(const Var& a, const Var& b) { return binary(Op::ne, a, b); }
Var pow(const Var& a, const Var& b) { return binary(Op::pow, a, b); }
Var maximum(const Var& a, const Var& b) { return binary(Op::maximum, a, b); }
Var minimum(const Var& a, const Var& b) { return binary(Op::minimum, a, b); }
Var where(const Var& cond, const Var& a, const Var& b) {
    Tracer& t = tracer_for({&cond, &a, &b}, "where");
    if (a.is_scalar() && b.is_scalar()) return t.add(Op::where, {cond, t.add_constant(Tensor::full({}, a.scalar())), b});
    return t.add(Op::where, {cond, a, b});
}
Var clamp(const Var& x, double lo, double hi) {
    Attrs a;
    a.set("lo", lo).set("hi", hi);
    return unary(Op::clamp, x, std::move(a));
}
Var cast(const Var& x, DType dtype) {
    Attrs a;
    a.set("dtype", dtype);
    return unary(Op::cast, x, std::move(a));
}

// ---- unary ----
Var abs(const Var& x) { return unary(Op::abs, x); }
Var neg(const Var& x) { return unary(Op::neg, x); }
Var exp(const Var& x) { return unary(Op::exp, x); }
Var log(const Var& x) { return unary(Op::log, x); }
Var sqrt(const Var& x) { return unary(Op::sqrt, x); }
Var rsqrt(const Var& x) { return unary(Op::rsqrt, x); }
Var reciprocal(const Var& x) { return unary(Op::reciprocal, x); }
Var sin(const Var& x) { return unary(Op::sin, x); }
Var cos(const Var& x) { return unary(Op::cos, x); }
Var tanh(const Var& x) { return unary(Op::tanh, x); }
Var sigmoid(const Var& x) { return unary(Op::sigmoid, x); }
Var relu(const Var& x) { return unary(Op::relu, x); }
Var gelu(const Var& x, bool tanh_approx) {
    Attrs a;
    a.set("approx", std::int64_t{tanh_approx});
    return unary(Op::gelu, x, std::move(a));
}
Var silu(const Var& x) { return unary(Op::silu, x); }
Var erf(const Var& x) { return unary(Op::erf, x); }
Var floor(const Var& x) { return unary(Op::floor, x); }
Var ceil(const Var& x) { return unary(Op::ceil, x); }
Var round(const Var& x) { return unary(Op::round, x); }
Var sign(const Var& x) { return unary(Op::sign, x); }
Var logical_not(const Var& x) { return unary(Op::logical_not, x); }

// ---- reductions ----
Var sum(const Var& x, std::vector<std::int64_t> axes, bool keepdim) { return reduce(Op::sum, x, std::move(axes), keepdim); }
Var mean(const Var& x, std::vector<std::int64_t> axes, bool keepdim) { return reduce(Op::mean, x, std::move(axes), keepdim); }
Var max(const Var& x, std::vector<std::int64_t> axes, bool keepdim) { return reduce(Op::max, x, std::move(axes), keepdim); }
Var min(const Var& x, std::vector<std::int64_t> axes, bool keepdim) { return reduce(Op::min, x, std::move(axes), keepdim); }
Var prod(const Var& x, std::vector<std::int64_t> axes, bool keepdim) { return reduce(Op::prod, x, std::move(axes), keepdim); }
Var sum(const Var& x, std::int64_t axis, bool keepdim) { return reduce(Op::sum, x, {axis}, keepdim); }
Var mean(const Var& x, std::int64_t axis, bool keepdim) { return reduce(Op::mean, x, {axis}, keepdim); }
Var max(const Var& x, std::int64_t axis, bool keepdim) { return reduce(Op::max, x, {axis}, keepdim); }
Var min(const Var& x, std::int64_t axis, bool keepdim) { return reduce(Op::min, x, {axis}, keepdim); }
Var prod(const Var& x, std::int64_t axis, bool keepdim) { return reduce(Op::prod, x, {axis}, keepdim); }
Var argmax(const Var& x, std::int64_t axis, bool keepdim) {
    Tracer& t = tracer_for({&x}, "argmax");
    Attrs a;
    a.set("axes", std::vector<std::int64_t>{norm_axis(axis, x.rank(), "argmax", x)}).set("keepdim", std::int64_t{keepdim});
    return t.add(Op::argmax, {x}, std::move(a));
}
Var argmin(const Var& x, std::int64_t axis, bool keepdim) {
    Tracer& t = tracer_for({&x}, "argmin");
    Attrs a;
    a.set("axes", std::vector<std::int64_t>{norm_axis(axis, x.rank(), "argmin", x)}).set("keepdim", std::int64_t{keepdim});
    return t.add(Op::argmin, {x}, std::move(a));
}

// ---- normalisation ----
Var softmax(const Var& x, std::int64_t axis) {
    Attrs a;
    a.set("axis", norm_axis(axis, x.rank(), "softmax", x));
    return unary(Op::softmax, x, std::move(a));
}
Var log_softmax(const Var& x, std::int64_t axis) {
    Attrs a;
    a.set("axis", norm_axis(axis, x.rank(), "log_softmax", x));
    return unary(Op::log_softmax, x, std::move(a));
}
Var layer_norm(const Var& x, const Var& gamma, const Var& beta, double eps) {
    Tracer& t = tracer_for({&x, &gamma, &beta}, "layer_norm");
    Attrs a;
    a.set("eps", eps);
    return t.add(Op::layer_norm, {x, gamma, beta}, std::move(a));
}
Var rms_norm(const Var& x, const Var& gamma, double eps) {
    Tracer& t = tracer_for({&x, &gamma}, "rms_norm");
    Attrs a;
    a.set("eps", eps);
    return t.add(Op::rms_norm, {x, gamma}, std::move(a));
}
Var batch_norm(const Var& x, const Var& mean_, const Var& var, const Var& gamma, const Var& beta, double eps) {
    Tracer& t = tracer_for({&x, &mean_, &var, &gamma, &beta}, "batch_norm");
    Attrs a;
    a.set("eps", eps);
    return t.add(Op::batch_norm, {x, mean_, var, gamma, beta}, std::move(a));
}

// ---- linear algebra and convolution ----
Var matmul(const Var& a, const Var& b) { return binary(Op::matmul, a, b); }
Var linear(const Var& x, const Var& w, const Var& b) {
    Tracer& t = tracer_for({&x, &w}, "linear");
    KILN_USER_CHECK(!w.is_scalar() && w.rank() == 2,
                    "linear: the weight must have shape [out, in] (operands: " << operand_string(x) << ", "
                                                                              << operand_string(w) << ")");
    // A constant weight is transposed once, here, instead of on every call.
    const ir::Node& wn = t.node(w);
    Var wt = wn.op == Op::constant ? t.add_constant(wn.value.transpose(0, 1).contiguous()) : transpose(w, 0, 1);
    Var y = matmul(x, wt);
    return b.defined() ? y + b : y;
}
Var conv2d(const Var& x, const Var& w, const Var& b, Pair stride, Pair padding, Pair dilation, std::int64_t groups) {
    Tracer& t = tracer_for({&x, &w}, "conv2d");
    Attrs a;
    a.set("stride", std::vector<std::int64_t>(stride.begin(), stride.end()))
        .set("padding", std::vector<std::int64_t>(padding.begin(), padding.end()))
        .set("dilation", std::vector<std::int64_t>(dilation.begin(), dilation.end()))
        .set("groups", groups);
    if (b.defined()) return t.add(Op::conv2d, {x, w, b}, std::move(a));
    return t.add(Op::conv2d, {x, w}, std::move(a));
}
namespace {
Var pool(Op op, const Var& x, Pair kernel, Pair stride, Pair padding) {
    Attrs a;
    a.set("kernel", std::vector<std::int64_t>(kernel.begin(), kernel.end()))
        .set("stride", std::vector<std::int64_t>(stride.begin(), stride.end()))
        .set("padding", std::vector<std::int64_t>(padding.begin(), padding.end()));
    return unary(op, x, std::move(a));
}
}  // namespace
Var max_pool2d(const Var& x, Pair kernel, Pair stride, Pair padding) { return pool(Op::max_pool2d, x, kernel, stride, padding); }
Var avg_pool2d(const Var& x, Pair kernel, Pair stride, Pair padding) { return pool(Op::avg_pool2d, x, kernel, stride, padding); }
Var global_avg_pool2d(const Var& x) { return unary(Op::global_avg_pool2d, x); }

// ---- shape ops ----
Var reshape(const Var& x, const std::vector<Dim>& dims) {
    Tracer& t = tracer_for({&x}, "reshape");
    std::vector<Dim> out = dims;
    int infer = -1;
    Dim known(1);
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (out[i].is_static() && out[i].value() == -1) {
            KILN_USER_CHECK(infer < 0, "reshape: at most one dim may be -1, got " << dims_to_string(dims)
                                                                                 << " (operands: " << operand_string(x) << ")");
            infer = static_cast<int>(i);
            continue;
        }
        KILN_USER_CHECK(!out[i].is_static() || out[i].value() >= 0,
                        "reshape: dims must be >= 0 or -1, got " << dims_to_string(dims) << " (operands: " << operand_string(x) << ")");
        known = known * out[i];
    }
    if (infer >= 0) {
        Dim total = ir::dims_product(x.dims());
        if (total.is_static() && known.is_static()) {
            KILN_USER_CHECK(known.value() != 0 && total.value() % known.value() == 0,
                            "reshape: cannot infer the -1 in " << dims_to_string(dims) << " from " << total.value()
                                                               << " elements (operands: " << operand_string(x) << ")");
            out[static_cast<std::size_t>(infer)] = Dim(total.value() / known.value());
        } else if (auto q = divide(total, known)) {
            out[static_cast<std::size_t>(infer)] = *q;
        } else {
            out[static_cast<std::size_t>(infer)] = t.symbols().fresh();  // solved at run time
        }
    }
    Attrs a;
    a.set("shape", out);
    return t.add(Op::reshape, {x}, std::move(a));
}
Var permute(const Var& x, const std::vector<std::int64_t>& perm) {
    std::vector<std::int64_t> p = perm;
    for (auto& v : p) v = norm_axis(v, x.rank(), "permute", x);
    Attrs a;
    a.set("perm", p);
    return unary(Op::permute, x, std::move(a));
}
Var transpose(const Var& x, std::int64_t a, std::int64_t b) {
    std::vector<std::int64_t> p(static_cast<std::size_t>(x.rank()));
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<std::int64_t>(i);
    std::swap(p[static_cast<std::size_t>(norm_axis(a, x.rank(), "transpose", x))],
              p[static_cast<std::size_t>(norm_axis(b, x.rank(), "transpose", x))]);
    return permute(x, p);
}
Var flatten(const Var& x, std::int64_t start_axis, std::int64_t end_axis) {
    std::int64_t r = x.rank();
    if (r == 0) return reshape(x, {Dim(1)});
    std::int64_t s = norm_axis(start_axis, r, "flatten", x), e = norm_axis(end_axis, r, "flatten", x);
    KILN_USER_CHECK(s <= e, "flatten: start_axis " << start_axis << " is after end_axis " << end_axis
                                                   << " (operands: " << operand_string(x) << ")");
    std::vector<Dim> d = x.dims(), out(d.begin(), d.begin() + s);
    out.push_back(ir::dims_product(std::vector<Dim>(d.begin() + s, d.begin() + e + 1)));
    out.insert(out.end(), d.begin() + e + 1, d.end());
    return reshape(x, out);
}
Var squeeze(const Var& x, std::vector<std::int64_t> axes) {
    if (axes.empty()) {
        std::vector<Dim> d = x.dims();
        for (std::size_t i = 0; i < d.size(); ++i)
            if (d[i] == Dim(1)) axes.push_back(static_cast<std::int64_t>(i));
        if (axes.empty()) return x;
    }
    Attrs a;
    a.set("axes", norm_axes(std::move(axes), x.rank(), "squeeze", x, false));
    return unary(Op::squeeze, x, std::move(a));
}
Var unsqueeze(const Var& x, std::vector<std::int64_t> axes) {
    std::int64_t out_rank = x.rank() + static_cast<std::int64_t>(axes.size());
    Attrs a;
    a.set("axes", norm_axes(std::move(axes), out_rank, "unsqueeze", x, false));
    return unary(Op::unsqueeze, x, std::move(a));
}
Var unsqueeze(const Var& x, std::int64_t axis) { return unsqueeze(x, std::vector<std::int64_t>{axis}); }
Var broadcast_to(const Var& x, const std::vector<Dim>& dims) {
    Attrs a;
    a.set("shape", dims);
    return unary(Op::broadcast_to, x, std::move(a));
}
Var slice(const Var& x, std::int64_t axis, std::int64_t start, std::int64_t end, std::int64_t step) {
    KILN_USER_CHECK(step >= 1, "slice: step must be >= 1, got " << step << " (operands: " << operand_string(x) << ")");
    Attrs a;
    a.set("axis", norm_axis(axis, x.rank(), "slice", x)).set("start", start).set("end", end).set("step", step);
    return unary(Op::slice, x, std::move(a));
}
Var concat(const std::vector<Var>& xs, std::int64_t axis) {
    KILN_USER_CHECK(!xs.empty(), "concat: expected at least one operand");
    Tracer& t = tracer_for({&xs[0]}, "concat");
    Attrs a;
    a.set("axis", norm_axis(axis, xs[0].rank(), "concat", xs[0]));
    return t.add(Op::concat, xs, std::move(a));
}
std::vector<Var> split(const Var& x, const std::vector<std::int64_t>& sizes, std::int64_t axis) {
    std::int64_t ax = norm_axis(axis, x.rank(), "split", x);
    Dim d = x.dim(ax);
    std::int64_t total = 0;
    for (auto s : sizes) {
        KILN_USER_CHECK(s >= 0, "split: sizes must be >= 0 (operands: " << operand_string(x) << ")");
        total += s;
    }
    KILN_USER_CHECK(d.is_static() && d.value() == total, "split: sizes must add up to the static dim "
                                                              << d.to_string() << " of axis " << ax << ", got " << total
                                                              << " (operands: " << operand_string(x) << ")");
    std::vector<Var> out;
    std::int64_t at = 0;
    for (auto s : sizes) {
        out.push_back(slice(x, ax, at, at + s));
        at += s;
    }
    return out;
}
std::vector<Var> split(const Var& x, std::int64_t sections, std::int64_t axis) {
    std::int64_t ax = norm_axis(axis, x.rank(), "split", x);
    Dim d = x.dim(ax);
    KILN_USER_CHECK(sections >= 1 && d.is_static() && d.value() % sections == 0,
                    "split: " << sections << " equal sections need a static dim divisible by them, got "
                              << d.to_string() << " (operands: " << operand_string(x) << ")");
    return split(x, std::vector<std::int64_t>(static_cast<std::size_t>(sections), d.value() / sections), ax);
}
Var gather(const Var& x, const Var& indices, std::int64_t axis) {
    Tracer& t = tracer_for({&x, &indices}, "gather");
    Attrs a;
    a.set("axis", norm_axis(axis, x.rank(), "gather", x));
    return t.add(Op::gather, {x, indices}, std::move(a));
}
Var pad(const Var& x, const std::vector<std::int64_t>& pads, double value) {
    Attrs a;
    a.set("pads", pads).set("value", value);
    return unary(Op::pad, x, std::move(a));
}
namespace {
// A start or length of narrow or arange: its symbols must be dims of traced values.
void check_known(const Tracer& t, const Dim& d, const char* op, const char* what) {
    for (const std::string& s : d.symbol_names())
        KILN_USER_CHECK(t.knows_symbol(s), op << ": " << what << " " << d << " uses ?" << s
                                              << ", which is no dim of a value of this trace (its value would be unknown "
                                                 "at run time; use a dim of an argument, e.g. x.dim(1))");
}
}  // namespace
Var narrow(const Var& x, std::int64_t axis, const Dim& start, const Dim& length) {
    Tracer& t = tracer_for({&x}, "narrow");
    check_known(t, start, "narrow", "start");
    check_known(t, length, "narrow", "length");
    Attrs a;
    a.set("axis", norm_axis(axis, x.rank(), "narrow", x))
        .set("start", std::vector<Dim>{start})
        .set("length", std::vector<Dim>{length});
    return t.add(Op::narrow, {x}, std::move(a));
}

// ---- generated values ----
Var arange(const Dim& start, const Dim& length, std::int64_t step, DType dtype) {
    Tracer& t = Tracer::current("arange");
    check_known(t, start, "arange", "start");
    check_known(t, length, "arange", "length");
    Attrs a;
    a.set("start", std::vector<Dim>{start}).set("length", std::vector<Dim>{length}).set("step", step).set("dtype", dtype);
    return t.add(Op::arange, {}, std::move(a));
}

}  // namespace kiln
