#include "jit/executor.h"

#include "jit/bind.h"
#include "src/ir/shape_infer.h"
#include "src/support/check.h"

#include <climits>

namespace kiln::jit {

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

std::shared_ptr<const ShapePlan> make_shape_plan(const Plan& plan, const std::vector<Shape>& input_shapes,
                                                 const std::string& what) {
    const ir::Graph& g = *plan.graph;
    auto sp = std::make_shared<ShapePlan>();
    sp->input_shapes = input_shapes;
    bind_shapes(g, input_shapes, sp->bindings, what);
    sp->shapes.resize(g.nodes.size());
    sp->nodes.resize(g.nodes.size());
    std::vector<ir::TensorType> types(g.nodes.size());
    std::vector<const ir::TensorType*> in_types;
    for (std::size_t id : plan.order) {
        const ir::Node& node = g.nodes[id];
        if (node.op == ir::Op::input) {
            sp->shapes[id] = input_shapes[static_cast<std::size_t>(plan.arg_index[id])];
        } else if (node.op == ir::Op::constant) {
            sp->shapes[id] = node.value.shape();
        } else {
            in_types.clear();
            for (auto in : node.inputs) in_types.push_back(&types[static_cast<std::size_t>(in)]);
            const ir::Node* eff = &node;
            if (node.op == ir::Op::reshape || node.op == ir::Op::broadcast_to) {
                std::int64_t numel = 1;
                for (auto d : sp->shapes[static_cast<std::size_t>(node.inputs[0])]) numel *= d;
                Shape target = ir::concrete_target(node, sp->bindings, numel);
                sp->nodes[id] = std::make_unique<ir::Node>(node);
                sp->nodes[id]->attrs.set("shape", std::vector<Dim>(target.begin(), target.end()));
                eff = sp->nodes[id].get();
            }
            Shape shape = ir::infer_type(node.op, in_types, eff->attrs, nullptr).static_shape();
            std::string why;
            KILN_USER_CHECK(sp->bindings.unify(node.type.dims, shape, &why),
                            what << ": %" << id << " = " << ir::op_name(node.op) << " gives shape " << shape_to_string(shape)
                                 << " at run time, which does not fit its traced type " << node.type.to_string() << ": "
                                 << why);
            sp->shapes[id] = std::move(shape);
        }
        types[id] = ir::static_type(node.type.dtype, sp->shapes[id]);
    }
    for (auto o : g.outputs) sp->output_shapes.push_back(sp->shapes[static_cast<std::size_t>(o)]);
    return sp;
}

std::shared_ptr<const ShapePlan> ShapePlanCache::find(const std::vector<Shape>& shapes) const {
    std::shared_lock lock(mu_);
    auto it = map_.find(shapes);
    return it == map_.end() ? nullptr : it->second;
}

std::shared_ptr<const ShapePlan> ShapePlanCache::find(std::span<const Tensor> inputs) const {
    std::shared_lock lock(mu_);
    auto it = map_.find(inputs);
    return it == map_.end() ? nullptr : it->second;
}

namespace {
// <0, 0, >0 as the shape list `a` orders before, equal to or after the inputs' shapes `b`.
int compare_shapes(const std::vector<Shape>& a, std::span<const Tensor> b) {
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
        if (a[i] < b[i].shape()) return -1;
        if (b[i].shape() < a[i]) return 1;
    }
    return a.size() < b.size() ? -1 : a.size() > b.size() ? 1 : 0;
}
}  // namespace

bool ShapePlanCache::ShapesLess::operator()(const std::vector<Shape>& a, std::span<const Tensor> b) const {
    return compare_shapes(a, b) < 0;
}

bool ShapePlanCache::ShapesLess::operator()(std::span<const Tensor> a, const std::vector<Shape>& b) const {
    return compare_shapes(b, a) > 0;
}

void ShapePlanCache::insert(const std::shared_ptr<const ShapePlan>& sp) {
    std::unique_lock lock(mu_);
    if (map_.size() < kCapacity) map_.emplace(sp->input_shapes, sp);
}

}  // namespace kiln::jit
