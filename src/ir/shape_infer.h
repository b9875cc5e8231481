#pragma once
// Shape and dtype inference for every op. The tracer runs it on symbolic types; the runtime
// runs the same rules on concrete (all-static) types, so a rule is written once. It also makes
// symbolic dims in attributes concrete first (reshape's and broadcast_to's shape, narrow's and
// arange's start and length: jit/exec/shape_plan.cpp), so a rule on static attributes, such as
// narrow's bounds, is also the run-time check of every call.
// Requires: attributes in normal form (non-negative axes, see ops.def).
// Ensures: the output type, or kiln::Error naming the op, the operand types and the rule.
#include "src/ir/ir.h"

#include <vector>

namespace kiln::ir {

// Makes fresh symbols ("?_1", "?_2", ...) for dims no product of input symbols can express
// (the length of a strided slice of ?S, say). Their values are bound at run time.
class SymbolGen {
public:
    Dim fresh() { return Dim::symbol("_" + std::to_string(next_++)); }
    int next() const { return next_; }
    void set_next(int n) { next_ = n; }

private:
    int next_ = 1;
};

// `fresh` may be null when every input type is static.
TensorType infer_type(Op op, const std::vector<const TensorType*>& inputs, const Attrs& attrs, SymbolGen* fresh);

// The product of dims (a Dim again: a monomial).
Dim dims_product(const std::vector<Dim>& dims);

}  // namespace kiln::ir
