#pragma once
// The ONNX importer: reads an ONNX model (a serialized ModelProto) into a kiln::Graph.
//
// Always declared. In a Kiln built without ONNX (KILN_WITH_ONNX=OFF, or libonnx-dev not
// found) every function here except onnx_available() throws kiln::Error saying so.
//
// Graph inputs (those without an initializer) become graph arguments: a dim with
// `dim_param` becomes the symbol of that name, a dim with neither value nor name a fresh
// symbol. Initializers and Constant nodes become constants. Operators map to Kiln ops,
// decomposed where ONNX's op is a composition (Gemm, Softmax on an inner axis, Conv with
// asymmetric pads, ...). A model Kiln cannot represent exactly (an unsupported op,
// attribute, attribute value or element type) throws kiln::Error naming the node, the op
// and the attribute: the importer never returns a graph that computes something else.
// A malformed file (truncated, not a ModelProto, inconsistent tensors) throws kiln::Error.
#include <kiln/dtype.h>
#include <kiln/graph.h>
#include <kiln/tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

struct OnnxOptions {
    // Values for graph inputs that an operator needs while the graph is built (a Reshape's
    // shape, Slice's starts, an Unsqueeze's axes, ... given as inputs rather than
    // initializers). Each named input becomes a constant of that value and is no longer an
    // argument of the graph. Names that are not graph inputs are an error.
    std::map<std::string, Tensor> input_values;
    // The graph's name; empty: the ONNX graph's name (or "onnx" when it has none).
    std::string name;
};

// What a model declares, without building a graph.
struct OnnxModelInfo {
    std::int64_t ir_version = 0;
    std::int64_t opset = 0;                    // of the default domain (ai.onnx)
    std::string producer;                      // producer_name and version
    std::vector<ValueInfo> inputs;             // graph arguments (initializers excluded)
    std::vector<ValueInfo> outputs;            // dims as declared (none when the model gives no shape)
    std::vector<std::string> load_time_inputs; // inputs that OnnxOptions::input_values must give
    std::vector<std::string> op_types;         // distinct op types, in order of first use
    // The symbolic dims of the inputs ("batch", "sequence"), in order of first use; the
    // loaded graph's outputs() give each output's shape in terms of them (e.g. a KV cache's
    // f32[?batch,4,?past+?sequence,16]).
    std::vector<std::string> symbols;
};

// True when this Kiln was built with the ONNX importer.
bool onnx_available();

Graph load_onnx(const std::string& path, const OnnxOptions& options = {});
Graph load_onnx_from_memory(std::string_view bytes, const OnnxOptions& options = {});
OnnxModelInfo inspect_onnx(const std::string& path);
OnnxModelInfo inspect_onnx_from_memory(std::string_view bytes);

// A serialized ONNX TensorProto (the `.pb` files of ONNX's test data) as a dense Tensor.
Tensor load_onnx_tensor(const std::string& path);
Tensor onnx_tensor_from_memory(std::string_view bytes);

}  // namespace kiln
