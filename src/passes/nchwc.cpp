// The blocked channel layout pass (see nchwc.h). One walk in topological order builds the
// new graph: each old value gets its NCHW form and/or its blocked form in the new graph, made
// when first needed (inputs are copied first, in order; constants when first read).
#include "src/passes/nchwc.h"

#include "src/support/check.h"

#include <algorithm>
#include <map>

namespace kiln::passes {
namespace {

using ir::Node;
using ir::Op;
using ir::ValueId;

constexpr ValueId kNone = -1;

std::size_t ix(ValueId v) { return static_cast<std::size_t>(v); }

// A conv2d the pass rewrites: floating, constant weight and bias, dense or depthwise.
bool convertible(const ir::Graph& g, const Node& n) {
    if (n.op != Op::conv2d || !is_floating(n.type.dtype)) return false;
    for (std::size_t i = 1; i < n.inputs.size(); ++i)
        if (g.nodes[ix(n.inputs[i])].op != Op::constant) return false;
    const auto& x = g.nodes[ix(n.inputs[0])].type;
    const auto& w = g.nodes[ix(n.inputs[1])].type;
    if (x.rank() != 4 || w.rank() != 4 || !x.dims[1].is_static()) return false;
    const std::int64_t groups = n.attrs.i("groups");
    return groups == 1 || (w.dims[1].value() == 1 && groups == x.dims[1].value() && groups == w.dims[0].value());
}

class Rewriter {
public:
    Rewriter(const ir::Graph& g, std::int64_t block)
        : g_(g), B_(block), nchw_(g.nodes.size(), kNone), blk_(g.nodes.size(), kNone) {}

    ir::Graph run() {
        out_.name = g_.name;
        for (ValueId in : g_.inputs) {
            nchw_[ix(in)] = add(g_.nodes[ix(in)]);
            out_.inputs.push_back(nchw_[ix(in)]);
        }
        for (std::size_t v = 0; v < g_.nodes.size(); ++v) visit(static_cast<ValueId>(v));
        for (ValueId o : g_.outputs) out_.outputs.push_back(nchw(o));
        return std::move(out_);
    }

private:
    const ir::Graph& g_;
    const std::int64_t B_;
    ir::Graph out_;
    std::vector<ValueId> nchw_, blk_;  // per old value: its forms in the new graph, or kNone
    std::map<ValueId, ValueId> channel_constants_;

    const Node& old(ValueId v) const { return g_.nodes[ix(v)]; }
    std::int64_t blocks(std::int64_t c) const { return (c + B_ - 1) / B_; }

    ValueId add(Node n) {
        out_.nodes.push_back(std::move(n));
        return static_cast<ValueId>(out_.nodes.size() - 1);
    }
    ValueId add(Op op, std::vector<ValueId> inputs, ir::Attrs attrs, ir::TensorType type) {
        Node n;
        n.op = op;
        n.inputs = std::move(inputs);
        n.attrs = std::move(attrs);
        n.type = std::move(type);
        return add(std::move(n));
    }
    ValueId constant(Tensor t) {
        Node n;
        n.op = Op::constant;
        n.type = ir::static_type(t.dtype(), t.shape());
        n.value = std::move(t);
        return add(std::move(n));
    }

    // The blocked type of an NCHW type.
    ir::TensorType blocked_type(const ir::TensorType& t) const {
        return {t.dtype, {t.dims[0], Dim(blocks(t.dims[1].value())), t.dims[2], t.dims[3], Dim(B_)}};
    }

    // Old value v as NCHW in the new graph (converted back from its blocked form once).
    ValueId nchw(ValueId v) {
        if (nchw_[ix(v)] != kNone) return nchw_[ix(v)];
        if (old(v).op == Op::constant) return nchw_[ix(v)] = add(old(v));  // copied when first read
        KILN_CHECK(blk_[ix(v)] != kNone, "nchwc: value " << v << " has no form in the new graph");
        const ir::TensorType& t = old(v).type;
        const std::int64_t c = t.dims[1].value(), cp = blocks(c) * B_;
        ir::TensorType pt{t.dtype, {t.dims[0], Dim(blocks(c)), Dim(B_), t.dims[2], t.dims[3]}};
        ValueId p = add(Op::permute, {blk_[ix(v)]}, ir::Attrs().set("perm", std::vector<std::int64_t>{0, 1, 4, 2, 3}), pt);
        ir::TensorType rt{t.dtype, {t.dims[0], Dim(cp), t.dims[2], t.dims[3]}};
        ValueId r = add(Op::reshape, {p}, ir::Attrs().set("shape", rt.dims), rt);
        if (cp != c) {
            ir::Attrs a;
            a.set("axis", std::int64_t{1}).set("end", c).set("start", std::int64_t{0}).set("step", std::int64_t{1});
            r = add(Op::slice, {r}, std::move(a), t);
        }
        return nchw_[ix(v)] = r;
    }

