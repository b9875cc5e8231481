// The generator's integer, bool and index values (gen_p.h), held in 64-bit general-purpose
// registers in canonical form (sign- or zero-extended): constants, params, loop variables,
// loads, integer arithmetic with wrap-around and division by zero giving 0, comparisons,
// selects, and casts to these types (core::convert's saturating float -> integer).
#include "tiers/asmjit/gen_p.h"

#include <cstdint>
#include <string>

namespace kiln::tiers::asmjit_tier {

// Keeps a 64-bit register holding a value of type t in its canonical form.
void Gen::normalise(const x86::Gp& r, Type t) {
    switch (t) {
    case Type::i8: cc_.movsx(r, r.r8()); break;
    case Type::u8: cc_.movzx(r.r32(), r.r8()); break;
    case Type::i32: cc_.movsxd(r, r.r32()); break;
    case Type::boolean: cc_.and_(r, 1); break;
    default: break;
    }
}

// xmm mask register (lane 0) -> bool in a gp register.
x86::Gp Gen::mask_to_bool(const x86::Vec& m) {
    x86::Gp r = cc_.newInt64();
    cc_.vmovd(r.r32(), m.xmm());
    cc_.and_(r.r32(), 1);
    return r;
}

// bool in a gp register -> xmm with lane 0 (and 1) all ones when true.
x86::Xmm Gen::bool_to_mask(const x86::Gp& b) {
    x86::Gp t = cc_.newInt64();
    cc_.mov(t, b);
    cc_.neg(t);
    x86::Xmm m = cc_.newXmm();
    cc_.vmovq(m, t);
    return m;
}

x86::Gp Gen::gp(const ExprRef& e) {
    if (auto it = memo_.g.find(e.get()); it != memo_.g.end()) return it->second;
    x86::Gp r = gp_uncached(*e);
    memo_.g[e.get()] = r;
    return r;
}

x86::Gp Gen::gp_uncached(const Expr& e) {
    const Type t = e.type;
    switch (e.kind) {
    case ExprKind::Const: {
        x86::Gp r = cc_.newInt64();
        cc_.mov(r, t == Type::boolean ? std::int64_t(e.i != 0) : e.i);
        return r;
    }
    case ExprKind::Param: {
        x86::Gp r = cc_.newInt64();
        cc_.mov(r, x86::ptr(params_, e.id * 8));
        return r;
    }
    case ExprKind::Outer:
        if (!outer_.isValid()) backend("malformed kernel: outer index unavailable");
        return outer_;
    case ExprKind::Var: return var_reg(e.id);
    case ExprKind::Temp: return temps_[static_cast<std::size_t>(e.id)].g;
    case ExprKind::Load: {
        x86::Mem m = scalar_element(e.id, e.args[0]);
        x86::Gp r = cc_.newInt64();
        switch (k_.buffers[static_cast<std::size_t>(e.id)].dtype) {
        case DType::i8: m.setSize(1); cc_.movsx(r, m); break;
        case DType::u8: m.setSize(1); cc_.movzx(r.r32(), m); break;
        case DType::boolean:
            m.setSize(1);
            cc_.cmp(m, 0);
            cc_.setne(r.r8());
            cc_.movzx(r.r32(), r.r8());
            break;
        case DType::i32: m.setSize(4); cc_.movsxd(r, m); break;
        default: m.setSize(8); cc_.mov(r, m); break;
        }
        return r;
    }
    case ExprKind::Unary: return int_unary(e.uop, t, gp(e.args[0]));
    case ExprKind::Binary: {
        const Type at = e.args[0]->type;
        if (kir::is_comparison(e.bop)) {
            if (at == Type::f32) return mask_to_bool(s_.mvec(s_.cmp(f32(e.args[0]), f32(e.args[1]), f32_pred(e.bop))));
            if (at == Type::f64) {
                x86::Xmm m = cc_.newXmm();
                cc_.vcmpsd(m, f64(e.args[0]), f64(e.args[1]), static_cast<int>(f32_pred(e.bop)));
                return mask_to_bool(m);
            }
            return int_compare(e.bop, gp(e.args[0]), gp(e.args[1]));
        }
        return int_binary(e.bop, t, gp(e.args[0]), gp(e.args[1]));
    }
    case ExprKind::Select: {
        x86::Gp c = gp(e.args[0]), a = gp(e.args[1]), b = gp(e.args[2]);
        x86::Gp r = cc_.newInt64();
        cc_.mov(r, b);
        cc_.test(c, c);
        cc_.cmovnz(r, a);
        return r;
    }
    case ExprKind::Cast: return cast_to_gp(e.args[0], t);
    }
    backend("malformed kernel: unknown expression");
}

x86::Gp Gen::int_unary(UnaryOp op, Type t, const x86::Gp& x) {
    x86::Gp r = cc_.newInt64();
    const bool sign = t != Type::u8;
    switch (op) {
    case UnaryOp::logical_not:
        cc_.mov(r, x);
        cc_.xor_(r, 1);
        return r;
    case UnaryOp::neg:
        cc_.mov(r, x);
        cc_.neg(r);
        normalise(r, t);
        return r;
    case UnaryOp::abs:
        cc_.mov(r, x);
        if (sign) {
            x86::Gp n = cc_.newInt64();
            cc_.mov(n, x);
            cc_.neg(n);
            cc_.test(x, x);
            cc_.cmovl(r, n);
            normalise(r, t);
        }
        return r;
    case UnaryOp::relu:
        if (!sign) {
            cc_.mov(r, x);
            return r;
        }
        cc_.xor_(r, r);
        cc_.test(x, x);
        cc_.cmovg(r, x);
        return r;
    case UnaryOp::sign: {
        x86::Gp lt = cc_.newInt64();
        cc_.xor_(r, r);
        cc_.xor_(lt, lt);
        cc_.test(x, x);
        if (sign) {
            cc_.setg(r.r8());
            cc_.setl(lt.r8());
            cc_.sub(r, lt);
        } else {
            cc_.setne(r.r8());
        }
        return r;
    }
    default: break;
    }
    backend(std::string(kir::op_name(op)) + " on an integer");
}

x86::Gp Gen::int_compare(BinaryOp op, const x86::Gp& a, const x86::Gp& b) {
    x86::Gp r = cc_.newInt64();
    cc_.xor_(r, r);
    cc_.cmp(a, b);
    switch (op) {
    case BinaryOp::eq: cc_.sete(r.r8()); break;
    case BinaryOp::ne: cc_.setne(r.r8()); break;
    case BinaryOp::lt: cc_.setl(r.r8()); break;
    case BinaryOp::le: cc_.setle(r.r8()); break;
    case BinaryOp::gt: cc_.setg(r.r8()); break;
    default: cc_.setge(r.r8()); break;
    }
    return r;
}

x86::Gp Gen::int_binary(BinaryOp op, Type t, const x86::Gp& a, const x86::Gp& b) {
    x86::Gp r = cc_.newInt64();
    switch (op) {
    case BinaryOp::logical_and: cc_.mov(r, a); cc_.and_(r, b); return r;
    case BinaryOp::logical_or: cc_.mov(r, a); cc_.or_(r, b); return r;
    case BinaryOp::add: cc_.mov(r, a); cc_.add(r, b); normalise(r, t); return r;
    case BinaryOp::sub: cc_.mov(r, a); cc_.sub(r, b); normalise(r, t); return r;
    case BinaryOp::mul: cc_.mov(r, a); cc_.imul(r, b); normalise(r, t); return r;
    case BinaryOp::max: cc_.mov(r, a); cc_.cmp(b, a); cc_.cmovg(r, b); return r;  // y > x ? y : x
    case BinaryOp::min: cc_.mov(r, a); cc_.cmp(b, a); cc_.cmovl(r, b); return r;
    case BinaryOp::div: {
        // x / 0 == 0; x / -1 == -x (wrapping: INT_MIN / -1 == INT_MIN); else truncating.
        aj::Label done = cc_.newLabel(), normal = cc_.newLabel();
        cc_.xor_(r, r);
        cc_.test(b, b);
        cc_.jz(done);
        cc_.cmp(b, -1);
        cc_.jne(normal);
        cc_.mov(r, a);
        cc_.neg(r);
        normalise(r, t);
        cc_.jmp(done);
        cc_.bind(normal);
        x86::Gp lo = cc_.newInt64(), hi = cc_.newInt64();
        cc_.mov(lo, a);
        cc_.cqo(hi, lo);
        cc_.idiv(hi, lo, b);
        cc_.mov(r, lo);
        normalise(r, t);
        cc_.bind(done);
        return r;
    }
    default: break;
    }
    backend(std::string(kir::op_name(op)) + " on an integer");
}

// core::convert to an integer, bool or index type.
x86::Gp Gen::cast_to_gp(const ExprRef& a, Type to) {
    const Type from = a->type;
    if (to == Type::boolean) {
        if (from == Type::f32) return mask_to_bool(s_.mvec(s_.cmp(f32(a), s_.constant(0.0f), Cmp::ne_uq)));
        if (from == Type::f64) {
            x86::Xmm z = cc_.newXmm(), m = cc_.newXmm();
            cc_.vxorpd(z, z, z);
            cc_.vcmpsd(m, f64(a), z, static_cast<int>(Cmp::ne_uq));
            return mask_to_bool(m);
        }
        x86::Gp x = gp(a), r = cc_.newInt64();
        cc_.xor_(r, r);
        cc_.test(x, x);
        cc_.setne(r.r8());
        return r;
    }
    if (from == Type::f32 || from == Type::f64) {
        x86::Xmm d = from == Type::f64 ? f64(a) : cc_.newXmm();
        if (from == Type::f32) {
            x86::Xmm s = s_.reg(f32(a)).xmm();
            cc_.vcvtss2sd(d, s, s);
        }
        // NaN -> 0; <= min -> min; >= max -> max; else truncate.
        double lo, hi;
        std::int64_t imin, imax;
        switch (to) {
        case Type::i8: imin = INT8_MIN; imax = INT8_MAX; break;
        case Type::u8: imin = 0; imax = UINT8_MAX; break;
        case Type::i32: imin = INT32_MIN; imax = INT32_MAX; break;
        default: imin = INT64_MIN; imax = INT64_MAX; break;
        }
        lo = static_cast<double>(imin);
        hi = static_cast<double>(imax);
        x86::Gp r = cc_.newInt64(), t = cc_.newInt64();
        x86::Xmm clo = cc_.newXmm(), chi = cc_.newXmm();
        cc_.vmovsd(clo, cc_.newDoubleConst(aj::ConstPoolScope::kLocal, lo));
        cc_.vmovsd(chi, cc_.newDoubleConst(aj::ConstPoolScope::kLocal, hi));
        cc_.vcvttsd2si(r, d);  // out of range and NaN give INT64_MIN: fixed below
        cc_.mov(t, imax);
        cc_.vucomisd(d, chi);
        cc_.cmovae(r, t);  // d >= hi (not NaN: CF = 1 then)
        cc_.mov(t, imin);
        cc_.vucomisd(clo, d);
        cc_.cmovae(r, t);  // lo >= d
        cc_.xor_(t, t);
        cc_.vucomisd(d, d);
        cc_.cmovp(r, t);  // NaN
        return r;
    }
    x86::Gp x = gp(a), r = cc_.newInt64();
    cc_.mov(r, x);
    normalise(r, to);  // bool and u8 are zero-extended already: nothing changes widening
    return r;
}

}  // namespace kiln::tiers::asmjit_tier
