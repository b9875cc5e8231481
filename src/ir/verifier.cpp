#include "src/ir/verifier.h"

#include "src/ir/printer.h"
#include "src/ir/shape_infer.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <span>
#include <sstream>
#include <string_view>
#include <unordered_set>

namespace kiln::ir {
namespace {

// AttrValue alternative indices.
constexpr std::size_t kInt = 0, kFloat = 1, kInts = 2, kDims = 3, kDType = 4, kString = 5;
constexpr const char* kKindNames[] = {"int", "float", "ints", "dims", "dtype", "string"};

struct AttrSpec {
    std::string_view name;
    std::size_t kind;
    int list_len = -1;  // for kInts and kDims: the exact length, or -1 for any
    bool optional = false;
};

// The attributes of each op, as ops.def documents them (sorted by name).
std::span<const AttrSpec> attr_specs(Op op) {
    static constexpr AttrSpec kInput[] = {{"name", kString}};
    static constexpr AttrSpec kGelu[] = {{"approx", kInt}};
    static constexpr AttrSpec kCast[] = {{"dtype", kDType}};
    static constexpr AttrSpec kClamp[] = {{"hi", kFloat}, {"lo", kFloat}};
    static constexpr AttrSpec kReduce[] = {{"axes", kInts}, {"keepdim", kInt}};
    static constexpr AttrSpec kAxis[] = {{"axis", kInt}};
    static constexpr AttrSpec kEps[] = {{"eps", kFloat}};
    static constexpr AttrSpec kConv[] = {
        {"dilation", kInts, 2}, {"groups", kInt}, {"padding", kInts, 2}, {"stride", kInts, 2}};
    static constexpr AttrSpec kConvNchwc[] = {{"blocked_input", kInt}, {"channels", kInt, -1, true}, {"depthwise", kInt},
                                              {"dilation", kInts, 2}, {"padding", kInts, 2}, {"stride", kInts, 2}};
    static constexpr AttrSpec kPool[] = {{"kernel", kInts, 2}, {"padding", kInts, 2}, {"stride", kInts, 2}};
    static constexpr AttrSpec kShape[] = {{"shape", kDims}};
    static constexpr AttrSpec kPerm[] = {{"perm", kInts}};
    static constexpr AttrSpec kAxes[] = {{"axes", kInts}};
    static constexpr AttrSpec kSlice[] = {{"axis", kInt}, {"end", kInt}, {"start", kInt}, {"step", kInt}};
    static constexpr AttrSpec kPad[] = {{"pads", kInts}, {"value", kFloat}};
    static constexpr AttrSpec kNarrow[] = {{"axis", kInt}, {"length", kDims, 1}, {"start", kDims, 1}};
    static constexpr AttrSpec kArange[] = {{"dtype", kDType}, {"length", kDims, 1}, {"start", kDims, 1}, {"step", kInt}};
    switch (op) {
    case Op::input: return kInput;
    case Op::gelu: return kGelu;
    case Op::cast: return kCast;
    case Op::clamp: return kClamp;
    case Op::sum: case Op::mean: case Op::max: case Op::min: case Op::prod: case Op::argmax: case Op::argmin:
        return kReduce;
    case Op::softmax: case Op::log_softmax: case Op::concat: case Op::gather: return kAxis;
    case Op::layer_norm: case Op::rms_norm: case Op::batch_norm: return kEps;
    case Op::conv2d: return kConv;
    case Op::conv2d_nchwc: return kConvNchwc;
    case Op::max_pool2d: case Op::avg_pool2d: return kPool;
    case Op::reshape: case Op::broadcast_to: return kShape;
    case Op::permute: return kPerm;
    case Op::squeeze: case Op::unsqueeze: return kAxes;
    case Op::slice: return kSlice;
    case Op::pad: return kPad;
    case Op::narrow: return kNarrow;
    case Op::arange: return kArange;
    default: return {};
    }
}

class Verifier {
public:
    explicit Verifier(const Graph& g) : g_(g) {}

    void run() {
        gen_.set_next(first_free_fresh_number());
        for (std::size_t i = 0; i < g_.nodes.size(); ++i) check_node(static_cast<ValueId>(i));
        check_inputs();
        for (std::size_t k = 0; k < g_.outputs.size(); ++k) {
            ValueId o = g_.outputs[k];
            if (o < 0 || static_cast<std::size_t>(o) >= g_.nodes.size())
                fail(-1, "output " + std::to_string(k) + " is %" + std::to_string(o) +
                             ", which is not a node (the graph has " + std::to_string(g_.nodes.size()) + ")");
        }
    }

private:
    [[noreturn]] void fail(ValueId id, const std::string& msg) const {
        std::string where = "graph \"" + g_.name + "\": ";
        if (id >= 0) where += node_label(g_, id) + ": ";
        throw VerifyError("invalid IR: " + where + msg, id);
    }

