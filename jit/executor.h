#pragma once
// Runs a graph on tier 0, node by node: computes each node's concrete output shape with
// the same shape rules the tracer used, runs the interpreter kernel, and frees every
// intermediate after its last use.
#include "profiling/profile.h"
#include "src/ir/bindings.h"
#include "src/ir/ir.h"

#include <kiln/tensor.h>

#include <memory>
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

// Runs one call whose inputs were already checked and bound (jit/bind.h).
// Throws kiln::Error for data-dependent errors (e.g. a gather index out of range) or
// symbolic dims that disagree at run time.
std::vector<Tensor> execute(const Plan& plan, std::span<const Tensor> inputs, ir::Bindings& b,
                            profiling::FunctionProfile* profile);

// Output shapes only (no kernels run).
std::vector<Shape> infer_output_shapes(const Plan& plan, const std::vector<Shape>& input_shapes, ir::Bindings& b);

}  // namespace kiln::jit
