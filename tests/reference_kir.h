#pragma once
// Test helper shared by the KIR tests: runs one lowered group's kernel with the KIR
// evaluator, in two chunks of its outer range, on the values computed so far.
#include <kiln/tensor.h>

#include "jit/executor.h"
#include "src/kir/kir.h"
#include "src/passes/fuse.h"

#include <vector>

namespace ref {

// `vals` holds a tensor for every value the group reads (indexed by value id). Returns the
// group's outputs, in the order of group.outputs.
std::vector<kiln::Tensor> evaluate_group(const kiln::kir::Kernel& k, const kiln::passes::Group& group,
                                         const kiln::ir::Graph& g, const kiln::jit::ShapePlan& sp,
                                         const std::vector<kiln::Tensor>& vals);

}  // namespace ref
