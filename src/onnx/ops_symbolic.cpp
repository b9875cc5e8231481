// Shape arithmetic on shape values (sym_value.h) at load time: Shape and Size of a shape
// value, Identity, Gather, Slice, Concat, Unsqueeze, Squeeze, Reshape, Cast, Neg, Add, Sub,
// Mul, Div, Max, Min, Equal, Where, ReduceProd and ReduceSum, carried exactly on kiln::Dims.
// What cannot be carried exactly (a division that does not divide, a comparison whose answer
// depends on the sizes) is left to the op's converter, which computes it at run time from
// the materialised value: never a guess.
#include "src/onnx/registry.h"

#include <algorithm>
#include <limits>

namespace kiln::onnx_import {
namespace {

using Elems = std::vector<Dim>;

std::int64_t count(const SymValue& v) { return static_cast<std::int64_t>(v.elems.size()); }

// Axes of Squeeze/Unsqueeze/Reduce*: the attribute (older opsets) or input 1, when known.
std::optional<std::vector<std::int64_t>> axes_of(const NodeCtx& c, std::size_t input) {
    if (c.has(input)) {
        auto k = c.known(input);
        if (!k || !k->is_static()) return std::nullopt;
        std::vector<std::int64_t> axes;
        for (const Dim& d : k->elems) axes.push_back(d.value());
        return axes;
    }
    return c.attr_ints("axes", {});
}

std::vector<std::int64_t> static_values(const SymValue& v) {
    std::vector<std::int64_t> out;
    for (const Dim& d : v.elems) out.push_back(d.value());
    return out;
}

// Elementwise a (op) b with rank-0/1 broadcasting; nullopt when an element cannot be carried.
template <class F>
std::optional<SymValue> zip(const SymValue& a, const SymValue& b, DType out_dtype, F f) {
    const std::int64_t na = count(a), nb = count(b);
    if (na != nb && na != 1 && nb != 1) return std::nullopt;
    SymValue r;
    r.scalar = a.scalar && b.scalar;
    r.dtype = out_dtype;
    const std::int64_t n = na == 1 ? nb : na;  // NumPy broadcasting: [1] with [0] gives [0]
    for (std::int64_t i = 0; i < n; ++i) {
        std::optional<Dim> e = f(a.elems[static_cast<std::size_t>(na == 1 ? 0 : i)],
                                 b.elems[static_cast<std::size_t>(nb == 1 ? 0 : i)]);
        if (!e) return std::nullopt;
        r.elems.push_back(*e);
    }
    return r;
}

// The sign of a - b when the sizes cannot change it: -1, 0, 1, or nullopt.
std::optional<int> compare(const Dim& a, const Dim& b) {
    const Dim d = a - b;
    if (d.is_static()) return d.value() < 0 ? -1 : d.value() > 0 ? 1 : 0;
    if (d.surely_nonnegative() && d.constant() > 0) return 1;
    if ((b - a).surely_nonnegative() && (b - a).constant() > 0) return -1;
    return std::nullopt;
}

std::optional<Dim> divide(const Dim& a, const Dim& b, DType dtype) {
    if (!b.is_static() || b.value() == 0) return std::nullopt;
    if (a.is_static()) {
        if (a.value() == std::numeric_limits<std::int64_t>::min() && b.value() == -1) return std::nullopt;  // overflows
        if (is_integer(dtype)) return Dim(a.value() / b.value());  // ONNX integer Div truncates
        if (a.value() % b.value() != 0) return std::nullopt;       // a fraction: not a dim
        return Dim(a.value() / b.value());
    }
    return a.div_exact(b.value());
}

std::optional<SymValue> binary(const std::string& op, const SymValue& a, const SymValue& b) {
    auto same = [&](auto f) { return zip(a, b, a.dtype, f); };
    if (op == "Add") return same([](const Dim& x, const Dim& y) -> std::optional<Dim> { return x + y; });
    if (op == "Sub") return same([](const Dim& x, const Dim& y) -> std::optional<Dim> { return x - y; });
    if (op == "Mul") return same([](const Dim& x, const Dim& y) -> std::optional<Dim> { return x * y; });
    if (op == "Div") return same([&](const Dim& x, const Dim& y) { return divide(x, y, a.dtype); });
    if (op == "Max" || op == "Min") {
        const bool max = op == "Max";
        return same([max](const Dim& x, const Dim& y) -> std::optional<Dim> {
            auto s = compare(x, y);
            if (!s) return std::nullopt;
            return (*s >= 0) == max ? x : y;
        });
    }
    if (op == "Equal")
        return zip(a, b, DType::boolean, [](const Dim& x, const Dim& y) -> std::optional<Dim> {
            // compare() also decides ?n == -1 (false: ?n + 1 > 0), how exports test for -1 in a shape.
            if (auto s = compare(x, y)) return Dim(*s == 0 ? 1 : 0);
            return std::nullopt;
        });
    return std::nullopt;
}

std::optional<SymValue> fold(const NodeCtx& c) {
    const std::string& op = c.op();
    const SymValue* x = c.sym(0);
    if (op == "Shape" || op == "Size") {
        if (x == nullptr) return std::nullopt;
        SymValue r;
        if (op == "Size") {
            r.scalar = true;
            r.elems = {Dim(count(*x))};
            return r;
        }
        const std::int64_t rank = x->scalar ? 0 : 1;
        auto clampi = [rank](std::int64_t v) { return v < 0 ? std::max<std::int64_t>(v + rank, 0) : std::min(v, rank); };
        if (clampi(c.attr_i("start", 0)) == 0 && clampi(c.attr_i("end", rank)) == 1) r.elems = {Dim(count(*x))};
        return r;
    }
    if (op == "Identity") return x ? std::optional<SymValue>(*x) : std::nullopt;
    if (op == "Gather") {
        auto idx = c.has(1) ? c.known(1) : std::nullopt;
        if (x == nullptr || x->scalar || !idx || !idx->is_static() ) return std::nullopt;
        const std::int64_t axis = c.attr_i("axis", 0);
        c.require(axis == 0 || axis == -1, "axis", "is out of range for a 1-D shape value");
        SymValue r;
        r.scalar = idx->scalar;
        r.dtype = x->dtype;
        for (std::int64_t i : static_values(*idx)) {
            const std::int64_t n = count(*x);
            c.require(i >= -n && i < n, "", "index " + std::to_string(i) + " is out of range for the shape value " + x->to_string());
            r.elems.push_back(x->elems[static_cast<std::size_t>(i < 0 ? i + n : i)]);
        }
        return r;
    }
    if (op == "Slice") {
        if (x == nullptr || x->scalar || c.opset() < 10) return std::nullopt;
        std::optional<SymValue> starts = c.known(1), ends = c.known(2);
        std::optional<SymValue> axes = c.has(3) ? c.known(3) : SymValue{{Dim(0)}, false, DType::i64};
        std::optional<SymValue> steps = c.has(4) ? c.known(4) : SymValue{{Dim(1)}, false, DType::i64};
        for (const auto* k : {&starts, &ends, &axes, &steps})
            if (!*k || !(*k)->is_static() || count(**k) != 1) return std::nullopt;
        const std::int64_t axis = axes->elems[0].value();
        c.require(axis == 0 || axis == -1, "", "axis " + std::to_string(axis) + " is out of range for a 1-D shape value");
        const std::int64_t n = count(*x), step = steps->elems[0].value();
        c.require(step != 0, "", "steps must not be 0");
        auto clampi = [n](std::int64_t v, std::int64_t lo, std::int64_t hi) {
            if (v < 0) v += n;
            return std::clamp(v, lo, hi);
        };
        SymValue r;
        r.dtype = x->dtype;
        if (step > 0) {  // i += step stops at e: a huge step must not overflow i
            for (std::int64_t i = clampi(starts->elems[0].value(), 0, n), e = clampi(ends->elems[0].value(), 0, n); i < e;
                 i = step < e - i ? i + step : e)
                r.elems.push_back(x->elems[static_cast<std::size_t>(i)]);
        } else {
            for (std::int64_t i = clampi(starts->elems[0].value(), -1, n - 1), e = clampi(ends->elems[0].value(), -1, n - 1); i > e;
                 i += step)
                r.elems.push_back(x->elems[static_cast<std::size_t>(i)]);
        }
        return r;
    }
    if (op == "Concat") {
        SymValue r;
        for (std::size_t i = 0; i < c.num_inputs(); ++i) {
            auto k = c.known(i);
            if (!k || k->scalar) return std::nullopt;
            if (i == 0) r.dtype = k->dtype;
            r.elems.insert(r.elems.end(), k->elems.begin(), k->elems.end());
        }
        const std::int64_t axis = c.attr_i("axis");
        c.require(axis == 0 || axis == -1, "axis", "is out of range for 1-D shape values");
        return r;
    }
    if (op == "Unsqueeze" || op == "Squeeze") {
        auto axes = axes_of(c, 1);
        if (x == nullptr || !axes) return std::nullopt;
        SymValue r = *x;
        const bool ok = op == "Unsqueeze" ? x->scalar && axes->size() == 1 && ((*axes)[0] == 0 || (*axes)[0] == -1)
                                          : !x->scalar && count(*x) == 1 && (axes->empty() || *axes == std::vector<std::int64_t>{0} ||
                                                                             *axes == std::vector<std::int64_t>{-1});
        if (!ok) return std::nullopt;
        r.scalar = op == "Squeeze";
        return r;
    }
    if (op == "Reshape") {
        auto shape = c.has(1) ? c.known(1) : std::nullopt;
        if (x == nullptr || !shape || !shape->is_static()) return std::nullopt;
        const std::vector<std::int64_t> s = static_values(*shape);
        SymValue r = *x;
        if (s.empty() && count(*x) == 1) r.scalar = true;
        else if (s.size() == 1 && (s[0] == -1 || s[0] == count(*x))) r.scalar = false;
        else return std::nullopt;
        return r;
    }
    if (op == "Cast") {
        auto to = dtype_from_onnx(c.attr_i("to"));
        if (x == nullptr || !to || *to == DType::boolean) return std::nullopt;
        SymValue r = *x;
        r.dtype = *to;
        return r;
    }
    if (op == "Neg") {
        if (x == nullptr) return std::nullopt;
        SymValue r = *x;
        for (Dim& d : r.elems) d = Dim(0) - d;
        return r;
    }
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Max" || op == "Min" || op == "Equal") {
        if (c.num_inputs() != 2) return std::nullopt;
        auto a = c.known(0), b = c.known(1);
        if (!a || !b) return std::nullopt;
        return binary(op, *a, *b);
    }
    if (op == "Where") {
        auto cond = c.known(0), a = c.known(1), b = c.known(2);
        if (!cond || !a || !b || !cond->is_static()) return std::nullopt;
        const std::int64_t n = std::max({count(*cond), count(*a), count(*b)});
        for (const SymValue* v : {&*cond, &*a, &*b})
            if (count(*v) != n && count(*v) != 1) return std::nullopt;
        auto at = [](const SymValue& v, std::int64_t i) { return v.elems[static_cast<std::size_t>(count(v) == 1 ? 0 : i)]; };
        SymValue r;
        r.dtype = a->dtype;
        r.scalar = cond->scalar && a->scalar && b->scalar;
        for (std::int64_t i = 0; i < n; ++i) r.elems.push_back(at(*cond, i).value() != 0 ? at(*a, i) : at(*b, i));
        return r;
    }
    if (op == "ReduceProd" || op == "ReduceSum") {
        auto axes = axes_of(c, op == "ReduceSum" || c.opset() >= 18 ? 1 : 99);
        if (x == nullptr || x->scalar || !axes || !(axes->empty() || *axes == std::vector<std::int64_t>{0} ||
                                                    *axes == std::vector<std::int64_t>{-1}))
            return std::nullopt;
        Dim acc(op == "ReduceProd" ? 1 : 0);
        for (const Dim& d : x->elems) acc = op == "ReduceProd" ? acc * d : acc + d;
        SymValue r;
        r.dtype = x->dtype;
        r.scalar = c.attr_i("keepdims", 1) == 0;
        r.elems = {acc};
        return r;
    }
    return std::nullopt;
}

// Sizes of exported models are short polynomials of low degree (?past+?seq, 12*?b*?s). A
// model that multiplies sizes over and over (s = s * s, forty times) would build dims of
// exponential size: past these bounds a value is left to run time, like an inexact division.
constexpr std::size_t kMaxTerms = 16, kMaxDegree = 8;

bool carried(const Dim& d) {
    if (d.terms().size() > kMaxTerms) return false;
    for (const Dim::Term& t : d.terms())
        if (t.symbols.size() > kMaxDegree) return false;
    return true;
}

}  // namespace

bool fold_symbolic(NodeCtx& c) {
    std::optional<SymValue> r = fold(c);
    if (!r || !std::all_of(r->elems.begin(), r->elems.end(), carried)) return false;
    c.set_out(0, *r);
    return true;
}

}  // namespace kiln::onnx_import
