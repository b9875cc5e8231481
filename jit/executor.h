#pragma once
// What a call needs before it runs: the plan of a graph (the nodes its outputs need, each
// input's argument position) and, per input-shape signature, a ShapePlan (every node's
// concrete shape, reshape targets made concrete), so shape work happens once per signature,
// not on every call. jit/run_plan.h runs calls; jit/memory_plan.h places intermediates.
#include "jit/memory_plan.h"
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
    std::shared_ptr<ArenaPool> arenas = std::make_shared<ArenaPool>();  // the calls' arena blocks
};

Plan make_plan(std::shared_ptr<const ir::Graph> graph);

// Everything a call needs that depends only on the input shapes.
struct ShapePlan {
    std::vector<Shape> input_shapes;
    std::vector<Shape> shapes;                     // per node id (empty for nodes not in the plan)
    std::vector<std::unique_ptr<ir::Node>> nodes;  // per node id: a copy with concrete attrs, where needed
    ir::Bindings bindings;                         // every symbol's value
    std::vector<Shape> output_shapes;
    // Where compiled groups put the intermediates at these shapes; made by the first call
    // that needs it (it depends on the function's partition: jit/run_plan.cpp).
    LazyMemoryPlan memory;
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
    // The same, keyed by the inputs' shapes (no copy of them: the hot path allocates nothing).
    std::shared_ptr<const ShapePlan> find(std::span<const Tensor> inputs) const;
    void insert(const std::shared_ptr<const ShapePlan>& sp);

private:
    // Orders shape lists, and shape lists against the shapes of a list of tensors.
    struct ShapesLess {
        using is_transparent = void;
        bool operator()(const std::vector<Shape>& a, const std::vector<Shape>& b) const { return a < b; }
        bool operator()(const std::vector<Shape>& a, std::span<const Tensor> b) const;
        bool operator()(std::span<const Tensor> a, const std::vector<Shape>& b) const;
    };
    mutable std::shared_mutex mu_;
    std::map<std::vector<Shape>, std::shared_ptr<const ShapePlan>, ShapesLess> map_;
};

}  // namespace kiln::jit
