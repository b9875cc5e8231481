#pragma once
// Shape values: what an exported model computes from the sizes of its tensors (Shape,
// Size, and the Gather/Slice/Concat/arithmetic on their results) while those sizes are
// symbolic. The importer keeps such a value as a vector of kiln::Dims and folds it at load
// time (ops_symbolic.cpp), so that Reshape, Expand, Slice, ConstantOfShape and Range get
// symbolic sizes instead of run-time data. A shape value that an op needs as data is
// materialised as a small integer tensor computed from the dims at run time.
#include <kiln/dim.h>
#include <kiln/dtype.h>
#include <kiln/tensor.h>
#include <kiln/trace.h>

#include <optional>
#include <vector>

namespace kiln::onnx_import {

struct SymValue {
    std::vector<Dim> elems;   // row-major
    bool scalar = false;      // rank 0 (one element) or rank 1
    DType dtype = DType::i64; // what the model's tensor would hold (integer or floating)

    bool is_static() const;
    std::string to_string() const;  // "[?batch,4,16]" or "?seq"
};

// The elements of a constant of rank <= 1 with integral values, as a static SymValue.
std::optional<SymValue> sym_from_constant(const Tensor& t);
// A constant tensor of a static SymValue.
Tensor sym_to_tensor(const SymValue& v);
// The value as a traced tensor: a constant when static, else computed from the dims at run time.
Var materialize(const SymValue& v);

}  // namespace kiln::onnx_import
