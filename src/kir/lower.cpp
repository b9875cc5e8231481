// Lowering of fusion groups into KIR (see lower.h): the shared machinery (buffers, params,
// index arithmetic, node -> expression) and the elementwise form. Row reductions are in
// lower_row.cpp, matmuls in lower_matmul.cpp, convolutions in lower_conv.cpp.
#include "src/kir/lower.h"

#include "src/core/element.h"
#include "src/kir/lower_ctx.h"
#include "src/support/check.h"

#include <algorithm>
#include <limits>

namespace kiln::kir {
namespace detail {

using ir::ValueId;

bool const_value(const ExprRef& e, std::int64_t* v) {
    if (e->kind != ExprKind::Const || e->type != Type::index) return false;
    *v = e->i;
    return true;
}

ExprRef int_const(Type t, std::int64_t v) {
    auto e = std::make_shared<Expr>();
    e->kind = ExprKind::Const;
    e->type = t;
    e->i = v;
    return e;
}

namespace {
bool is(const ExprRef& e, std::int64_t want) {
    std::int64_t v = 0;
    return const_value(e, &v) && v == want;
}
std::int64_t wrap_mul(std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
}
std::int64_t wrap_add(std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
}  // namespace

ExprRef iadd(const ExprRef& a, const ExprRef& b) {
    std::int64_t x = 0, y = 0;
    if (const_value(a, &x) && const_value(b, &y)) return index_const(wrap_add(x, y));
    if (is(a, 0)) return b;
    if (is(b, 0)) return a;
    return binary(BinaryOp::add, a, b);
}
ExprRef imul(const ExprRef& a, const ExprRef& b) {
    std::int64_t x = 0, y = 0;
    if (const_value(a, &x) && const_value(b, &y)) return index_const(wrap_mul(x, y));
    if (is(a, 0) || is(b, 0)) return index_const(0);
    if (is(a, 1)) return b;
    if (is(b, 1)) return a;
    return binary(BinaryOp::mul, a, b);
}
ExprRef idiv(const ExprRef& a, const ExprRef& b) {
    std::int64_t x = 0, y = 0;
    if (const_value(a, &x) && const_value(b, &y) && y > 0) return index_const(x / y);
    if (is(b, 1) || is(a, 0)) return a;
    return binary(BinaryOp::div, a, b);
}
ExprRef irem(const ExprRef& a, const ExprRef& b) {
    if (is(b, 1)) return index_const(0);
    std::int64_t x = 0, y = 0;
    if (const_value(a, &x) && const_value(b, &y) && y > 0) return index_const(x % y);
    return binary(BinaryOp::sub, a, imul(idiv(a, b), b));
}

ExprRef imin(const ExprRef& a, const ExprRef& b) {
    std::int64_t x = 0, y = 0;
    if (const_value(a, &x) && const_value(b, &y)) return index_const(std::min(x, y));
    return binary(BinaryOp::min, a, b);
}
ExprRef ceil_div(const ExprRef& a, std::int64_t b) { return idiv(iadd(a, index_const(b - 1)), index_const(b)); }

Lowering::Lowering(const ir::Graph& graph, const passes::Group& grp) : g(graph), group(grp) {
    k.name = group.name;
    for (std::size_t i = 0; i < group.inputs.size(); ++i) {
        input_buf_[group.inputs[i]] = static_cast<int>(i);
        k.buffers.push_back({"in" + std::to_string(i), node(group.inputs[i]).type.dtype, false});
    }
    for (std::size_t i = 0; i < group.outputs.size(); ++i) {
        output_buf_[group.outputs[i]] = static_cast<int>(k.buffers.size());
        k.buffers.push_back({"out" + std::to_string(i), node(group.outputs[i]).type.dtype, true});
        ++uses_[group.outputs[i]];
    }
    for (ValueId v : group.nodes)
        for (ValueId in : node(v).inputs) ++uses_[in];
}

bool Lowering::in_group(ValueId v) const {
    return std::binary_search(group.nodes.begin(), group.nodes.end(), v);
}

int Lowering::output_buffer(ValueId v) const {
    auto it = output_buf_.find(v);
    return it == output_buf_.end() ? -1 : it->second;
}

int Lowering::input_buffer(ValueId v, const char* what) const {
    auto it = input_buf_.find(v);
    if (it == input_buf_.end()) throw Unsupported{std::string(what) + " is not a group input"};
    return it->second;
}

int Lowering::new_temp(Type t) {
    k.temps.push_back(t);
    return static_cast<int>(k.temps.size()) - 1;
}

ExprRef Lowering::param_for(const Dim& d) {
    for (const auto& [dim, id] : dim_params_)
        if (dim == d) return param(id);
    auto search = [&](const std::vector<ValueId>& values, const char* prefix, int first) -> ExprRef {
        for (std::size_t i = 0; i < values.size(); ++i) {
            const auto& dims = node(values[i]).type.dims;
            for (std::size_t j = 0; j < dims.size(); ++j) {
                if (!(dims[j] == d)) continue;
                const int id = static_cast<int>(k.params.size());
                k.params.push_back(prefix + std::to_string(i) + ".d" + std::to_string(j));
                k.param_sources.push_back({first + static_cast<int>(i), static_cast<int>(j)});
                dim_params_.emplace_back(d, id);
                return param(id);
            }
        }
        return nullptr;
    };
    if (ExprRef p = search(group.inputs, "in", 0)) return p;
    return search(group.outputs, "out", static_cast<int>(group.inputs.size()));
}

ExprRef Lowering::dim_of(ValueId v, std::size_t axis) {
    const Dim& d = node(v).type.dims[axis];
    if (d.is_static()) return index_const(d.value());
    if (ExprRef p = param_for(d)) return p;
    if (is_view(v)) return view_dim(v, axis);
    if (!in_group(v)) return nullptr;
    // A fresh symbol of a group node: the broadcast of its operands' dims.
    const std::size_t rank = node(v).type.dims.size();
    ExprRef r;
    for (ValueId in : node(v).inputs) {
        const std::size_t rin = node(in).type.dims.size();
        if (axis + rin < rank) continue;
        ExprRef de = dim_of(in, axis + rin - rank);
        if (!de) return nullptr;
        if (is(de, 1)) continue;
        r = r ? select(binary(BinaryOp::eq, r, index_const(1)), de, r) : de;
    }
    return r ? r : index_const(1);
}

ExprRef Lowering::known_dim(ValueId v, std::size_t axis) {
    if (ExprRef e = dim_of(v, axis)) return e;
    throw Unsupported{"dim " + std::to_string(axis) + " of %" + std::to_string(v) + " is not known from any buffer"};
}

ExprRef Lowering::product(ValueId v, std::size_t begin, std::size_t end) {
    ExprRef p = index_const(1);
    for (std::size_t d = begin; d < end; ++d) p = imul(p, known_dim(v, d));
    return p;
}

Space Lowering::make_space(ValueId shape_of, const std::vector<std::size_t>& seg_starts,
                           const std::vector<ExprRef>& seg_index) {
    Space s;
    s.dims = node(shape_of).type.dims;
    s.seg_index = seg_index;
    for (std::size_t d = 0; d < s.dims.size(); ++d) {
        int seg = 0;
        for (std::size_t i = 0; i < seg_starts.size(); ++i)
            if (seg_starts[i] <= d) seg = static_cast<int>(i);
        s.segment.push_back(seg);
        s.extents.push_back(product(shape_of, d, d + 1));
    }
    return s;
}

ExprRef Lowering::offset(ValueId v, const Space& space) {
    const auto& vd = node(v).type.dims;
    const std::size_t rv = vd.size(), n = space.dims.size();
    if (rv > n) throw Unsupported{"%" + std::to_string(v) + " has a higher rank than its iteration space"};
    const std::size_t shift = n - rv;
    auto stride = [&](std::size_t e) { return product(v, e + 1, rv); };
    ExprRef off = index_const(0);
    std::size_t a = 0;
    while (a < n) {
        std::size_t b = a;
        while (b < n && space.segment[b] == space.segment[a]) ++b;
        const ExprRef& lin = space.seg_index[static_cast<std::size_t>(space.segment[a])];
        bool full = a >= shift;
        for (std::size_t d = a; d < b && full; ++d) full = vd[d - shift] == space.dims[d];
        if (full) {
            off = iadd(off, imul(lin, stride(b - 1 - shift)));
        } else {
            for (std::size_t d = std::max(a, shift); d < b; ++d) {
                const Dim& ud = vd[d - shift];
                if (ud.is_static() && ud.value() == 1) continue;
                ExprRef p = index_const(1);
                for (std::size_t e = d + 1; e < b; ++e) p = imul(p, space.extents[e]);
                ExprRef idx = idiv(lin, p);
                if (d != a) idx = irem(idx, space.extents[d]);
                ExprRef st = stride(d - shift);
                if (!(ud == space.dims[d]) && !ud.is_static())
                    st = select(binary(BinaryOp::eq, known_dim(v, d - shift), index_const(1)), index_const(0), st);
                off = iadd(off, imul(idx, st));
            }
        }
        a = b;
    }
    return off;
}

// Views (fuse.h): a view node is not computed; its value at a point is a load of the buffer
// at the end of its chain of views, at the index the chain maps the point to. Indices travel
// as per-dim vectors, or as a row-major linear index through reshape, squeeze and
// unsqueeze, which keep it (so a reshape of a buffer costs no div/mod).

namespace {
ExprRef isub(const ExprRef& a, const ExprRef& b) {
    std::int64_t x = 0, y = 0;
    if (const_value(a, &x) && const_value(b, &y)) return index_const(static_cast<std::int64_t>(static_cast<std::uint64_t>(x) - static_cast<std::uint64_t>(y)));
    if (is(b, 0)) return a;
    return binary(BinaryOp::sub, a, b);
}
bool keeps_linear(ir::Op op) { return op == ir::Op::reshape || op == ir::Op::squeeze || op == ir::Op::unsqueeze; }
std::size_t uz(std::int64_t v) { return static_cast<std::size_t>(v); }
}  // namespace

bool Lowering::is_view(ValueId v) const { return in_group(v) && passes::is_view_op(node(v)); }

// A slice bound on axis `axis` of x as the interpreter clamps it: a negative value counts
// from the end, then the result is clamped to [0, size].
ExprRef Lowering::slice_start(ValueId x, std::size_t axis, std::int64_t bound) {
    ExprRef n = known_dim(x, axis);
    std::int64_t nv = 0;
    if (const_value(n, &nv)) return index_const(bound < 0 ? std::max<std::int64_t>(bound + nv, 0) : std::min(bound, nv));
    if (bound < 0) return binary(BinaryOp::max, iadd(n, index_const(bound)), index_const(0));
    return bound == 0 ? index_const(0) : binary(BinaryOp::min, index_const(bound), n);
}

// The run-time size of dim `axis` of view v, derived from its operand (a fresh symbol, or a
// product no buffer holds). Null if unknown.
ExprRef Lowering::view_dim(ValueId v, std::size_t axis) {
    const ir::Node& nd = node(v);
    const ValueId x = nd.inputs[0];
    const auto& vd = nd.type.dims;
    const auto& xd = node(x).type.dims;
    switch (nd.op) {
    case ir::Op::permute: return dim_of(x, uz(nd.attrs.ints("perm")[axis]));
    case ir::Op::squeeze: {
        const auto& axes = nd.attrs.ints("axes");
        std::size_t kept = 0;
        for (std::size_t i = 0; i < xd.size(); ++i) {
            if (std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(i)) != axes.end()) continue;
            if (kept++ == axis) return dim_of(x, i);
        }
        return nullptr;
    }
    case ir::Op::unsqueeze: {
        const auto& axes = nd.attrs.ints("axes");
        const auto before = std::count_if(axes.begin(), axes.end(), [&](std::int64_t a) { return a < static_cast<std::int64_t>(axis); });
        return dim_of(x, axis - static_cast<std::size_t>(before));
    }
    case ir::Op::broadcast_to: {
        const std::size_t lead = vd.size() - xd.size();
        if (axis >= lead && xd[axis - lead] == vd[axis]) return dim_of(x, axis - lead);
        return nullptr;
    }
    case ir::Op::slice: {
        if (static_cast<std::int64_t>(axis) != nd.attrs.i("axis")) return dim_of(x, axis);
        const ExprRef b = slice_start(x, axis, nd.attrs.i("start")), e = slice_start(x, axis, nd.attrs.i("end"));
        const ExprRef len = iadd(idiv(isub(isub(e, b), index_const(1)), index_const(nd.attrs.i("step"))), index_const(1));
        std::int64_t bv = 0, ev = 0;
        if (const_value(b, &bv) && const_value(e, &ev)) return index_const(ev > bv ? (ev - bv - 1) / nd.attrs.i("step") + 1 : 0);
        return select(binary(BinaryOp::gt, e, b), len, index_const(0));
    }
    case ir::Op::reshape: {
        // numel(x) over the product of the other dims, when those are known directly.
        ExprRef others = index_const(1);
        for (std::size_t j = 0; j < vd.size(); ++j) {
            if (j == axis) continue;
            ExprRef d = vd[j].is_static() ? index_const(vd[j].value()) : param_for(vd[j]);
            if (!d) return nullptr;
            others = imul(others, d);
        }
        return binary(BinaryOp::div, product(x, 0, xd.size()), binary(BinaryOp::max, others, index_const(1)));
    }
    default: return nullptr;
    }
}

// The per-dim index of v (broadcast into `space`, aligned right) at the space's current point.
std::vector<ExprRef> Lowering::point_dims(ValueId v, const Space& space) {
    const auto& vd = node(v).type.dims;
    const std::size_t rv = vd.size(), n = space.dims.size();
    if (rv > n) throw Unsupported{"%" + std::to_string(v) + " has a higher rank than its iteration space"};
    const std::size_t shift = n - rv;
    std::vector<ExprRef> out;
    for (std::size_t j = 0; j < rv; ++j) {
        const std::size_t d = j + shift;
        if (vd[j].is_static() && vd[j].value() == 1) {
            out.push_back(index_const(0));
            continue;
        }
        std::size_t a = d, b = d + 1;
        while (a > 0 && space.segment[a - 1] == space.segment[d]) --a;
        while (b < n && space.segment[b] == space.segment[d]) ++b;
        ExprRef inner = index_const(1);
        for (std::size_t e = d + 1; e < b; ++e) inner = imul(inner, space.extents[e]);
        ExprRef idx = idiv(space.seg_index[uz(space.segment[d])], inner);
        if (d != a) idx = irem(idx, space.extents[d]);
        if (!(vd[j] == space.dims[d]) && !vd[j].is_static())
            idx = select(binary(BinaryOp::eq, known_dim(v, j), index_const(1)), index_const(0), idx);
        out.push_back(idx);
    }
    return out;
}

std::vector<ExprRef> Lowering::dims_of(ValueId v, Point p) {
    if (p.dims.size() == node(v).type.dims.size() && !p.linear) return p.dims;
    const std::size_t rv = node(v).type.dims.size();
    std::vector<ExprRef> out(rv);
    ExprRef lin = p.linear;
    for (std::size_t d = rv; d-- > 1;) {
        const ExprRef ext = product(v, d, d + 1);
        out[d] = irem(lin, ext);
        lin = idiv(lin, ext);
    }
    if (rv > 0) out[0] = lin;
    return out;
}

namespace {
bool same_expr(const ExprRef& a, const ExprRef& b) {
    if (a == b) return true;
    if (!a || !b || a->kind != b->kind || a->type != b->type || a->i != b->i || a->id != b->id || a->uop != b->uop ||
        a->bop != b->bop || a->args.size() != b->args.size())
        return false;
    if (a->kind == ExprKind::Const && !(a->f == b->f)) return false;
    for (std::size_t i = 0; i < a->args.size(); ++i)
        if (!same_expr(a->args[i], b->args[i])) return false;
    return true;
}
// a + b, folding a + (p - a) to p: re-linearising indices that were split from one linear
// index, (i / n) * n + (i - (i / n) * n), gives i back instead of a div and a mul.
ExprRef iadd_fold(const ExprRef& a, const ExprRef& b) {
    if (b->kind == ExprKind::Binary && b->bop == BinaryOp::sub && same_expr(b->args[1], a)) return b->args[0];
    return iadd(a, b);
}
}  // namespace

ExprRef Lowering::linear_of(ValueId v, Point p) {
    if (p.linear) return p.linear;
    ExprRef lin = index_const(0);
    for (std::size_t d = 0; d < p.dims.size(); ++d) lin = iadd_fold(imul(lin, product(v, d, d + 1)), p.dims[d]);
    return lin;
}

// The element offset, in the buffer `*root` at the end of v's chain of views, of point p of v.
ExprRef Lowering::view_offset(ValueId v, Point p, ValueId* root) {
    if (!is_view(v)) {
        *root = v;
        return linear_of(v, std::move(p));
    }
    const ir::Node& nd = node(v);
    const ValueId x = nd.inputs[0];
    const std::size_t rx = node(x).type.dims.size();
    if (keeps_linear(nd.op) && (p.linear || nd.op == ir::Op::reshape)) return view_offset(x, {{}, linear_of(v, std::move(p))}, root);
    const std::vector<ExprRef> d = dims_of(v, std::move(p));
    std::vector<ExprRef> xi;
    switch (nd.op) {
    case ir::Op::squeeze: {  // the squeezed axes (size 1) get index 0
        const auto& axes = nd.attrs.ints("axes");
        for (std::size_t i = 0, j = 0; i < rx; ++i)
            xi.push_back(std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(i)) != axes.end() ? index_const(0) : d[j++]);
        break;
    }
    case ir::Op::unsqueeze: {  // drop the inserted axes
        const auto& axes = nd.attrs.ints("axes");
        for (std::size_t i = 0; i < d.size(); ++i)
            if (std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(i)) == axes.end()) xi.push_back(d[i]);
        break;
    }
    case ir::Op::permute: {
        const auto& perm = nd.attrs.ints("perm");
        xi.resize(rx);
        for (std::size_t i = 0; i < rx; ++i) xi[uz(perm[i])] = d[i];
        break;
    }
    case ir::Op::broadcast_to: {  // aligned right; a dim of size 1 (maybe only at run time) reads index 0
        const auto& xd = node(x).type.dims;
        const auto& vd = nd.type.dims;
        const std::size_t lead = vd.size() - rx;
        for (std::size_t j = 0; j < rx; ++j) {
            const ExprRef& idx = d[lead + j];
            if (xd[j].is_static()) xi.push_back(xd[j].value() == 1 ? index_const(0) : idx);
            else if (xd[j] == vd[lead + j]) xi.push_back(idx);
            else xi.push_back(select(binary(BinaryOp::eq, known_dim(x, j), index_const(1)), index_const(0), idx));
        }
        break;
    }
    case ir::Op::slice: {
        const std::size_t axis = uz(nd.attrs.i("axis"));
        xi = d;
        xi[axis] = iadd(slice_start(x, axis, nd.attrs.i("start")), imul(d[axis], index_const(nd.attrs.i("step"))));
        break;
    }
    default: throw Unsupported{std::string(ir::op_name(nd.op)) + " is not a view"};
    }
    return view_offset(x, {std::move(xi), nullptr}, root);
}

