// Tier 0: routes a node to the kernel of its op family (kernels.h).
#include "tiers/interp/interp.h"

#include "src/support/check.h"
#include "tiers/interp/kernels.h"

namespace kiln::interp {

Tensor run_node(const ir::Node& node, const std::vector<Tensor>& inputs, const Shape& out_shape) {
    const int n = static_cast<int>(inputs.size());
    KILN_CHECK(n >= ir::op_min_inputs(node.op) && (ir::op_max_inputs(node.op) < 0 || n <= ir::op_max_inputs(node.op)),
               "interp: " << ir::op_name(node.op) << " got " << n << " inputs");
    for (const Tensor& t : inputs) KILN_CHECK(t.defined(), "interp: " << ir::op_name(node.op) << " got an undefined input");

    Tensor out;
    switch (ir::op_kind(node.op)) {
    case ir::OpKind::Source:
        KILN_UNREACHABLE("interp: " << ir::op_name(node.op) << " is a source op; the executor provides its value");
    case ir::OpKind::Unary: out = unary(node, inputs[0], out_shape); break;
    case ir::OpKind::Binary:
    case ir::OpKind::Compare: out = binary(node, inputs[0], inputs[1], out_shape); break;
    case ir::OpKind::Select: out = where(inputs[0], inputs[1], inputs[2], out_shape); break;
    case ir::OpKind::Reduce: out = reduce(node, inputs[0], out_shape); break;
    case ir::OpKind::Other:
        switch (node.op) {
        case ir::Op::softmax:
        case ir::Op::log_softmax: out = softmax(node, inputs[0], out_shape); break;
        case ir::Op::layer_norm: out = layer_norm(node, inputs, out_shape); break;
        case ir::Op::rms_norm: out = rms_norm(node, inputs, out_shape); break;
        case ir::Op::batch_norm: out = batch_norm(node, inputs, out_shape); break;
        case ir::Op::matmul: out = matmul(inputs[0], inputs[1], out_shape); break;
        case ir::Op::conv2d: out = conv2d(node, inputs, out_shape); break;
        case ir::Op::conv2d_nchwc: out = conv2d_nchwc(node, inputs, out_shape); break;
        case ir::Op::max_pool2d:
        case ir::Op::avg_pool2d: out = pool2d(node, inputs[0], out_shape); break;
        case ir::Op::global_avg_pool2d: out = global_avg_pool2d(inputs[0], out_shape); break;
        case ir::Op::arange: out = arange(node, out_shape); break;  // no operands: shape_op reads the first
        default: out = shape_op(node, inputs, out_shape); break;
        }
        break;
    }
    KILN_CHECK(out.shape() == out_shape, "interp: " << ir::op_name(node.op) << " produced " << shape_to_string(out.shape())
                                                    << ", expected " << shape_to_string(out_shape));
    KILN_CHECK(out.dtype() == node.type.dtype, "interp: " << ir::op_name(node.op) << " produced " << out.dtype()
                                                          << ", the node says " << node.type.dtype);
    return out;
}

}  // namespace kiln::interp
