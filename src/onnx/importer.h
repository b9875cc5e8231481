#pragma once
// The graph walk: ONNX inputs, initializers and nodes (in their topological order) into a
// kiln::trace. Each node goes through its converter (registry.h); a node whose inputs are
// all known while loading is evaluated at once (constant folding, on the interpreter), so
// shape computations (Shape -> Gather -> Concat -> Reshape) give the constants later ops need.
#include <kiln/onnx.h>

#include "src/onnx/proto.h"

namespace kiln::onnx_import {

Graph import_model(const pb::ModelProto& model, const OnnxOptions& options);
OnnxModelInfo model_info(const pb::ModelProto& model);

}  // namespace kiln::onnx_import