// The value of view v at the current point of `space`: a load of its chain's buffer.
ExprRef Lowering::view_value(ValueId v, const Space& space) {
    Point p;
    if (keeps_linear(node(v).op)) p.linear = offset(v, space);
    else p.dims = point_dims(v, space);
    ValueId root = -1;
    const ExprRef off = view_offset(v, std::move(p), &root);
    auto it = input_buf_.find(root);
    KILN_CHECK(it != input_buf_.end(), "kir::lower: view %" << v << " of group " << group.name << " does not end at an input");
    return load(it->second, compute_type(node(v).type.dtype), off);
}

namespace {

// lo/hi of clamp as the interpreter uses them: converted to the dtype (saturating), then
// to its compute type.
ExprRef clamp_bound(DType dt, double v) {
    const Type ct = compute_type(dt);
    return core::dispatch(dt, [&](auto tag) -> ExprRef {
        using T = decltype(tag);
        const T c = core::convert<T>(v);
        if constexpr (std::is_floating_point_v<core::compute_t<T>>)
            return constant(ct, static_cast<double>(static_cast<core::compute_t<T>>(c)));
        else
            return int_const(ct, static_cast<std::int64_t>(c));
    });
}

}  // namespace

ExprRef Lowering::node_expr(const ir::Node& nd, const std::vector<ExprRef>& a) {
    using ir::Op;
    auto un = [&](UnaryOp op) { return unary(op, a[0]); };
    auto bin = [&](BinaryOp op) { return binary(op, a[0], a[1]); };
    switch (nd.op) {
    case Op::neg: return un(UnaryOp::neg);
    case Op::abs: return un(UnaryOp::abs);
    case Op::exp: return un(UnaryOp::exp);
    case Op::log: return un(UnaryOp::log);
    case Op::sqrt: return un(UnaryOp::sqrt);
    case Op::rsqrt: return un(UnaryOp::rsqrt);
    case Op::reciprocal: return un(UnaryOp::reciprocal);
    case Op::sin: return un(UnaryOp::sin);
    case Op::cos: return un(UnaryOp::cos);
    case Op::tanh: return un(UnaryOp::tanh);
    case Op::sigmoid: return un(UnaryOp::sigmoid);
    case Op::relu: return un(UnaryOp::relu);
    case Op::gelu: return un(nd.attrs.i("approx") == 0 ? UnaryOp::gelu_erf : UnaryOp::gelu_tanh);
    case Op::silu: return un(UnaryOp::silu);
    case Op::erf: return un(UnaryOp::erf);
    case Op::floor: return un(UnaryOp::floor);
    case Op::ceil: return un(UnaryOp::ceil);
    case Op::round: return un(UnaryOp::round);
    case Op::sign: return un(UnaryOp::sign);
    case Op::logical_not: return un(UnaryOp::logical_not);
    case Op::cast: return cast(compute_type(nd.attrs.dtype("dtype")), a[0]);
    case Op::clamp: {
        // x < lo ? lo : (x > hi ? hi : x): NaN stays NaN.
        ExprRef lo = clamp_bound(nd.type.dtype, nd.attrs.f("lo")), hi = clamp_bound(nd.type.dtype, nd.attrs.f("hi"));
        return select(binary(BinaryOp::lt, a[0], lo), lo, select(binary(BinaryOp::gt, a[0], hi), hi, a[0]));
    }
    case Op::add: return bin(BinaryOp::add);
    case Op::sub: return bin(BinaryOp::sub);
    case Op::mul: return bin(BinaryOp::mul);
    case Op::div: return bin(BinaryOp::div);
    case Op::pow: return bin(BinaryOp::pow);
    case Op::maximum: return bin(BinaryOp::max);
    case Op::minimum: return bin(BinaryOp::min);
    case Op::eq: return bin(BinaryOp::eq);
    case Op::ne: return bin(BinaryOp::ne);
    case Op::lt: return bin(BinaryOp::lt);
    case Op::le: return bin(BinaryOp::le);
    case Op::gt: return bin(BinaryOp::gt);
    case Op::ge: return bin(BinaryOp::ge);
    case Op::where: return select(a[0], a[1], a[2]);
    default: break;
    }
    throw Unsupported{std::string(ir::op_name(nd.op)) + " is not an elementwise op"};
}

