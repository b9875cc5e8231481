// include/kiln/onnx.h, in a Kiln built without ONNX (KILN_WITH_ONNX=OFF or libonnx-dev missing):
// every entry point says so.
#include <kiln/onnx.h>

#include "src/support/check.h"

namespace kiln {
namespace {
[[noreturn]] void unavailable(const char* what) {
    KILN_USER_ERROR(what << ": this Kiln was built without ONNX support (configure with -DKILN_WITH_ONNX=ON and "
                            "install libonnx-dev)");
}
}  // namespace

bool onnx_available() { return false; }
Graph load_onnx(const std::string&, const OnnxOptions&) { unavailable("load_onnx"); }
Graph load_onnx_from_memory(std::string_view, const OnnxOptions&) { unavailable("load_onnx_from_memory"); }
OnnxModelInfo inspect_onnx(const std::string&) { unavailable("inspect_onnx"); }
OnnxModelInfo inspect_onnx_from_memory(std::string_view) { unavailable("inspect_onnx_from_memory"); }
Tensor load_onnx_tensor(const std::string&) { unavailable("load_onnx_tensor"); }
Tensor onnx_tensor_from_memory(std::string_view) { unavailable("onnx_tensor_from_memory"); }

}  // namespace kiln
