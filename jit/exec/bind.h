#pragma once
// Checks a call's inputs against the graph's arguments and binds the symbolic dims.
// Throws kiln::Error naming the argument, the expected and the actual value.
#include "src/ir/bindings.h"
#include "src/ir/ir.h"

#include <kiln/tensor.h>

#include <span>

namespace kiln::jit {

// Checks the count and dtype of each input, and that all are on one device (not the
// shapes; whether that device may be used is the engine's check).
// `what` names the call for messages ("call of 'mlp'").
void check_inputs(const ir::Graph& g, std::span<const Tensor> inputs, const std::string& what);
// Checks ranks, dims (>= 0, an element count that fits in int64) and static dims, and binds
// the symbolic dims.
void bind_shapes(const ir::Graph& g, const std::vector<Shape>& shapes, ir::Bindings& b, const std::string& what);

}  // namespace kiln::jit
