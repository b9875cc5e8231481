// The lane sequences of KIR's f32 ops (lanes_p.h): the same instructions for scalar code
// (lane 0 of xmm) and for vector loops (ymm, zmm), built on Lanes and vmath.h.
#include "tiers/asmjit/lanes_p.h"

namespace kiln::tiers::asmjit_tier {

using kir::BinaryOp;
using kir::UnaryOp;

F kir_minmax(Lanes& o, BinaryOp op, F x, F y) {
    F r = op == BinaryOp::max ? o.max_x86(y, x) : o.min_x86(y, x);  // y op x, else x (also when either is NaN)
    r = o.select(visnan(o, y), y, r);
    return o.select(visnan(o, x), x, r);
}

F reduce_step(Lanes& o, const LoopPlan::Reduction& r, F acc, F x) {
    if (r.op == BinaryOp::add) return o.add(acc, x);
    if (!r.skips_nan) return kir_minmax(o, r.op, acc, x);
    return r.op == BinaryOp::max ? o.max_x86(x, acc) : o.min_x86(x, acc);
}

F f32_unary(Lanes& o, UnaryOp op, F x) {
    switch (op) {
    case UnaryOp::neg: return vneg(o, x);
    case UnaryOp::abs: return vabs(o, x);
    case UnaryOp::exp: return vexp(o, x);
    case UnaryOp::log: return vlog(o, x);
    case UnaryOp::sqrt: return o.sqrt(x);
    case UnaryOp::rsqrt: return o.div(o.constant(1.0f), o.sqrt(x));
    case UnaryOp::reciprocal: return o.div(o.constant(1.0f), x);
    case UnaryOp::tanh: return vtanh(o, x);
    case UnaryOp::sigmoid: return vsigmoid(o, x);
    case UnaryOp::relu: {
        F zero = o.constant(0.0f);
        return o.select(o.cmp(x, zero, Cmp::nle_uq), x, zero);  // NaN stays NaN, relu(-0) = +0
    }
    case UnaryOp::gelu_erf: return vgelu_erf(o, x);
    case UnaryOp::gelu_tanh: return vgelu_tanh(o, x);
    case UnaryOp::silu: return vsilu(o, x);
    case UnaryOp::erf: return verf(o, x);
    case UnaryOp::floor: return o.round(x, 1);
    case UnaryOp::ceil: return o.round(x, 2);
    case UnaryOp::round: return o.round(x, 0);
    case UnaryOp::sign: {
        F zero = o.constant(0.0f);
        F r = o.select(visnan(o, x), x, zero);
        r = o.select(o.cmp(x, zero, Cmp::lt_os), o.constant(-1.0f), r);
        return o.select(o.cmp(x, zero, Cmp::gt_os), o.constant(1.0f), r);
    }
    default: break;
    }
    backend("f32 " + std::string(kir::op_name(op)) + " has no lane sequence");
}

F f32_binary(Lanes& o, BinaryOp op, F a, F b) {
    switch (op) {
    case BinaryOp::add: return o.add(a, b);
    case BinaryOp::sub: return o.sub(a, b);
    case BinaryOp::mul: return o.mul(a, b);
    case BinaryOp::div: return o.div(a, b);
    case BinaryOp::max:
    case BinaryOp::min: return kir_minmax(o, op, a, b);
    default: break;
    }
    backend("f32 " + std::string(kir::op_name(op)) + " has no lane sequence");
}

Cmp f32_pred(BinaryOp op) {
    switch (op) {
    case BinaryOp::eq: return Cmp::eq_oq;
    case BinaryOp::ne: return Cmp::ne_uq;
    case BinaryOp::lt: return Cmp::lt_os;
    case BinaryOp::le: return Cmp::le_os;
    case BinaryOp::gt: return Cmp::gt_os;
    default: return Cmp::ge_os;
    }
}

}  // namespace kiln::tiers::asmjit_tier
