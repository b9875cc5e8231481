#include "src/onnx/registry.h"

namespace kiln::onnx_import {

const Registry& registry() {
    static const Registry r = [] {
        Registry t;
        add_elementwise_ops(t);
        add_activation_ops(t);
        add_reduce_ops(t);
        add_nn_ops(t);
        add_norm_ops(t);
        add_shape_ops(t);
        add_tensor_ops(t);
        return t;
    }();
    return r;
}

std::int64_t norm_axis(const NodeCtx& c, std::int64_t axis, std::int64_t rank, std::string_view attr) {
    c.require(axis >= -rank && axis < rank, attr,
              "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    return axis < 0 ? axis + rank : axis;
}

Var scalar_like(const Var& x, double value) { return Var(Tensor::full({}, value, x.dtype())); }

Shape static_dims(const NodeCtx& c, const Var& x, const char* why) {
    Shape s;
    for (const Dim& d : x.dims()) {
        if (!d.is_static()) c.fail("", std::string(why) + " needs static dims, got " + dims_to_string(x.dims()));
        s.push_back(d.value());
    }
    return s;
}

}  // namespace kiln::onnx_import
