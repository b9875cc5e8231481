#pragma once
// Test helper shared by the KIR tests: runs one lowered group's kernel with the KIR
// evaluator, in two chunks of its outer range, on the values computed so far.
#include <kiln/graph.h>
#include <kiln/tensor.h>

#include "jit/exec/shape_plan.h"
#include "src/kir/kir.h"
#include "src/passes/fuse.h"

#include <vector>

namespace ref {

// `vals` holds a tensor for every value the group reads (indexed by value id). Returns the
// group's outputs, in the order of group.outputs.
std::vector<kiln::Tensor> evaluate_group(const kiln::kir::Kernel& k, const kiln::passes::Group& group,
                                         const kiln::ir::Graph& g, const kiln::jit::ShapePlan& sp,
                                         const std::vector<kiln::Tensor>& vals);


// Groups a graph has and how many of them lowered to kernel IR.
struct GroupRunStats {
    int groups = 0, lowered = 0;
};

// Runs `kg` on `inputs` group by group: lowered groups through kir::evaluate (two chunks of
// the outer range), the others through the interpreter. Checks that every elementwise and
// row_reduction group lowers and verifies, each lowered group's outputs against the
// interpreter on the same inputs, and the graph's outputs against kiln::Engine with the
// JIT off.
GroupRunStats check_lowered_graph(const kiln::Graph& kg, const std::vector<kiln::Tensor>& inputs, double tol_scale = 4.0);

}  // namespace ref
