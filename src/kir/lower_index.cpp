// Index expressions of the lowering (lower_ctx.h): index arithmetic that folds constants
// and identities, the run-time dims of values (params, constants, broadcasts of operands'
// dims), iteration spaces, and the element offset of a buffer at a point of a space.
#include "src/kir/lower_ctx.h"
#include "src/support/check.h"

#include <algorithm>

namespace kiln::kir::detail {

using ir::ValueId;

bool const_value(const ExprRef& e, std::int64_t* v) {
    if (e->kind != ExprKind::Const || e->type != Type::index) return false;
    *v = e->i;
    return true;
}

std::int64_t balanced_block(const ExprRef& total, std::int64_t cap, std::int64_t unit) {
    std::int64_t n = 0;
    if (!const_value(total, &n) || n <= cap) return cap;
    // Blocks of whole units (a cap of 144 rows in units of 32 would make blocks of 144 that
    // a tier's tiles of 32 rows do not divide).
    const std::int64_t most = std::max(unit, cap / unit * unit);
    std::int64_t blocks = (n + most - 1) / most;
    blocks += blocks % 2;
    const std::int64_t size = (n + blocks - 1) / blocks;
    return std::min(most, (size + unit - 1) / unit * unit);
}

std::int64_t two_blocks_if_one(const ExprRef& total, std::int64_t block, std::int64_t unit) {
    std::int64_t n = 0;
    if (!const_value(total, &n) || n > block || n < 64) return block;
    return (n / 2 + unit - 1) / unit * unit;
}

ExprRef conv_coord(const ExprRef& out, std::int64_t stride, std::int64_t pad, const ExprRef& tap, std::int64_t dilation) {
    return iadd(iadd(imul(out, index_const(stride)), index_const(-pad)), imul(tap, index_const(dilation)));
}

ExprRef padded_load(int x, Type t, const ExprRef& idx, const ExprRef& inside_idx, const ExprRef& iy, const ExprRef& ix,
                    const ExprRef& h, const ExprRef& w, std::int64_t pad_h, std::int64_t pad_w) {
    if (pad_h == 0 && pad_w == 0) return load(x, t, idx);
    // 0 <= v < n
    auto in_range = [](const ExprRef& v, const ExprRef& n) {
        return binary(BinaryOp::logical_and, binary(BinaryOp::ge, v, index_const(0)), binary(BinaryOp::lt, v, n));
    };
    ExprRef inside;
    if (pad_h > 0) inside = in_range(iy, h);
    if (pad_w > 0) {
        ExprRef cx = in_range(ix, w);
        inside = inside ? binary(BinaryOp::logical_and, inside, cx) : cx;
    }
    return select(inside, load(x, t, select(inside, idx, inside_idx)), constant(t, 0.0));
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
std::int64_t wrap_sub(std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b));
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
ExprRef isub(const ExprRef& a, const ExprRef& b) {
    std::int64_t x = 0, y = 0;
    if (const_value(a, &x) && const_value(b, &y)) return index_const(wrap_sub(x, y));
    if (is(b, 0)) return a;
    return binary(BinaryOp::sub, a, b);
}
ExprRef iadd_fold(const ExprRef& a, const ExprRef& b) {
    if (b->kind == ExprKind::Binary && b->bop == BinaryOp::sub && same_expr(b->args[1], a)) return b->args[0];
    return iadd(a, b);
}

ExprRef Lowering::param_for(const Dim& d, bool symbols) {
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
    if (ExprRef p = search(group.outputs, "out", static_cast<int>(group.inputs.size()))) return p;
    if (d.is_symbol()) {
        if (!symbols) return nullptr;
        const int id = static_cast<int>(k.params.size());
        k.params.push_back("?" + d.symbols()[0]);
        k.param_sources.push_back(ParamSource::of_symbol(d.symbols()[0]));
        dim_params_.emplace_back(d, id);
        return param(id);
    }
    // A sum or product no buffer holds as a dim: composed from its symbols' params.
    ExprRef sum = index_const(d.constant());
    for (const Dim::Term& t : d.terms()) {
        ExprRef term = index_const(t.coeff);
        for (const std::string& s : t.symbols) {
            ExprRef p = param_for(Dim::symbol(s), symbols);
            if (!p) return nullptr;
            term = imul(term, p);
        }
        sum = iadd(sum, term);
    }
    return sum;
}

ExprRef Lowering::attr_dim(const Dim& d) {
    if (d.is_static()) return index_const(d.value());
    ExprRef p = param_for(d, true);
    KILN_CHECK(p != nullptr, "kir::lower: no param for " << d);
    return p;
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

}  // namespace kiln::kir::detail
