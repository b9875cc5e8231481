// The elementwise part of the lowering (lower_ctx.h): each elementwise graph op as a KIR
// expression (node_expr), the value of a node at a point of an iteration space (value:
// loads of group inputs, views, temps for values used more than once), the stores of group
// outputs, and the elementwise form of a group (lower_elementwise; see lower.h).
#include "src/core/scalar_ops.h"
#include "src/kir/lower_ctx.h"
#include "src/support/check.h"

#include <algorithm>

namespace kiln::kir::detail {

using ir::ValueId;

namespace {

// lo/hi of clamp as the interpreter uses them (core::scalar::clamp_bound): converted to the
// dtype (saturating), then to its compute type.
ExprRef clamp_bound(DType dt, double v) {
    const Type ct = compute_type(dt);
    return core::dispatch(dt, [&](auto tag) -> ExprRef {
        using T = decltype(tag);
        const auto c = core::scalar::clamp_bound<T>(v);
        if constexpr (std::is_floating_point_v<decltype(c)>)
            return constant(ct, static_cast<double>(c));
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
        const bool bound = node(v).op == ir::Op::maximum || node(v).op == ir::Op::minimum;
        for (ValueId in : node(v).inputs) {
            // A bound of maximum/minimum that is a floating scalar constant (relu6's 0 and 6)
            // is a constant of the kernel: the code generators fold it (a max with a number
            // is one instruction, not NaN tests). Other constants stay buffers, so that
            // kernels differing only in them share code.
            const ir::Node& c = node(in);
            if (bound && !in_group(in) && c.op == ir::Op::constant && c.value.numel() == 1 && is_floating(c.type.dtype))
                args.push_back(constant(compute_type(c.type.dtype), c.value.to_doubles().front()));
            else
                args.push_back(value(in, ph));
        }
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
    // The inner loop runs over the trailing dims [k, n) on which every input is either whole
    // (the output's dims: one contiguous run) or broadcast (all 1: one value for the run),
    // at least the last dim: x[N,C,H,W] * s[N,C,1,1] (squeeze-excite) runs rows of H * W,
    // not of W (a 7 x 7 or 14 x 14 plane's rows are shorter than two vectors). Views that
    // move elements keep rows of the last dim.
    const Dim one(1);
    // Is input `in` whole (the output's dims) and/or broadcast (all 1) over dims [a, b)?
    // (Inputs of lower rank align right; one of higher rank is neither.)
    auto form = [&](ValueId in, std::size_t a, std::size_t b, bool& whole, bool& ones) {
        const auto& d = L.node(in).type.dims;
        whole = ones = d.size() <= n;
        if (!whole) return;
        const std::size_t lead = n - d.size();
        for (std::size_t x = a; x < b; ++x) {
            const Dim& dx = x >= lead ? d[x - lead] : one;
            whole = whole && x >= lead && dx == S[x];
            ones = ones && dx.is_static() && dx.value() == 1;
        }
    };
    auto whole_or_ones = [&](std::size_t a, std::size_t b) {
        for (ValueId in : L.group.inputs) {
            bool whole = false, ones = false;
            form(in, a, b, whole, ones);
            if (!whole && !ones) return false;
        }
        return true;
    };
    std::size_t k = n - 1;
    bool views = false;
    for (ValueId v : L.group.nodes) views = views || passes::is_view_op(L.node(v));
    while (!views && k > 1 && whole_or_ones(k - 1, n)) --k;  // (k = 0 would be the flat case above)

    // A short row whose input is broadcast along the dims before it (the blocked layout's
    // squeeze-excite, x[N, Cb, H, W, 16] * s[N, Cb, 1, 1, 16]: rows of 16) runs a middle loop
    // over those dims, [m, k): the one before the row, and more while an outer index holds at
    // most kMiddleElems values, rather than one outer index per row (efficientnet_b0's 144
    // channels at 56 x 56, AVX-512, AMD EPYC Zen 4: 101 us, where the NCHW form took 42).
    constexpr std::int64_t kShortRow = 64, kMiddleElems = 1024;
    auto static_extent = [&](std::size_t a, std::size_t b, std::int64_t* e) {
        *e = 1;
        for (std::size_t x = a; x < b; ++x) {
            if (!S[x].is_static()) return false;
            *e *= S[x].value();
        }
        return true;
    };
    auto broadcast_before_row = [&](std::size_t a) {
        for (ValueId in : L.group.inputs) {
            bool whole = false, ones = false, row_whole = false, row_ones = false;
            form(in, a, k, whole, ones);
            form(in, k, n, row_whole, row_ones);
            if (ones && !row_ones) return true;
        }
        return false;
    };
    std::size_t m = k;
    std::int64_t elems = 0;
    if (!views && k > 1 && static_extent(k, n, &elems) && elems <= kShortRow) {
        for (std::int64_t d = 0; m > 1 && static_extent(m - 1, m, &d) && (m == k || elems * d <= kMiddleElems) &&
                                 whole_or_ones(m - 1, k);
             --m)
            elems *= d;
        if (m < k && !broadcast_before_row(m)) m = k;
    }
    const int j = L.new_var();
    std::vector<StmtRef> inner;
    if (m < k) {
        const int mv = L.new_var();
        Space sp = L.make_space(ref, {0, m, k}, {outer(), var(mv), var(j)});
        L.k.extent = L.product(ref, 0, m);
        Phase ph{&sp, &inner, {}};
        L.store_outputs(outs, ph);
        L.k.body.push_back(loop(mv, index_const(0), L.product(ref, m, k), {loop(j, index_const(0), L.product(ref, k, n), std::move(inner))}));
        return;
    }
    Space sp = L.make_space(ref, {0, k}, {outer(), var(j)});
    L.k.extent = L.product(ref, 0, k);
    Phase ph{&sp, &inner, {}};
    L.store_outputs(outs, ph);
    L.k.body.push_back(loop(j, index_const(0), L.product(ref, k, n), std::move(inner)));
}

}  // namespace kiln::kir::detail
