#pragma once
// Inputs of kiln-run: ONNX TensorProto files (.pb), NumPy arrays (.npy) and random tensors
// of a stated shape.
#include <kiln/kiln.h>

#include <cstdint>
#include <string>

namespace kiln_run {

// Reads a .npy file (format versions 1-3, C order; dtypes f4 f8 f2 i1 u1 i4 i8 b1).
// Throws kiln::Error for anything else.
kiln::Tensor read_npy(const std::string& path);

// Writes a tensor as a .npy file (format version 1, C order, the dtypes read_npy reads).
// Throws kiln::Error when the file cannot be written or the dtype has no .npy code here.
void write_npy(const std::string& path, const kiln::Tensor& t);

// "2x3x224", "2,3,224" or "[2,3,224]" -> {2, 3, 224}; "" or "scalar" -> {}. Throws kiln::Error.
kiln::Shape parse_shape(const std::string& text);

// A tensor from a spec: a path ending in .pb or .npy, else a shape of random values
// (normal for floating dtypes, uniform 0..9 for integers, 0/1 for bool).
kiln::Tensor tensor_from_spec(const std::string& spec, kiln::DType dtype, std::uint64_t seed);

}  // namespace kiln_run