ExprRef Lowering::value(ValueId v, Phase& ph) {
    if (auto it = ph.memo.find(v); it != ph.memo.end()) return it->second;
    ExprRef e;
    if (auto sp = special.find(v); sp != special.end()) {
        e = sp->second(ph);
    } else if (!in_group(v)) {
        auto it = input_buf_.find(v);
        KILN_CHECK(it != input_buf_.end(), "kir::lower: %" << v << " is neither in group " << group.name << " nor an input");
        e = load(it->second, compute_type(node(v).type.dtype), offset(v, *ph.space));
    } else if (is_view(v)) {
        e = view_value(v, *ph.space);
    } else {
        std::vector<ExprRef> args;
        for (ValueId in : node(v).inputs) args.push_back(value(in, ph));
        e = node_expr(node(v), args);
        if (uses_[v] > 1 && e->kind != ExprKind::Const) {
            const int t = new_temp(e->type);
            ph.out->push_back(assign(t, e));
            e = temp(t, e->type);
        }
    }
    ph.memo[v] = e;
    return e;
}

void Lowering::store_outputs(const std::vector<ValueId>& values, Phase& ph) {
    for (ValueId v : values) {
        const int b = output_buffer(v);
        if (b < 0) continue;
        ExprRef val = value(v, ph);
        ph.out->push_back(store(b, offset(v, *ph.space), cast(compute_type(node(v).type.dtype), val)));
    }
}