    const Node& node(ValueId id) const { return g_.nodes[static_cast<std::size_t>(id)]; }

    // One past the largest N of any symbol `_N` in the graph, so that symbols minted while
    // verifying are told apart from recorded ones.
    int first_free_fresh_number() const {
        int next = 1;
        auto see = [&next](const Dim& d) {
            for (const std::string& s : d.symbol_names()) {
                if (s.size() < 2 || s[0] != '_' || s.size() > 10) continue;
                int n = 0;
                auto [p, ec] = std::from_chars(s.data() + 1, s.data() + s.size(), n);
                if (ec == std::errc() && p == s.data() + s.size() && n < INT_MAX / 2) next = std::max(next, n + 1);
            }
        };
        for (const Node& n : g_.nodes) {
            for (const Dim& d : n.type.dims) see(d);
            for (const auto& [name, v] : n.attrs.items())
                if (const auto* dims = std::get_if<std::vector<Dim>>(&v))
                    for (const Dim& d : *dims) see(d);
        }
        return next;
    }

    void check_node(ValueId id) {
        const Node& n = node(id);
        int count = static_cast<int>(n.inputs.size());
        int lo = op_min_inputs(n.op), hi = op_max_inputs(n.op);
        if (count < lo || (hi >= 0 && count > hi)) {
            std::string want = hi < 0 ? "at least " + std::to_string(lo)
                               : lo == hi ? std::to_string(lo)
                                          : std::to_string(lo) + " to " + std::to_string(hi);
            fail(id, "has " + std::to_string(count) + " operands, expected " + want);
        }
        for (ValueId in : n.inputs)
            if (in < 0 || in >= id)
                fail(id, "operand %" + std::to_string(in) +
                             " is not defined before the node (operands must refer to earlier nodes)");
        check_attrs(id);
        check_attr_symbols(id);
        check_type_dims(id);
        for (const Dim& d : n.type.dims)
            for (const std::string& s : d.symbol_names()) known_symbols_.insert(s);
        if (n.op == Op::input) return;
        if (n.op == Op::constant) {
            check_constant(id);
            return;
        }
        check_inferred_type(id);
    }

    void check_attrs(ValueId id) const {
        const Node& n = node(id);
        std::span<const AttrSpec> specs = attr_specs(n.op);
        for (const AttrSpec& s : specs) {
            const AttrValue* v = n.attrs.find(s.name);
            if (v == nullptr && s.optional) continue;
            if (v == nullptr) fail(id, "missing attribute '" + std::string(s.name) + "' (" + kKindNames[s.kind] + ")");
            if (v->index() != s.kind)
                fail(id, "attribute '" + std::string(s.name) + "' must be " + kKindNames[s.kind] + ", got " +
                             kKindNames[v->index()] + " " + print_attr_value(*v));
            const std::size_t len = s.kind == kInts   ? std::get<std::vector<std::int64_t>>(*v).size()
                                    : s.kind == kDims ? std::get<std::vector<Dim>>(*v).size()
                                                      : 0;
            if (s.list_len >= 0 && len != static_cast<std::size_t>(s.list_len))
                fail(id, "attribute '" + std::string(s.name) + "' must hold " + std::to_string(s.list_len) +
                             " values, got " + print_attr_value(*v));
        }
        for (const auto& [name, v] : n.attrs.items()) {
            bool known = std::any_of(specs.begin(), specs.end(), [&n = name](const AttrSpec& s) { return s.name == n; });
            if (!known) {
                std::string list;
                for (const AttrSpec& s : specs) list += (list.empty() ? "" : ", ") + std::string(s.name);
                fail(id, "unexpected attribute '" + name + "' (" + std::string(op_name(n.op)) + " takes " +
                             (list.empty() ? "none" : list) + ")");
            }
        }
    }