    // Old value v (rank 4, static channels) blocked in the new graph.
    ValueId blocked(ValueId v) {
        if (blk_[ix(v)] != kNone) return blk_[ix(v)];
        const ir::TensorType& t = old(v).type;
        const std::int64_t c = t.dims[1].value(), cp = blocks(c) * B_;
        ValueId x = nchw(v);
        ir::TensorType xt = t;
        if (cp != c) {
            xt.dims[1] = Dim(cp);
            ir::Attrs a;
            a.set("pads", std::vector<std::int64_t>{0, 0, 0, cp - c, 0, 0, 0, 0}).set("value", 0.0);
            x = add(Op::pad, {x}, std::move(a), xt);
        }
        ir::TensorType rt{t.dtype, {t.dims[0], Dim(blocks(c)), Dim(B_), t.dims[2], t.dims[3]}};
        ValueId r = add(Op::reshape, {x}, ir::Attrs().set("shape", rt.dims), rt);
        return blk_[ix(v)] = add(Op::permute, {r}, ir::Attrs().set("perm", std::vector<std::int64_t>{0, 1, 3, 4, 2}),
                                 blocked_type(t));
    }

    // A per-channel constant: [C, 1, 1] or [1, C, 1, 1] for C channels.
    bool is_channel_constant(ValueId v, std::int64_t c) const {
        const Node& n = old(v);
        const auto& d = n.type.dims;
        if (n.op != Op::constant || d.size() < 3 || d.size() > 4 || !n.type.is_static()) return false;
        return d[d.size() - 3].value() == c && d[d.size() - 2].value() == 1 && d.back().value() == 1 &&
               (d.size() == 3 || d[0].value() == 1);
    }
    // That constant as [1, Cb, 1, 1, B] (zero padded), made once.
    ValueId channel_constant(ValueId v, std::int64_t c) {
        if (auto it = channel_constants_.find(v); it != channel_constants_.end()) return it->second;
        return channel_constants_[v] = constant(padded_channels(old(v).value, c, {1, blocks(c), 1, 1, B_}));
    }

    // The c values of t (in order) zero padded to whole blocks, as a tensor of `shape`.
    Tensor padded_channels(const Tensor& t, std::int64_t c, const Shape& shape) const {
        std::vector<double> dst(static_cast<std::size_t>(blocks(c) * B_), 0.0);
        const std::vector<double> src = t.to_doubles();
        std::copy(src.begin(), src.end(), dst.begin());
        return Tensor::from_vector(dst, shape).astype(t.dtype());
    }

    // The weight [O, CG, KH, KW] as [Ob, CG, KH, KW, B] (zero padded).
    ValueId blocked_weight(const Tensor& w) {
        const std::int64_t o = w.dim(0), taps = w.numel() / std::max<std::int64_t>(o, 1);
        const std::vector<double> src = w.to_doubles();
        std::vector<double> dst(static_cast<std::size_t>(blocks(o) * B_ * taps), 0.0);
        for (std::int64_t r = 0; r < o; ++r)
            for (std::int64_t t = 0; t < taps; ++t)
                dst[static_cast<std::size_t>(((r / B_) * taps + t) * B_ + r % B_)] = src[static_cast<std::size_t>(r * taps + t)];
        return constant(Tensor::from_vector(dst, {blocks(o), w.dim(1), w.dim(2), w.dim(3), B_}).astype(w.dtype()));
    }

    void conv(ValueId v) {
        const Node& n = old(v);
        const ValueId x = n.inputs[0];
        const bool dw = n.attrs.i("groups") != 1;
        const bool in_blocked = dw || blk_[ix(x)] != kNone;
        ir::Attrs a;
        a.set("blocked_input", std::int64_t{in_blocked}).set("depthwise", std::int64_t{dw});
        for (const char* k : {"dilation", "padding", "stride"}) a.set(k, n.attrs.ints(k));
        // A dense conv's real channel count where the last block is padded (ops.def).
        const std::int64_t o = old(n.inputs[1]).value.dim(0);
        if (!dw && o % B_ != 0) a.set("channels", o);
        std::vector<ValueId> in{in_blocked ? blocked(x) : nchw(x), blocked_weight(old(n.inputs[1]).value)};
        if (n.inputs.size() == 3) {  // the bias [O] as [Ob, B]
            const Tensor& b = old(n.inputs[2]).value;
            in.push_back(constant(padded_channels(b, b.dim(0), {blocks(b.dim(0)), B_})));
        }
        blk_[ix(v)] = add(Op::conv2d_nchwc, std::move(in), std::move(a), blocked_type(n.type));
    }

