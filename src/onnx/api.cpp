// include/kiln/onnx.h, in a Kiln built with ONNX.
#include <kiln/onnx.h>

#include "src/onnx/importer.h"
#include "src/onnx/proto.h"
#include "src/support/check.h"

namespace kiln {

bool onnx_available() { return true; }

Graph load_onnx(const std::string& path, const OnnxOptions& options) {
    return load_onnx_from_memory(onnx_import::read_file(path, "load_onnx"), options);
}

Graph load_onnx_from_memory(std::string_view bytes, const OnnxOptions& options) {
    return onnx_import::import_model(onnx_import::parse_model(bytes), options);
}

OnnxModelInfo inspect_onnx(const std::string& path) {
    return inspect_onnx_from_memory(onnx_import::read_file(path, "inspect_onnx"));
}

OnnxModelInfo inspect_onnx_from_memory(std::string_view bytes) {
    return onnx_import::model_info(onnx_import::parse_model(bytes));
}

Tensor load_onnx_tensor(const std::string& path) {
    return onnx_tensor_from_memory(onnx_import::read_file(path, "load_onnx_tensor"));
}

Tensor onnx_tensor_from_memory(std::string_view bytes) {
    KILN_USER_CHECK(bytes.size() < (std::size_t{1} << 31), "ONNX tensor: the data is too large for protobuf (2 GiB)");
    onnx_import::pb::TensorProto t;
    KILN_USER_CHECK(t.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())),
                    "ONNX tensor: the data (" << bytes.size() << " bytes) is not a valid TensorProto");
    return onnx_import::tensor_from_proto(t, "ONNX tensor '" + t.name() + "'");
}

}  // namespace kiln
