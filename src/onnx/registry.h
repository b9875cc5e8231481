#pragma once
// The table of ONNX operators Kiln imports: for each op type, its converter, the attributes
// it understands (any other attribute on a node is an error: never silently ignored) and
// the inputs whose values it needs while the graph is built. One file per family of ops
// fills in its part (ops_*.cpp).
#include "src/onnx/node_ctx.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kiln::onnx_import {

using Convert = void (*)(NodeCtx&);

struct OpDef {
    Convert convert = nullptr;
    std::vector<std::string> attrs;
    std::vector<int> load_time_inputs;
};

using Registry = std::map<std::string, OpDef, std::less<>>;

// Every supported op of the default domain.
const Registry& registry();

void add_elementwise_ops(Registry& r);  // ops_elementwise.cpp
void add_activation_ops(Registry& r);   // ops_activation.cpp
void add_reduce_ops(Registry& r);       // ops_reduce.cpp
void add_nn_ops(Registry& r);           // ops_nn.cpp: matmul, gemm, conv, pooling
void add_norm_ops(Registry& r);         // ops_norm.cpp
void add_shape_ops(Registry& r);        // ops_shape.cpp
void add_tensor_ops(Registry& r);       // ops_tensor.cpp: constants, cast, gather, ...

// Folds a node with shape-value inputs (sym_value.h) at load time when its op is shape
// arithmetic Kiln can carry exactly on dims; false leaves the node to its converter
// (ops_symbolic.cpp).
bool fold_symbolic(NodeCtx& c);

// ---- helpers the converters share (ops_util.cpp) ----

// Normalises an axis against `rank`, failing with the node's label when out of range.
std::int64_t norm_axis(const NodeCtx& c, std::int64_t axis, std::int64_t rank, std::string_view attr);
// A scalar constant of x's dtype.
Var scalar_like(const Var& x, double value);
// Static dims of a Var, failing with the node's label (and `why`) when one is symbolic.
Shape static_dims(const NodeCtx& c, const Var& x, const char* why);

}  // namespace kiln::onnx_import
