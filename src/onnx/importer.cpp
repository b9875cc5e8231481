#include "src/onnx/importer.h"

#include "src/onnx/registry.h"
#include "src/support/check.h"

#include <kiln/engine.h>
#include <kiln/trace.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <set>

namespace kiln::onnx_import {
namespace {

constexpr std::int64_t kMaxFoldElements = std::int64_t{1} << 22;

// Letters, digits and '_', starting with a letter (Kiln's symbol names).
std::string symbol_name(const std::string& raw) {
    std::string s;
    for (char ch : raw) s += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    if (s.empty() || !std::isalpha(static_cast<unsigned char>(s[0]))) s = "d" + s;
    return s;
}

ValueInfo value_info(const pb::ValueInfoProto& v, const char* what, bool shape_required = true) {
    KILN_USER_CHECK(v.type().has_tensor_type(),
                    "ONNX model: " << what << " '" << v.name() << "' is not a tensor (sequences, maps and optionals are not supported)");
    const auto& tt = v.type().tensor_type();
    auto dt = dtype_from_onnx(tt.elem_type());
    KILN_USER_CHECK(dt.has_value(), "ONNX model: " << what << " '" << v.name() << "': element type "
                                                   << onnx_type_name(tt.elem_type()) << " is not supported");
    ValueInfo info{v.name(), *dt, {}};
    if (!tt.has_shape() && !shape_required) return info;
    KILN_USER_CHECK(tt.has_shape(), "ONNX model: " << what << " '" << v.name() << "' has no shape (its rank is unknown)");
    int i = 0;
    for (const auto& d : tt.shape().dim()) {
        if (d.has_dim_value()) {
            KILN_USER_CHECK(d.dim_value() >= 0, "ONNX model: " << what << " '" << v.name() << "': dim " << i << " is "
                                                               << d.dim_value());
            info.dims.emplace_back(d.dim_value());
        } else if (d.has_dim_param() && !d.dim_param().empty()) {
            info.dims.push_back(Dim::symbol(symbol_name(d.dim_param())));
        } else {
            info.dims.push_back(Dim::symbol(symbol_name(v.name()) + "_unk" + std::to_string(i)));
        }
        ++i;
    }
    return info;
}

class Importer {
public:
    Importer(const pb::ModelProto& model, const OnnxOptions& options)
        : model_(model), graph_(model.graph()), options_(options), opset_(default_opset(model)) {
        for (const auto& init : graph_.initializer()) {
            KILN_USER_CHECK(!init.name().empty(), "ONNX model: an initializer has no name");
            initializers_[init.name()] = &init;
        }
        for (const auto& [name, value] : options_.input_values) {
            bool found = false;
            for (const auto& in : graph_.input()) found |= in.name() == name;
            KILN_USER_CHECK(found, "OnnxOptions::input_values: '" << name << "' is not an input of the model");
            KILN_USER_CHECK(value.defined(), "OnnxOptions::input_values: the value of '" << name << "' is undefined");
        }
    }

    Graph build() {
        std::vector<ArgSpec> args;
        std::set<std::string> seen;
        for (const auto& in : graph_.input()) {
            KILN_USER_CHECK(seen.insert(in.name()).second, "ONNX model: graph input '" << in.name() << "' repeats");
            if (initializers_.count(in.name()) || options_.input_values.count(in.name())) continue;
            ValueInfo info = value_info(in, "graph input");
            args.push_back(arg(info.name, info.dtype, info.dims));
        }
        std::string name = options_.name.empty() ? (graph_.name().empty() ? "onnx" : graph_.name()) : options_.name;
        return trace(name, args, [&](const std::vector<Var>& in) { return body(args, in); });
    }

private:
    std::vector<Var> body(const std::vector<ArgSpec>& args, const std::vector<Var>& in) {
        for (std::size_t i = 0; i < args.size(); ++i) values_[args[i].name] = in[i];
        for (const auto& [name, value] : options_.input_values) values_[name] = Var(value.contiguous());
        for (int i = 0; i < graph_.node_size(); ++i) convert(graph_.node(i), i);
        std::vector<Var> outs;
        KILN_USER_CHECK(graph_.output_size() > 0, "ONNX model: the graph has no outputs");
        for (const auto& o : graph_.output()) outs.push_back(output(o));
        return outs;
    }

    Var lookup(const std::string& name, const std::string& user) {
        auto it = values_.find(name);
        if (it != values_.end()) return it->second;
        auto init = initializers_.find(name);
        if (init != initializers_.end()) {
            Var v(tensor_from_proto(*init->second, "initializer '" + name + "'"));
            values_[name] = v;
            return v;
        }
        KILN_USER_ERROR(user << ": input '" << name << "' is not defined before it (nodes must be in topological order)");
    }

