// The generator's f64 and scalar f32 values (gen_p.h), in xmm lane 0: f64 arithmetic
// inline and its libm ops through callouts.h (the interpreter's formulas), f32 through the
// lane sequences of lanes_p.h (sin, cos and pow through callouts.h), f16/bf16 loads, selects
// and casts between the float types and from integers.
#include "tiers/asmjit/callouts.h"
#include "tiers/asmjit/gen_p.h"

#include <cstdint>
#include <string>

namespace kiln::tiers::asmjit_tier {

x86::Xmm Gen::f64(const ExprRef& e) {
    if (auto it = memo_.x.find(e.get()); it != memo_.x.end()) return it->second;
    x86::Xmm r = f64_uncached(*e);
    memo_.x[e.get()] = r;
    return r;
}

x86::Xmm Gen::dconst(double v) {
    x86::Xmm r = cc_.newXmm();
    cc_.vmovsd(r, cc_.newDoubleConst(aj::ConstPoolScope::kLocal, v));
    return r;
}

x86::Xmm Gen::dcall(double (*fn)(double), const x86::Xmm& x) {
    x86::Xmm r = cc_.newXmm();
    call(reinterpret_cast<const void*>(fn), aj::FuncSignatureT<double, double>(aj::CallConvId::kHost), {x}, r);
    return r;
}

x86::Xmm Gen::dblend(const x86::Xmm& mask, const x86::Xmm& a, const x86::Xmm& b) {  // mask ? a : b
    x86::Xmm r = cc_.newXmm();
    cc_.vblendvpd(r, b, a, mask);
    return r;
}

x86::Xmm Gen::dcmp(const x86::Xmm& a, const x86::Xmm& b, Cmp p) {
    x86::Xmm m = cc_.newXmm();
    cc_.vcmpsd(m, a, b, static_cast<int>(p));
    return m;
}

x86::Xmm Gen::f64_uncached(const Expr& e) {
    switch (e.kind) {
    case ExprKind::Const: return dconst(e.f);
    case ExprKind::Temp: return temps_[static_cast<std::size_t>(e.id)].x;
    case ExprKind::Load: {
        x86::Xmm r = cc_.newXmm();
        cc_.vmovsd(r, scalar_element(e.id, e.args[0]));
        return r;
    }
    case ExprKind::Unary: return f64_unary(e.uop, f64(e.args[0]));
    case ExprKind::Binary: {
        x86::Xmm a = f64(e.args[0]), b = f64(e.args[1]), r = cc_.newXmm();
        switch (e.bop) {
        case BinaryOp::add: cc_.vaddsd(r, a, b); return r;
        case BinaryOp::sub: cc_.vsubsd(r, a, b); return r;
        case BinaryOp::mul: cc_.vmulsd(r, a, b); return r;
        case BinaryOp::div: cc_.vdivsd(r, a, b); return r;
        case BinaryOp::pow:
            call(reinterpret_cast<const void*>(&callouts::f64_pow), aj::FuncSignatureT<double, double, double>(aj::CallConvId::kHost),
                 {a, b}, r);
            return r;
        case BinaryOp::max:
        case BinaryOp::min: {
            if (e.bop == BinaryOp::max) cc_.vmaxsd(r, b, a);
            else cc_.vminsd(r, b, a);
            x86::Xmm r2 = dblend(dcmp(b, b, Cmp::unord_q), b, r);
            return dblend(dcmp(a, a, Cmp::unord_q), a, r2);
        }
        default: break;
        }
        backend("f64 " + std::string(kir::op_name(e.bop)));
    }
    case ExprKind::Select: {
        x86::Xmm m = bool_to_mask(gp(e.args[0]));
        return dblend(m, f64(e.args[1]), f64(e.args[2]));
    }
    case ExprKind::Cast: {
        const Type from = e.args[0]->type;
        x86::Xmm r = cc_.newXmm();
        cc_.vxorpd(r, r, r);
        if (from == Type::f32) {
            x86::Xmm s = s_.reg(f32(e.args[0])).xmm();
            cc_.vcvtss2sd(r, r, s);
        } else {
            cc_.vcvtsi2sd(r, r, gp(e.args[0]));
        }
        return r;
    }
    default: break;
    }
    backend("malformed kernel: f64 expression");
}

x86::Xmm Gen::f64_unary(UnaryOp op, const x86::Xmm& x) {
    x86::Xmm r = cc_.newXmm();
    switch (op) {
    case UnaryOp::neg: cc_.vxorpd(r, x, dconst(-0.0)); return r;
    case UnaryOp::abs: {
        x86::Xmm m = cc_.newXmm();
        cc_.vmovsd(m, cc_.newUInt64Const(aj::ConstPoolScope::kLocal, 0x7fffffffffffffffull));
        cc_.vandpd(r, x, m);
        return r;
    }
    case UnaryOp::sqrt: cc_.vsqrtsd(r, x, x); return r;
    case UnaryOp::rsqrt: {
        x86::Xmm s = cc_.newXmm();
        cc_.vsqrtsd(s, x, x);
        cc_.vdivsd(r, dconst(1.0), s);
        return r;
    }
    case UnaryOp::reciprocal: cc_.vdivsd(r, dconst(1.0), x); return r;
    case UnaryOp::relu: {
        x86::Xmm z = dconst(0.0);
        return dblend(dcmp(x, z, Cmp::nle_uq), x, z);
    }
    case UnaryOp::floor: cc_.vroundsd(r, x, x, 1 | 8); return r;
    case UnaryOp::ceil: cc_.vroundsd(r, x, x, 2 | 8); return r;
    case UnaryOp::round: cc_.vroundsd(r, x, x, 0 | 8); return r;
    case UnaryOp::sign: {
        x86::Xmm z = dconst(0.0);
        x86::Xmm v = dblend(dcmp(x, x, Cmp::unord_q), x, z);
        v = dblend(dcmp(x, z, Cmp::lt_os), dconst(-1.0), v);
        return dblend(dcmp(x, z, Cmp::gt_os), dconst(1.0), v);
    }
    case UnaryOp::exp: return dcall(&callouts::f64_exp, x);
    case UnaryOp::log: return dcall(&callouts::f64_log, x);
    case UnaryOp::sin: return dcall(&callouts::f64_sin, x);
    case UnaryOp::cos: return dcall(&callouts::f64_cos, x);
    case UnaryOp::tanh: return dcall(&callouts::f64_tanh, x);
    case UnaryOp::erf: return dcall(&callouts::f64_erf, x);
    case UnaryOp::sigmoid: return dcall(&callouts::f64_sigmoid, x);
    case UnaryOp::gelu_erf: return dcall(&callouts::f64_gelu_erf, x);
    case UnaryOp::gelu_tanh: return dcall(&callouts::f64_gelu_tanh, x);
    case UnaryOp::silu: return dcall(&callouts::f64_silu, x);
    case UnaryOp::logical_not: break;
    }
    backend("f64 " + std::string(kir::op_name(op)));
}

F Gen::f32(const ExprRef& e) {
    if (auto it = memo_.f.find(e.get()); it != memo_.f.end()) return it->second;
    F r = f32_uncached(*e);
    memo_.f[e.get()] = r;
    return r;
}

F Gen::fcall1(float (*fn)(float), F x) {
    F r = s_.fresh();
    call(reinterpret_cast<const void*>(fn), aj::FuncSignatureT<float, float>(aj::CallConvId::kHost), {s_.reg(x).xmm()},
         s_.reg(r).xmm());
    return r;
}

F Gen::f32_uncached(const Expr& e) {
    switch (e.kind) {
    case ExprKind::Const: return s_.constant(static_cast<float>(e.f));
    case ExprKind::Temp: return temps_[static_cast<std::size_t>(e.id)].f;
    case ExprKind::Load: {
        const DType dt = k_.buffers[static_cast<std::size_t>(e.id)].dtype;
        x86::Mem m = scalar_element(e.id, e.args[0]);
        F r = s_.fresh();
        if (dt == DType::f32) {
            cc_.vmovss(s_.reg(r).xmm(), m);
            return r;
        }
        x86::Gp h = cc_.newInt32();
        m.setSize(2);
        cc_.movzx(h, m);
        if (dt == DType::bf16) {
            cc_.shl(h, 16);
            cc_.vmovd(s_.reg(r).xmm(), h);
        } else {
            call(reinterpret_cast<const void*>(&callouts::half_to_f32), aj::FuncSignatureT<float, std::uint32_t>(aj::CallConvId::kHost),
                 {h}, s_.reg(r).xmm());
        }
        return r;
    }
    case ExprKind::Unary: {
        F x = f32(e.args[0]);
        if (e.uop == UnaryOp::sin) return fcall1(&callouts::f32_sin, x);
        if (e.uop == UnaryOp::cos) return fcall1(&callouts::f32_cos, x);
        return f32_unary(s_, e.uop, x);
    }
    case ExprKind::Binary: {
        F a = f32(e.args[0]), b = f32(e.args[1]);
        if (e.bop == BinaryOp::pow) {
            F r = s_.fresh();
            call(reinterpret_cast<const void*>(&callouts::f32_pow), aj::FuncSignatureT<float, float, float>(aj::CallConvId::kHost),
                 {s_.reg(a).xmm(), s_.reg(b).xmm()}, s_.reg(r).xmm());
            return r;
        }
        return f32_binary(s_, e.bop, a, b);
    }
    case ExprKind::Select: {
        K m = s_.wrap_mask(bool_to_mask(gp(e.args[0])));
        return s_.select(m, f32(e.args[1]), f32(e.args[2]));
    }
    case ExprKind::Cast: {
        const Type from = e.args[0]->type;
        F r = s_.fresh();
        x86::Xmm x = s_.reg(r).xmm();
        cc_.vxorps(x, x, x);
        if (from == Type::f64) cc_.vcvtsd2ss(x, x, f64(e.args[0]));
        else cc_.vcvtsi2ss(x, x, gp(e.args[0]));
        return r;
    }
    default: break;
    }
    backend("malformed kernel: f32 expression");
}

}  // namespace kiln::tiers::asmjit_tier
