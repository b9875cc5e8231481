#pragma once
// The IR's invariants, checked in one place. Run by parse() on every parsed graph; passes
// and tests may run it after every step.
//
// Requires: nothing (any Graph value may be given).
// Ensures:  returns when all of these hold, else throws VerifyError (a kiln::Error) whose
//           message names the node (`%5 = add`) and the broken rule:
//   - every operand refers to an earlier node; operand counts are within the op's
//     op_min_inputs / op_max_inputs;
//   - each node has exactly the attributes its op lists in ops.def, with those value
//     kinds (ints lists of conv2d / pool windows hold 2 values, narrow's and arange's start
//     and length one dim each);
//   - the symbols of narrow's and arange's start and length are dim symbols of earlier nodes
//     (so that a call knows their values);
//   - `inputs` lists the `input` nodes in order; each has a string `name`, names unique;
//   - a constant holds a defined, contiguous value whose dtype and shape equal its static
//     type;
//   - every static dim of a type is >= 0 and every symbolic dim has a coefficient >= 1;
//   - every other node's type equals infer_type(op, operand types, attrs), except that
//     where inference mints a fresh symbol (`?_N`) the recorded dim may be any symbol whose
//     name starts with '_';
//   - every output id names a node.
// Tests: tests/test_ir_text.cpp.
#include "src/ir/ir.h"

#include <string>

namespace kiln::ir {

class VerifyError : public kiln::Error {
public:
    VerifyError(const std::string& message, ValueId node) : kiln::Error(message), node_(node) {}
    // The offending node, or -1 when the problem is the graph's input or output list.
    ValueId node() const { return node_; }

private:
    ValueId node_;
};

void verify(const Graph& g);

}  // namespace kiln::ir