    void convert(const pb::NodeProto& node, int index) {
        std::string label = node_label(node, index);
        KILN_USER_CHECK(node.domain().empty() || node.domain() == "ai.onnx",
                        label << ": the domain '" << node.domain() << "' is not supported (only the default domain, ai.onnx)");
        const Registry& reg = registry();
        auto def = reg.find(node.op_type());
        KILN_USER_CHECK(def != reg.end(), label << ": the op '" << node.op_type() << "' is not supported");
        for (const auto& a : node.attribute()) {
            bool known = false;
            for (const auto& n : def->second.attrs) known |= n == a.name();
            KILN_USER_CHECK(known, label << ": attribute '" << a.name() << "' is not supported");
        }
        std::vector<Var> inputs;
        std::vector<std::optional<SymValue>> syms(static_cast<std::size_t>(node.input_size()));
        bool all_constant = true, any_sym = false;
        std::int64_t in_elements = 0;
        for (const auto& name : node.input()) {
            if (name.empty()) {
                inputs.emplace_back();
                continue;
            }
            if (auto s = sym_values_.find(name); s != sym_values_.end()) {
                syms[inputs.size()] = s->second;
                inputs.emplace_back();
                all_constant = false;
                any_sym = true;
                continue;
            }
            Var v = lookup(name, label);
            std::optional<Tensor> c = constant_value(v);
            all_constant &= c.has_value();
            if (c) in_elements += c->numel();
            inputs.push_back(v);
        }
        std::vector<Var> outs;
        std::vector<std::optional<SymValue>> sym_outs;
        try {
            bool fold = all_constant && !node.input().empty() && in_elements <= kMaxFoldElements;
            std::vector<bool> sized;
            for (const auto& name : node.input()) sized.push_back(from_sizes_.count(name) > 0);
            bool computed_from_sizes = false;
            if (fold) outs = folded(node, label, inputs);
            else std::tie(outs, sym_outs, computed_from_sizes) = run(node, label, inputs, std::move(syms), any_sym, sized);
            if (computed_from_sizes)
                for (int i = 0; i < node.output_size(); ++i) from_sizes_.insert(node.output(i));
        } catch (const Error& e) {
            std::string msg = e.what();
            if (msg.rfind(label, 0) == 0) throw;
            KILN_USER_ERROR(label << ": " << msg);
        }
        for (int i = 0; i < node.output_size(); ++i) {
            const std::string& out = node.output(i);
            if (out.empty()) continue;
            const auto k = static_cast<std::size_t>(i);
            const bool is_sym = k < sym_outs.size() && sym_outs[k].has_value();
            KILN_USER_CHECK(is_sym || (k < outs.size() && outs[k].defined()),
                            label << ": output " << i << " ('" << out << "') is not supported");
            KILN_USER_CHECK(!values_.count(out) && !sym_values_.count(out) && !initializers_.count(out),
                            label << ": output '" << out << "' is defined twice (the graph is not in SSA form)");
            if (is_sym) sym_values_[out] = *sym_outs[k];
            else values_[out] = outs[k];
        }
    }

    // Converts the node: shape arithmetic on shape values is folded (ops_symbolic.cpp);
    // everything else goes to the op's converter.
    // Also says whether the outputs are computed at run time from sizes (a shape value was
    // materialised, or an input was).
    std::tuple<std::vector<Var>, std::vector<std::optional<SymValue>>, bool> run(
        const pb::NodeProto& node, const std::string& label, std::vector<Var> inputs,
        std::vector<std::optional<SymValue>> syms = {}, bool any_sym = false, std::vector<bool> from_sizes = {}) {
        const bool sized_input = std::find(from_sizes.begin(), from_sizes.end(), true) != from_sizes.end();
        NodeCtx ctx(node, label, opset_, std::move(inputs), std::move(syms));
        ctx.set_from_sizes(std::move(from_sizes));
        if (!(any_sym && fold_symbolic(ctx))) registry().at(node.op_type()).convert(ctx);
        return {ctx.outputs(), ctx.sym_outputs(), sized_input || ctx.materialised()};
    }

    // Runs the node on its constant inputs now, in a trace of its own on the interpreter,
    // and records its outputs as constants.
    std::vector<Var> folded(const pb::NodeProto& node, const std::string& label, const std::vector<Var>& inputs) {
        std::vector<std::optional<Tensor>> values;
        for (const Var& v : inputs) values.push_back(v.defined() ? constant_value(v) : std::nullopt);
        std::vector<bool> produced;
        Graph g = trace("fold", {}, [&](const std::vector<Var>&) {
            std::vector<Var> inner;
            for (const auto& v : values) inner.push_back(v ? Var(*v) : Var());
            std::vector<Var> outs = std::get<0>(run(node, label, inner));
            std::vector<Var> result;
            for (const Var& o : outs) {
                produced.push_back(o.defined());
                if (o.defined()) result.push_back(o);
            }
            if (result.empty()) result.push_back(Var(Tensor::zeros({})));
            return result;
        });
        Options opts;
        opts.jit = false;
        Engine engine(opts);
        std::vector<Tensor> results = engine.load(g)({});
        std::vector<Var> outs;
        std::size_t k = 0;
        for (bool p : produced) outs.push_back(p ? Var(results[k++]) : Var());
        return outs;
    }

