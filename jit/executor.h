#pragma once
// Runs a graph on tier 0, node by node. Shape work happens once per input-shape signature
// (a ShapePlan: every node's concrete shape, with reshape targets made concrete), not on
// every call; a call then runs the interpreter kernels and frees every intermediate
// after its last use.
#include "profiling/profile.h"
#include "src/ir/bindings.h"
#include "src/ir/ir.h"

#include <kiln/tensor.h>

#include <map>
#include <memory>
#include <shared_mutex>
#include <span>
#include <vector>

namespace kiln::jit {

struct Plan {
    std::shared_ptr<const ir::Graph> graph;
    std::vector<std::size_t> order;       // nodes that outputs depend on, in graph order
    std::vector<std::int32_t> last_use;   // per value: position in `order` of its last reader; -1: never; INT32_MAX: an output
    std::vector<std::int32_t> arg_index;  // per node: its argument position for Op::input, else -1
};

Plan make_plan(std::shared_ptr<const ir::Graph> graph);

// Everything a call needs that depends only on the input shapes.
struct ShapePlan {
    std::vector<Shape> input_shapes;
    std::vector<Shape> shapes;                     // per node id (empty for nodes not in the plan)
    std::vector<std::unique_ptr<ir::Node>> nodes;  // per node id: a copy with concrete attrs, where needed
    ir::Bindings bindings;                         // every symbol's value
    std::vector<Shape> output_shapes;
};

// Checks the shapes against the graph (kiln::Error naming the argument, expected and
// actual) and infers every node's shape (kiln::Error when symbolic dims disagree).
std::shared_ptr<const ShapePlan> make_shape_plan(const Plan& plan, const std::vector<Shape>& input_shapes,
                                                 const std::string& what);

// A bounded map from input shapes to shape plans, safe for concurrent use. When full,
// further signatures are planned per call and not kept (memory stays bounded).
class ShapePlanCache {
public:
    static constexpr std::size_t kCapacity = 64;
    std::shared_ptr<const ShapePlan> find(const std::vector<Shape>& shapes) const;
    void insert(const std::shared_ptr<const ShapePlan>& sp);

private:
    mutable std::shared_mutex mu_;
    std::map<std::vector<Shape>, std::shared_ptr<const ShapePlan>> map_;
};

// Runs one call whose inputs were checked (dtype, device) and whose shapes were planned.
// Throws kiln::Error for data-dependent errors (e.g. a gather index out of range).
std::vector<Tensor> execute(const Plan& plan, const ShapePlan& shapes, std::span<const Tensor> inputs,
                            profiling::FunctionProfile* profile);

}  // namespace kiln::jit