void lower_elementwise(Lowering& L) {
    const auto& outs = L.group.outputs;
    if (outs.empty()) throw Unsupported{"the group has no outputs"};
    const ValueId ref = outs.front();
    const auto& S = L.node(ref).type.dims;
    for (ValueId o : outs)
        if (L.node(o).type.dims != S) throw Unsupported{"the group's outputs have different shapes"};
    const std::size_t n = S.size();
    bool flat = n <= 1;
    if (!flat) {
        flat = true;
        for (ValueId in : L.group.inputs) {
            const auto& d = L.node(in).type.dims;
            const bool one = std::all_of(d.begin(), d.end(), [](const Dim& x) { return x.is_static() && x.value() == 1; });
            flat = flat && (d == S || one);
        }
        // Views that move elements (permute, broadcast, slice) need per-dim indices: a row
        // with an inner loop gives the last one without div/mod.
        for (ValueId v : L.group.nodes)
            flat = flat && !(passes::is_view_op(L.node(v)) && L.node(v).op != ir::Op::reshape &&
                             L.node(v).op != ir::Op::squeeze && L.node(v).op != ir::Op::unsqueeze);
    }
    if (flat) {
        Space sp = L.make_space(ref, {0}, {outer()});
        L.k.extent = L.product(ref, 0, n);
        Phase ph{&sp, &L.k.body, {}};
        L.store_outputs(outs, ph);
        return;
    }
    const int j = L.new_var();
    Space sp = L.make_space(ref, {0, n - 1}, {outer(), var(j)});
    L.k.extent = L.product(ref, 0, n - 1);
    std::vector<StmtRef> inner;
    Phase ph{&sp, &inner, {}};
    L.store_outputs(outs, ph);
    L.k.body.push_back(loop(j, index_const(0), L.product(ref, n - 1, n), std::move(inner)));
}

}  // namespace detail

std::optional<Kernel> lower(const ir::Graph& g, const passes::Group& group, std::string* why) {
    auto fail = [&](std::string m) -> std::optional<Kernel> {
        if (why) *why = std::move(m);
        return std::nullopt;
    };
    switch (group.kind) {
    case passes::GroupKind::opaque:
        return fail("opaque groups (" + std::string(ir::op_name(g.nodes[static_cast<std::size_t>(group.nodes.front())].op)) +
                    ") are not lowered");
    case passes::GroupKind::elementwise:
    case passes::GroupKind::row_reduction:
    case passes::GroupKind::matmul:
    case passes::GroupKind::conv: break;
    }
    try {
        detail::Lowering L(g, group);
        if (group.kind == passes::GroupKind::elementwise) detail::lower_elementwise(L);
        else if (group.kind == passes::GroupKind::matmul) detail::lower_matmul(L);
        else if (group.kind == passes::GroupKind::conv) detail::lower_conv(L);
        else detail::lower_row(L);
        verify(L.k);
        return std::move(L.k);
    } catch (const detail::Unsupported& u) {
        return fail(u.why);
    }
}

}  // namespace kiln::kir