    // The symbols of narrow's and arange's start and length get their values at run time only
    // from the dims of values computed before them: each must be a dim symbol of an earlier node.
    void check_attr_symbols(ValueId id) const {
        const Node& n = node(id);
        if (n.op != Op::narrow && n.op != Op::arange) return;
        for (const char* name : {"length", "start"})
            for (const Dim& d : n.attrs.dims(name))
                for (const std::string& s : d.symbol_names())
                    if (!known_symbols_.contains(s))
                        fail(id, std::string("attribute '") + name + "' uses ?" + s +
                                     ", which is no dim of an earlier value (its value would be unknown at run time)");
    }

    void check_type_dims(ValueId id) const {
        const TensorType& t = node(id).type;
        for (std::size_t i = 0; i < t.dims.size(); ++i) {
            const Dim& d = t.dims[i];
            // A symbolic dim must be able to be a size: some term has a positive coefficient.
            bool ok = d.is_static() ? d.value() >= 0
                                    : std::any_of(d.terms().begin(), d.terms().end(), [](const Dim::Term& term) { return term.coeff > 0; });
            if (!ok)
                fail(id, "type " + t.to_string() + " has an invalid dim " + d.to_string() + " at axis " +
                             std::to_string(i));
        }
    }

    void check_constant(ValueId id) const {
        const Node& n = node(id);
        if (!n.value.defined()) fail(id, "a constant must hold a defined value");
        if (!n.value.is_contiguous()) fail(id, "a constant's value must be contiguous");
        if (!n.type.is_static()) fail(id, "a constant's type " + n.type.to_string() + " must be static");
        TensorType actual = static_type(n.value.dtype(), n.value.shape());
        if (actual != n.type)
            fail(id, "the value is " + actual.to_string() + " but the node's type is " + n.type.to_string());
    }

    void check_inferred_type(ValueId id) {
        const Node& n = node(id);
        std::vector<const TensorType*> in;
        in.reserve(n.inputs.size());
        for (ValueId v : n.inputs) in.push_back(&node(v).type);
        int minted_from = gen_.next();
        TensorType want;
        try {
            want = infer_type(n.op, in, n.attrs, &gen_);
        } catch (const kiln::Error& e) {
            fail(id, e.what());
        }
        auto minted = [&](const Dim& d) {
            if (!d.is_symbol() || d.symbols()[0].size() < 2 || d.symbols()[0][0] != '_') return false;
            int k = 0;
            const std::string& s = d.symbols()[0];
            auto [p, ec] = std::from_chars(s.data() + 1, s.data() + s.size(), k);
            return ec == std::errc() && p == s.data() + s.size() && k >= minted_from && k < gen_.next();
        };
        auto fresh_like = [](const Dim& d) { return d.is_symbol() && d.symbols()[0][0] == '_'; };
        bool same = want.dtype == n.type.dtype && want.dims.size() == n.type.dims.size();
        for (std::size_t i = 0; same && i < want.dims.size(); ++i)
            same = want.dims[i] == n.type.dims[i] || (minted(want.dims[i]) && fresh_like(n.type.dims[i]));
        if (!same) {
            std::string ops;
            for (std::size_t k = 0; k < in.size(); ++k) ops += (k ? ", " : "") + in[k]->to_string();
            fail(id, "recorded type " + n.type.to_string() + " differs from the inferred type " + want.to_string() +
                         " (operands: " + ops + ")");
        }
    }

    void check_inputs() const {
        std::vector<ValueId> expected;
        std::unordered_set<std::string> names;
        for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
            const Node& n = g_.nodes[i];
            if (n.op != Op::input) continue;
            auto id = static_cast<ValueId>(i);
            expected.push_back(id);
            const std::string& name = n.attrs.str("name");
            if (!names.insert(name).second) fail(id, "input name \"" + name + "\" is used by an earlier input");
            for (const Dim& d : n.type.dims)
                if (!d.is_static() && !d.is_symbol())
                    fail(id, "an input's dims must be integers or single symbols, got " + n.type.to_string());
        }
        if (expected != g_.inputs) {
            auto list = [](const std::vector<ValueId>& v) {
                std::string s = "[";
                for (std::size_t k = 0; k < v.size(); ++k) s += (k ? ", %" : "%") + std::to_string(v[k]);
                return s + "]";
            };
            fail(-1, "the input list " + list(g_.inputs) + " must list the input nodes in order: " + list(expected));
        }
    }

    const Graph& g_;
    SymbolGen gen_;
    std::unordered_set<std::string> known_symbols_;  // of the types of the nodes checked so far
};

}  // namespace

void verify(const Graph& g) { Verifier(g).run(); }

}  // namespace kiln::ir
