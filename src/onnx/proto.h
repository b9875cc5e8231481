#pragma once
// The ONNX protobuf messages (Debian's libonnx-dev: onnx-ml.pb.h, namespace onnx) and the
// small conversions every part of the importer shares: parsing a model from bytes,
// element types, and TensorProto -> kiln::Tensor. Only src/onnx/ and the ONNX tests include
// this header; the public API (include/kiln/onnx.h) has no protobuf types.
#include <kiln/dtype.h>
#include <kiln/tensor.h>

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::onnx_import {

namespace pb = ::onnx;

// Reads a whole file; throws kiln::Error naming `what` and the path when it cannot.
std::string read_file(const std::string& path, const char* what);

// Parses a ModelProto and checks what every later step relies on (a graph, an opset of
// the default domain). Throws kiln::Error for anything malformed.
pb::ModelProto parse_model(std::string_view bytes);

// The opset version of the default domain ("" or "ai.onnx").
// The newest opset of the default domain whose changes the importer knows (ONNX 1.16).
inline constexpr std::int64_t kNewestOpset = 21;
std::int64_t default_opset(const pb::ModelProto& model);

// ONNX element type (TensorProto::DataType) -> Kiln dtype; nullopt when Kiln has none.
std::optional<DType> dtype_from_onnx(std::int64_t elem_type);
std::string onnx_type_name(std::int64_t elem_type);  // "FLOAT", "UINT16", ...

// A TensorProto as a dense Tensor. `where` prefixes error messages ("initializer 'w'").
Tensor tensor_from_proto(const pb::TensorProto& t, const std::string& where);

}  // namespace kiln::onnx_import