    // An elementwise node on blocked operands, if each is a blocked value of the node's
    // channels, a per-channel constant, or a single element (checked before anything is added).
    bool elementwise(ValueId v) {
        const Node& n = old(v);
        if (n.type.rank() != 4 || !n.type.dims[1].is_static()) return false;
        const std::int64_t c = n.type.dims[1].value();
        enum class Form { blocked, single, channels };
        std::vector<Form> forms;
        for (ValueId u : n.inputs) {
            const ir::TensorType& ut = old(u).type;
            if (blk_[ix(u)] != kNone && ut.rank() == 4 && ut.dims[1].is_static() && ut.dims[1].value() == c)
                forms.push_back(Form::blocked);
            else if (ut.rank() <= 5 && ut.is_static() && numel_of(ut) == 1)
                forms.push_back(Form::single);
            else if (is_channel_constant(u, c))
                forms.push_back(Form::channels);
            else
                return false;
        }
        if (std::find(forms.begin(), forms.end(), Form::blocked) == forms.end()) return false;
        std::vector<ValueId> in;
        for (std::size_t i = 0; i < forms.size(); ++i) {
            const ValueId u = n.inputs[i];
            in.push_back(forms[i] == Form::blocked ? blk_[ix(u)] : forms[i] == Form::single ? nchw(u) : channel_constant(u, c));
        }
        blk_[ix(v)] = add(n.op, std::move(in), n.attrs, blocked_type(n.type));
        return true;
    }
    static std::int64_t numel_of(const ir::TensorType& t) {
        std::int64_t e = 1;
        for (const Dim& d : t.dims) e *= d.value();
        return e;
    }

    bool concat(ValueId v) {
        const Node& n = old(v);
        if (n.type.rank() != 4 || n.attrs.i("axis") != 1) return false;
        std::vector<ValueId> in;
        for (ValueId u : n.inputs) {
            if (blk_[ix(u)] == kNone || old(u).type.dims[1].value() % B_ != 0) return false;
            in.push_back(blk_[ix(u)]);
        }
        blk_[ix(v)] = add(Op::concat, std::move(in), n.attrs, blocked_type(n.type));
        return true;
    }

    // global_avg_pool2d of a blocked value: the mean over its two spatial axes, [N, Cb, 1, 1, B].
    void pool(ValueId v) {
        const Node& n = old(v);
        ir::Attrs a;
        a.set("axes", std::vector<std::int64_t>{2, 3}).set("keepdim", std::int64_t{1});
        blk_[ix(v)] = add(Op::mean, {blk_[ix(n.inputs[0])]}, std::move(a), blocked_type(n.type));
    }

    void visit(ValueId v) {
        const Node& n = old(v);
        if (n.op == Op::input || n.op == Op::constant) return;
        if (n.op == Op::conv2d && convertible(g_, n)) return conv(v);
        if (ir::is_elementwise(n.op) && elementwise(v)) return;
        if (n.op == Op::concat && concat(v)) return;
        if (n.op == Op::global_avg_pool2d && blk_[ix(n.inputs[0])] != kNone) return pool(v);
        Node copy = n;
        for (ValueId& u : copy.inputs) u = nchw(u);
        nchw_[ix(v)] = add(std::move(copy));
    }
};

}  // namespace

bool nchwc_applies(const ir::Graph& g, NchwcMode mode) {
    if (mode == NchwcMode::off) return false;
    int convs = 0, depthwise = 0;
    for (const Node& n : g.nodes) {
        if (!convertible(g, n)) continue;
        ++convs;
        depthwise += n.attrs.i("groups") != 1;
    }
    if (convs < 2) return false;
    return mode == NchwcMode::all || depthwise >= 2;
}

ir::Graph to_nchwc(const ir::Graph& g, std::int64_t block) {
    KILN_CHECK(block >= 1, "nchwc: block " << block);
    int convs = 0;
    for (const Node& n : g.nodes) convs += convertible(g, n);
    if (convs < 2) return g;
    return Rewriter(g, block).run();
}

}  // namespace kiln::passes
