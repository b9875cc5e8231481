#pragma once
// Tier 0: the interpreter's reference kernels, one per op of ops.def. The interpreter is
// Kiln's specification: every other tier is tested against it.
//
// Requires: `inputs` hold one tensor per operand of `node` (any strides, CPU, the operand
// dtypes that shape inference accepted); `out_shape` is the concrete output shape that
// ir::infer_type gave for these inputs; dims attributes that the graph leaves symbolic
// (narrow's and arange's start and length) are concrete: the executor passes its per-call
// copy of such a node (jit/exec/shape_plan.h, tiers::ValueEnv::node).
// Ensures: a tensor of node.type.dtype and out_shape. Shape ops (reshape of a contiguous
// input, permute, squeeze, unsqueeze, broadcast_to, slice, narrow) may return views sharing
// the input's storage; every other op returns a new dense tensor. Data-dependent errors (a
// gather index out of range) throw kiln::Error naming the op, the value and the range.
#include "src/ir/ir.h"

#include <kiln/tensor.h>

#include <vector>

namespace kiln::interp {

Tensor run_node(const ir::Node& node, const std::vector<Tensor>& inputs, const Shape& out_shape);

}  // namespace kiln::interp
