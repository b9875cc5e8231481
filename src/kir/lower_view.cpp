// Views in the lowering (lower_ctx.h; fuse.h says which ops are views): a view node is not
// computed; its value at a point is a load of the buffer at the end of its chain of views,
// at the index the chain maps the point to. Indices travel as per-dim vectors, or as a
// row-major linear index through reshape, squeeze and unsqueeze, which keep it (so a
// reshape of a buffer costs no div/mod).
#include "src/kir/lower_ctx.h"
#include "src/support/check.h"

#include <algorithm>

namespace kiln::kir::detail {

using ir::ValueId;

namespace {
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
    case ir::Op::narrow: {
        if (static_cast<std::int64_t>(axis) != nd.attrs.i("axis")) return dim_of(x, axis);
        return attr_dim(nd.attrs.dims("length")[0]);
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
    case ir::Op::narrow: {  // start + i, in bounds: the shape plan checked start + length <= the dim
        const std::size_t axis = uz(nd.attrs.i("axis"));
        xi = d;
        xi[axis] = iadd(attr_dim(nd.attrs.dims("start")[0]), d[axis]);
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
}  // namespace kiln::kir::detail
