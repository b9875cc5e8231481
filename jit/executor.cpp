#include "jit/executor.h"

#include "src/ir/shape_infer.h"
#include "src/support/check.h"
#include "tiers/interp/interp.h"

#include <chrono>
#include <climits>

namespace kiln::jit {
namespace {

// The concrete output type of a node for concrete input shapes; binds fresh symbols.
Shape concrete_shape(const ir::Node& node, std::size_t id, const std::vector<ir::TensorType>& in_types, ir::Bindings& b,
                     const ir::Node** effective, ir::Node& scratch) {
    *effective = &node;
    if (node.op == ir::Op::reshape || node.op == ir::Op::broadcast_to) {
        std::int64_t numel = 1;
        for (const Dim& d : in_types[0].dims) numel *= d.value();
        Shape target = ir::concrete_target(node, b, numel);
        scratch = node;
        scratch.attrs.set("shape", std::vector<Dim>(target.begin(), target.end()));
        *effective = &scratch;
    }
    std::vector<const ir::TensorType*> ptrs;
    ptrs.reserve(in_types.size());
    for (const auto& t : in_types) ptrs.push_back(&t);
    ir::TensorType out = ir::infer_type(node.op, ptrs, (*effective)->attrs, nullptr);
    Shape shape = out.static_shape();
    std::string why;
    KILN_USER_CHECK(b.unify(node.type.dims, shape, &why),
                    "%" << id << " = " << ir::op_name(node.op) << ": at run time the result has shape " << shape_to_string(shape)
                        << ", which does not match its traced type " << node.type.to_string() << ": " << why);
    return shape;
}

}  // namespace

Plan make_plan(std::shared_ptr<const ir::Graph> graph) {
    Plan p;
    const auto& nodes = graph->nodes;
    std::vector<bool> needed(nodes.size(), false);
    for (auto o : graph->outputs) needed[static_cast<std::size_t>(o)] = true;
    for (auto i : graph->inputs) needed[static_cast<std::size_t>(i)] = true;
    for (std::size_t i = nodes.size(); i-- > 0;)
        if (needed[i])
            for (auto in : nodes[i].inputs) needed[static_cast<std::size_t>(in)] = true;
    p.last_use.assign(nodes.size(), -1);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        if (!needed[i]) continue;
        auto pos = static_cast<std::int32_t>(p.order.size());
        p.order.push_back(i);
        for (auto in : nodes[i].inputs) p.last_use[static_cast<std::size_t>(in)] = pos;
    }
    for (auto o : graph->outputs) p.last_use[static_cast<std::size_t>(o)] = INT32_MAX;
    p.arg_index.assign(nodes.size(), -1);
    for (std::size_t i = 0; i < graph->inputs.size(); ++i)
        p.arg_index[static_cast<std::size_t>(graph->inputs[i])] = static_cast<std::int32_t>(i);
    p.graph = std::move(graph);
    return p;
}

std::vector<Tensor> execute(const Plan& plan, std::span<const Tensor> inputs, ir::Bindings& b,
                            profiling::FunctionProfile* profile) {
    const ir::Graph& g = *plan.graph;
    std::vector<Tensor> values(g.nodes.size());
    std::vector<Tensor> args;
    std::vector<ir::TensorType> in_types;
    ir::Node scratch;
    for (std::size_t pos = 0; pos < plan.order.size(); ++pos) {
        std::size_t id = plan.order[pos];
        const ir::Node& node = g.nodes[id];
        if (node.op == ir::Op::input) {
            values[id] = inputs[static_cast<std::size_t>(plan.arg_index[id])];
        } else if (node.op == ir::Op::constant) {
            values[id] = node.value;
        } else {
            args.clear();
            in_types.clear();
            for (auto in : node.inputs) {
                const Tensor& t = values[static_cast<std::size_t>(in)];
                args.push_back(t);
                in_types.push_back(ir::static_type(t.dtype(), t.shape()));
            }
            const ir::Node* eff = nullptr;
            Shape shape = concrete_shape(node, id, in_types, b, &eff, scratch);
            auto t0 = std::chrono::steady_clock::now();
            values[id] = interp::run_node(*eff, args, shape);
            auto t1 = std::chrono::steady_clock::now();
            if (profile)
                profile->record_node(id, static_cast<std::uint64_t>(
                                             std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
        }
        // Free operands read for the last time here.
        for (auto in : node.inputs)
            if (plan.last_use[static_cast<std::size_t>(in)] == static_cast<std::int32_t>(pos)) values[static_cast<std::size_t>(in)] = Tensor();
        args.clear();
    }
    std::vector<Tensor> outs;
    outs.reserve(g.outputs.size());
    for (auto o : g.outputs) outs.push_back(values[static_cast<std::size_t>(o)]);
    return outs;
}

std::vector<Shape> infer_output_shapes(const Plan& plan, const std::vector<Shape>& input_shapes, ir::Bindings& b) {
    const ir::Graph& g = *plan.graph;
    std::vector<ir::TensorType> types(g.nodes.size());
    ir::Node scratch;
    std::vector<ir::TensorType> in_types;
    for (std::size_t id : plan.order) {
        const ir::Node& node = g.nodes[id];
        if (node.op == ir::Op::input) {
            types[id] = ir::static_type(node.type.dtype, input_shapes[static_cast<std::size_t>(plan.arg_index[id])]);
        } else if (node.op == ir::Op::constant) {
            types[id] = node.type;
        } else {
            in_types.clear();
            for (auto in : node.inputs) in_types.push_back(types[static_cast<std::size_t>(in)]);
            const ir::Node* eff = nullptr;
            types[id] = ir::static_type(node.type.dtype, concrete_shape(node, id, in_types, b, &eff, scratch));
        }
    }
    std::vector<Shape> out;
    for (auto o : g.outputs) out.push_back(types[static_cast<std::size_t>(o)].static_shape());
    return out;
}

}  // namespace kiln::jit