    Var output(const pb::ValueInfoProto& o) {
        std::string where = "ONNX model: graph output '" + o.name() + "'";
        if (auto s = sym_values_.find(o.name()); s != sym_values_.end()) values_[o.name()] = materialize(s->second);
        Var v = lookup(o.name(), where);
        if (o.type().has_tensor_type() && o.type().tensor_type().elem_type() != 0) {
            auto dt = dtype_from_onnx(o.type().tensor_type().elem_type());
            KILN_USER_CHECK(dt.has_value(), where << ": element type " << onnx_type_name(o.type().tensor_type().elem_type())
                                                  << " is not supported");
            KILN_USER_CHECK(*dt == v.dtype(), where << " is declared " << dtype_name(*dt) << " but computes "
                                                    << dtype_name(v.dtype()));
            if (o.type().tensor_type().has_shape()) {
                const auto& shape = o.type().tensor_type().shape();
                std::vector<Dim> dims = v.dims();
                KILN_USER_CHECK(shape.dim_size() == static_cast<int>(dims.size()),
                                where << " is declared with rank " << shape.dim_size() << " but computes "
                                      << dims_to_string(dims));
                for (int i = 0; i < shape.dim_size(); ++i) {
                    const auto& d = shape.dim(i);
                    const Dim& got = dims[static_cast<std::size_t>(i)];
                    KILN_USER_CHECK(!d.has_dim_value() || !got.is_static() || got.value() == d.dim_value(),
                                    where << " is declared with dim " << i << " = " << d.dim_value() << " but computes "
                                          << dims_to_string(dims));
                }
            }
        }
        return v;
    }

    const pb::ModelProto& model_;
    const pb::GraphProto& graph_;
    const OnnxOptions& options_;
    std::int64_t opset_;
    std::map<std::string, const pb::TensorProto*> initializers_;
    std::map<std::string, Var> values_;
    std::map<std::string, SymValue> sym_values_;  // shape values (sym_value.h), by name
    std::set<std::string> from_sizes_;            // values computed at run time from sizes
};

}  // namespace

Graph import_model(const pb::ModelProto& model, const OnnxOptions& options) {
    return Importer(model, options).build();
}

OnnxModelInfo model_info(const pb::ModelProto& model) {
    OnnxModelInfo info;
    const pb::GraphProto& g = model.graph();
    info.ir_version = model.ir_version();
    info.opset = default_opset(model);
    info.producer = model.producer_name() + (model.producer_version().empty() ? "" : " " + model.producer_version());
    std::set<std::string> inits;
    for (const auto& t : g.initializer()) inits.insert(t.name());
    std::set<std::string> graph_inputs;
    for (const auto& in : g.input()) {
        if (inits.count(in.name())) continue;
        info.inputs.push_back(value_info(in, "graph input"));
        for (const Dim& d : info.inputs.back().dims)
            for (const std::string& s : d.symbol_names())
                if (std::find(info.symbols.begin(), info.symbols.end(), s) == info.symbols.end()) info.symbols.push_back(s);
        graph_inputs.insert(in.name());
    }
    for (const auto& out : g.output()) info.outputs.push_back(value_info(out, "graph output", false));
    // Load-time inputs: walk back from every input an op needs while loading, through the
    // nodes that compute it (folded when their inputs are known), to graph inputs.
    std::map<std::string, const pb::NodeProto*> producer;
    std::set<std::string> op_seen;
    for (const auto& n : g.node()) {
        for (const auto& o : n.output()) producer[o] = &n;
        if (op_seen.insert(n.op_type()).second) info.op_types.push_back(n.op_type());
    }
    std::vector<std::string> work;
    for (const auto& n : g.node()) {
        auto def = registry().find(n.op_type());
        if (def == registry().end()) continue;
        for (int i : def->second.load_time_inputs)
            if (i < n.input_size() && !n.input(i).empty()) work.push_back(n.input(i));
    }
    std::set<std::string> visited, needed;
    while (!work.empty()) {
        std::string v = work.back();
        work.pop_back();
        if (!visited.insert(v).second) continue;
        if (graph_inputs.count(v)) needed.insert(v);
        auto p = producer.find(v);
        if (p == producer.end() || p->second->op_type() == "Shape" || p->second->op_type() == "Size") continue;
        for (const auto& in : p->second->input())
            if (!in.empty()) work.push_back(in);
    }
    for (const auto& in : info.inputs)
        if (needed.count(in.name)) info.load_time_inputs.push_back(in.name);
    return info;
}

}  // namespace kiln::onnx_import
