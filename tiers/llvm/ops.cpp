// Each KIR op as LLVM instructions (ops.h): unary and binary ops, comparisons and casts on
// every KIR type, f64 transcendental ops as libm calls, and the f16/bf16 conversions.
#include "tiers/llvm/ops.h"

#include "tiers/llvm/codegen.h"
#include "tiers/test_hook.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <string>
#include <utility>

namespace kiln::tiers::llvm_tier {
namespace {

[[noreturn]] void fail(Bailout b, const std::string& msg) { throw CodegenError{b, msg}; }

bool is_signed_int(kir::Type t) {
    using kir::Type;
    return t == Type::i8 || t == Type::i32 || t == Type::i64 || t == Type::index;
}
bool is_int(kir::Type t) { return is_signed_int(t) || t == kir::Type::u8; }

}  // namespace

using llvm::Value;
using kir::BinaryOp;
using kir::Type;
using kir::UnaryOp;

llvm::Type* OpEmitter::ltype(Type t) {
    switch (t) {
    case Type::f32: return b_.getFloatTy();
    case Type::f64: return b_.getDoubleTy();
    case Type::i8: case Type::u8: return b_.getInt8Ty();
    case Type::i32: return b_.getInt32Ty();
    case Type::i64: case Type::index: return b_.getInt64Ty();
    case Type::boolean: return b_.getInt1Ty();
    }
    fail(Bailout::unsupported_dtype, "unknown KIR type");
}

Value* OpEmitter::fconst(llvm::Type* ty, double v) { return llvm::ConstantFP::get(ty, v); }
Value* OpEmitter::u32(std::uint32_t v) { return llvm::ConstantInt::get(lanes_of(b_.getInt32Ty()), v); }
llvm::Type* OpEmitter::lanes_of(llvm::Type* scalar) const {
    return lanes_ ? llvm::FixedVectorType::get(scalar, lanes_) : scalar;
}
Value* OpEmitter::isnan(Value* x) { return b_.CreateFCmpUNO(x, x); }
Value* OpEmitter::fma(Value* a, Value* b, Value* c) { return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {a->getType()}, {a, b, c}); }
Value* OpEmitter::libm(const char* name, Value* x) {
    llvm::Type* d = b_.getDoubleTy();
    llvm::FunctionCallee f = m_.getOrInsertFunction(name, llvm::FunctionType::get(d, {d}, false));
    if (auto* fn = llvm::dyn_cast<llvm::Function>(f.getCallee())) {
        fn->addFnAttr(llvm::Attribute::NoUnwind);
        fn->addFnAttr(llvm::Attribute::WillReturn);
        fn->setDoesNotAccessMemory();
    }
    return b_.CreateCall(f, {x});
}

[[noreturn]] void OpEmitter::unsupported(std::string_view op, Type t) {
    fail(Bailout::unsupported_op, std::string(op) + " on " + std::string(kir::type_name(t)));
}

// ---- f16 / bf16 (bit-exact with kiln::Half and kiln::BFloat16) ----

Value* OpEmitter::half_to_float(Value* h16) {
    Value* h = b_.CreateZExt(h16, lanes_of(b_.getInt32Ty()));
    Value* sign = b_.CreateShl(b_.CreateAnd(h, u32(0x8000)), 16);
    Value* em = b_.CreateAnd(h, u32(0x7fff));
    Value* exp = b_.CreateLShr(em, 10);
    Value* mant = b_.CreateAnd(h, u32(0x3ff));
    Value* normal = b_.CreateAdd(b_.CreateShl(em, 13), u32(112u << 23));
    Value* infnan = b_.CreateOr(u32(0x7f800000u), b_.CreateShl(mant, 13));
    // Subnormal (and zero): mant * 2^-24 is exact in f32.
    Value* subf = b_.CreateFMul(b_.CreateUIToFP(mant, lanes_of(b_.getFloatTy())), llvm::ConstantFP::get(lanes_of(b_.getFloatTy()), 0x1p-24));
    Value* sub = b_.CreateBitCast(subf, lanes_of(b_.getInt32Ty()));
    Value* mag = b_.CreateSelect(b_.CreateICmpEQ(exp, u32(0)), sub,
                                 b_.CreateSelect(b_.CreateICmpEQ(exp, u32(31)), infnan, normal));
    return b_.CreateBitCast(b_.CreateOr(sign, mag), lanes_of(b_.getFloatTy()));
}

Value* OpEmitter::float_to_half(Value* f) {
    Value* x = b_.CreateBitCast(f, lanes_of(b_.getInt32Ty()));
    Value* sign = b_.CreateAnd(b_.CreateLShr(x, 16), u32(0x8000));
    Value* mant = b_.CreateAnd(x, u32(0x7fffff));
    Value* exp = b_.CreateAnd(b_.CreateLShr(x, 23), u32(0xff));
    Value* e = b_.CreateSub(exp, u32(112));  // signed: exp - 127 + 15
    // Normal half: round the 13 dropped bits to nearest even (a carry into the exponent
    // is correct, up to infinity).
    Value* half = b_.CreateOr(b_.CreateOr(sign, b_.CreateShl(e, 10)), b_.CreateLShr(mant, 13));
    Value* rem = b_.CreateAnd(mant, u32(0x1fff));
    Value* up = b_.CreateOr(b_.CreateICmpUGT(rem, u32(0x1000)),
                            b_.CreateAnd(b_.CreateICmpEQ(rem, u32(0x1000)),
                                         b_.CreateICmpNE(b_.CreateAnd(half, u32(1)), u32(0))));
    Value* normal = b_.CreateAdd(half, b_.CreateZExt(up, lanes_of(b_.getInt32Ty())));
    // Subnormal half (e <= 0): shift 14 - e, clamped to [1, 31] (a shift past 24 gives 0
    // with no rounding up, which is the zero of the reference).
    Value* m = b_.CreateOr(mant, u32(0x800000));
    Value* shift = b_.CreateSub(u32(14), e);
    shift = b_.CreateSelect(b_.CreateICmpSGT(shift, u32(31)), u32(31), shift);
    shift = b_.CreateSelect(b_.CreateICmpSLT(shift, u32(1)), u32(1), shift);
    Value* hm = b_.CreateLShr(m, shift);
    Value* rem2 = b_.CreateAnd(m, b_.CreateSub(b_.CreateShl(u32(1), shift), u32(1)));
    Value* halfway = b_.CreateShl(u32(1), b_.CreateSub(shift, u32(1)));
    Value* up2 = b_.CreateOr(b_.CreateICmpUGT(rem2, halfway),
                             b_.CreateAnd(b_.CreateICmpEQ(rem2, halfway),
                                          b_.CreateICmpNE(b_.CreateAnd(hm, u32(1)), u32(0))));
    Value* sub = b_.CreateOr(sign, b_.CreateAdd(hm, b_.CreateZExt(up2, lanes_of(b_.getInt32Ty()))));
    Value* infnan = b_.CreateOr(b_.CreateOr(sign, u32(0x7c00)),
                                b_.CreateSelect(b_.CreateICmpNE(mant, u32(0)), u32(0x200), u32(0)));
    Value* ovf = b_.CreateOr(sign, u32(0x7c00));
    Value* r = b_.CreateSelect(b_.CreateICmpSLE(e, u32(0)), sub, normal);
    r = b_.CreateSelect(b_.CreateICmpSGE(e, u32(31)), ovf, r);
    r = b_.CreateSelect(b_.CreateICmpEQ(exp, u32(0xff)), infnan, r);
    return b_.CreateTrunc(r, lanes_of(b_.getInt16Ty()));
}

Value* OpEmitter::float_to_bf16(Value* f) {
    Value* x = b_.CreateBitCast(f, lanes_of(b_.getInt32Ty()));
    Value* hi = b_.CreateLShr(x, 16);
    Value* isnan = b_.CreateICmpUGT(b_.CreateAnd(x, u32(0x7fffffff)), u32(0x7f800000));
    Value* nanv = b_.CreateOr(hi, u32(0x40));
    Value* rounding = b_.CreateAdd(u32(0x7fff), b_.CreateAnd(hi, u32(1)));
    Value* rounded = b_.CreateLShr(b_.CreateAdd(x, rounding), 16);
    return b_.CreateTrunc(b_.CreateSelect(isnan, nanv, rounded), lanes_of(b_.getInt16Ty()));
}

Value* bf16_to_float(llvm::IRBuilderBase& b, Value* raw) {
    llvm::Type* i32 = b.getInt32Ty();
    llvm::Type* f32 = b.getFloatTy();
    if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(raw->getType())) {
        i32 = llvm::FixedVectorType::get(i32, vt->getNumElements());
        f32 = llvm::FixedVectorType::get(f32, vt->getNumElements());
    }
    return b.CreateBitCast(b.CreateShl(b.CreateZExt(raw, i32), llvm::ConstantInt::get(i32, 16)), f32);
}

// ---- unary ----

Value* OpEmitter::emit_unary(UnaryOp op, Type t, Value* x) {
    if (kir::is_float(t)) return float_unary(op, t, x);
    if (t == Type::boolean) {
        if (op == UnaryOp::logical_not) return b_.CreateNot(x);
        unsupported(kir::op_name(op), t);
    }
    const bool s = is_signed_int(t);
    llvm::Type* ty = x->getType();
    Value* zero = llvm::ConstantInt::get(ty, 0);
    switch (op) {
    case UnaryOp::neg: return b_.CreateSub(zero, x);  // wraps: -INT_MIN == INT_MIN
    case UnaryOp::abs: return s ? b_.CreateSelect(b_.CreateICmpSLT(x, zero), b_.CreateSub(zero, x), x) : x;
    case UnaryOp::relu: return s ? b_.CreateSelect(b_.CreateICmpSGT(x, zero), x, zero) : x;
    case UnaryOp::sign:
        if (s) return b_.CreateSub(b_.CreateZExt(b_.CreateICmpSGT(x, zero), ty), b_.CreateZExt(b_.CreateICmpSLT(x, zero), ty));
        return b_.CreateZExt(b_.CreateICmpNE(x, zero), ty);
    default: unsupported(kir::op_name(op), t);
    }
}

Value* OpEmitter::float_unary(UnaryOp op, Type t, Value* x) {
    llvm::Type* ty = x->getType();
    const bool f32 = t == Type::f32;
    Value* zero = fconst(ty, 0.0);
    Value* one = fconst(ty, 1.0);
    switch (op) {
    case UnaryOp::neg: return b_.CreateFNeg(x);
    case UnaryOp::abs: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
    case UnaryOp::exp: return f32 ? exp_f32(x) : libm("exp", x);
    case UnaryOp::log: return f32 ? log_f32(x) : libm("log", x);
    case UnaryOp::sqrt: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
    case UnaryOp::rsqrt: return b_.CreateFDiv(one, b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x));
    case UnaryOp::reciprocal: return b_.CreateFDiv(one, x);
    case UnaryOp::sin: return f32 ? sincos_f32(x, false) : libm("sin", x);
    case UnaryOp::cos: return f32 ? sincos_f32(x, true) : libm("cos", x);
    case UnaryOp::tanh: return f32 ? tanh_f32(x) : libm("tanh", x);
    case UnaryOp::sigmoid: return sigmoid(x, f32);
    case UnaryOp::relu: return b_.CreateSelect(b_.CreateFCmpUGT(x, zero), x, zero);  // keeps NaN, relu(-0) = +0
    case UnaryOp::gelu_erf: {
        Value* s = b_.CreateFMul(x, fconst(ty, 0.70710678118654752440));
        Value* er = f32 ? erf_f32(s) : libm("erf", s);
        return b_.CreateFMul(b_.CreateFMul(fconst(ty, 0.5), x), b_.CreateFAdd(one, er));
    }
    case UnaryOp::gelu_tanh: {
        Value* x3 = b_.CreateFMul(b_.CreateFMul(b_.CreateFMul(fconst(ty, 0.044715), x), x), x);
        Value* in = b_.CreateFMul(fconst(ty, 0.79788456080286535588), b_.CreateFAdd(x, x3));
        // f32: 0.5 * (1 + tanh(u)) == sigmoid(2u) exactly, so gelu = x * sigmoid(2u): one
        // exp and one division instead of tanh's two branches (same NaN/inf results).
        if (f32) return x_sigmoid_f32(x, b_.CreateFAdd(in, in));
        Value* th = libm("tanh", in);
        return b_.CreateFMul(b_.CreateFMul(fconst(ty, 0.5), x), b_.CreateFAdd(one, th));
    }
    case UnaryOp::silu: return f32 ? x_sigmoid_f32(x, x) : b_.CreateFMul(x, sigmoid(x, false));
    case UnaryOp::erf: return f32 ? erf_f32(x) : libm("erf", x);
    case UnaryOp::floor: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, x);
    case UnaryOp::ceil: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::ceil, x);
    case UnaryOp::round: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, x);
    case UnaryOp::sign: {
        Value* r = b_.CreateSelect(isnan(x), x, zero);
        r = b_.CreateSelect(b_.CreateFCmpOLT(x, zero), fconst(ty, -1.0), r);
        return b_.CreateSelect(b_.CreateFCmpOGT(x, zero), one, r);
    }
    case UnaryOp::logical_not: unsupported(kir::op_name(op), t);
    }
    unsupported(kir::op_name(op), t);
}

// f32: 1 / (1 + exp(-x)) for both signs (exp_sigmoid_f32 says why that is as accurate as
// the stable form here). f64 as the interpreter: e = exp(-|x|); x >= 0 ? 1/(1+e) : e/(1+e).
Value* OpEmitter::sigmoid(Value* x, bool f32) {
    llvm::Type* ty = x->getType();
    if (f32) return x_sigmoid_f32(fconst(ty, 1.0), x);
    Value* na = b_.CreateFNeg(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x));
    Value* e = libm("exp", na);
    Value* r = b_.CreateFDiv(fconst(ty, 1.0), b_.CreateFAdd(fconst(ty, 1.0), e));
    return b_.CreateSelect(b_.CreateFCmpOGE(x, fconst(ty, 0.0)), r, b_.CreateFMul(e, r));
}

// x * sigmoid(z) as x / (1 + exp(-z)) (f32): one division, no multiply, and one rounding
// fewer; x = -inf with exp(-z) = inf gives NaN as -inf * 0 does (silu(-inf), gelu(-inf)).
// A true division: the divider runs beside the FMA pipes this code saturates (a reciprocal
// estimate + Newton step measured 8% slower on the elementwise chain). Where x is z (SiLU)
// z's NaN reaches the quotient through x, so exp_sigmoid_f32 may clamp z without keeping it.
Value* OpEmitter::x_sigmoid_f32(Value* x, Value* z) {
    llvm::Type* ty = x->getType();
    Value* q = b_.CreateFDiv(x, b_.CreateFAdd(fconst(ty, 1.0), exp_sigmoid_f32(z, x == z)));
    auto* c = llvm::dyn_cast<llvm::ConstantFP>(x);
    auto* div = llvm::dyn_cast<llvm::Instruction>(q);  // (not folded to a constant)
    if (c && c->isExactlyValue(1.0) && div) sigmoids_[div] = z;
    return q;
}

OpEmitter::EmittedSigmoid OpEmitter::emitted_sigmoid(Value* v) const {
    const auto it = sigmoids_.find(v);
    if (it == sigmoids_.end()) return {};
    return {it->second, llvm::cast<llvm::Instruction>(v)->getOperand(1)};
}

// ---- binary ----

Value* OpEmitter::emit_binary(BinaryOp op, Type t, Value* x, Value* y) {
    if (kir::is_float(t) && tiers::corrupt_op_for_testing() == op) x = b_.CreateFAdd(x, fconst(x->getType(), 1.0));  // tiers/test_hook.h
    switch (op) {
    case BinaryOp::eq: case BinaryOp::ne: case BinaryOp::lt: case BinaryOp::le: case BinaryOp::gt: case BinaryOp::ge:
        return compare(op, t, x, y);
    default: break;
    }
    if (t == Type::boolean) {
        if (op == BinaryOp::logical_and) return b_.CreateAnd(x, y);
        if (op == BinaryOp::logical_or) return b_.CreateOr(x, y);
        unsupported(kir::op_name(op), t);
    }
    if (kir::is_float(t)) {
        switch (op) {
        case BinaryOp::add: return b_.CreateFAdd(x, y);
        case BinaryOp::sub: return b_.CreateFSub(x, y);
        case BinaryOp::mul:
            // y * sigmoid(z) (ONNX's SiLU, x * Sigmoid(x)) as y / (1 + exp(-z)): one division
            // instead of a division and a multiply, and one rounding fewer; the same at every
            // special value, as 1 + exp(-z) is NaN or at least 1 (x_sigmoid_f32).
            // A product with the sigmoid's own argument (x * Sigmoid(x)) is emitted afresh as
            // SiLU (x_sigmoid_f32(x, x): its clamps need not keep NaN); the sigmoid's own
            // chain stays only where something else reads it.
            for (auto [sig, other] : {std::pair{y, x}, std::pair{x, y}})
                if (const EmittedSigmoid s = emitted_sigmoid(sig); s.z)
                    return s.z == other ? x_sigmoid_f32(other, other) : b_.CreateFDiv(other, s.denominator);
            return b_.CreateFMul(x, y);
        case BinaryOp::div: return b_.CreateFDiv(x, y);
        case BinaryOp::pow: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x, y);
        case BinaryOp::max: case BinaryOp::min: {
            // isnan(x) ? x : isnan(y) ? y : (y > x ? y : x)   (max; `<` for min)
            const bool max = op == BinaryOp::max;
            auto number = [](Value* v) {
                auto* c = llvm::dyn_cast<llvm::ConstantFP>(v);
                return c != nullptr && !c->isNaN();
            };
            // A constant operand that is not NaN (relu6's bounds): one compare and select,
            // which x86 does in one max (min) instruction. y constant: y > x is false for a
            // NaN x, which is then the result; x constant: an unordered compare takes a NaN y.
            if (number(y)) return b_.CreateSelect(max ? b_.CreateFCmpOGT(y, x) : b_.CreateFCmpOLT(y, x), y, x);
            if (number(x)) return b_.CreateSelect(max ? b_.CreateFCmpUGT(y, x) : b_.CreateFCmpULT(y, x), y, x);
            Value* better = max ? b_.CreateFCmpOGT(y, x) : b_.CreateFCmpOLT(y, x);
            Value* r = b_.CreateSelect(better, y, x);
            r = b_.CreateSelect(isnan(y), y, r);
            return b_.CreateSelect(isnan(x), x, r);
        }
        default: unsupported(kir::op_name(op), t);
        }
    }
    const bool s = is_signed_int(t);
    llvm::Type* ty = x->getType();
    Value* zero = llvm::ConstantInt::get(ty, 0);
    Value* one = llvm::ConstantInt::get(ty, 1);
    switch (op) {
    case BinaryOp::add: return b_.CreateAdd(x, y);  // all wrap
    case BinaryOp::sub: return b_.CreateSub(x, y);
    case BinaryOp::mul: return b_.CreateMul(x, y);
    case BinaryOp::div: {
        // x / 0 == 0; INT_MIN / -1 == INT_MIN (computed as the wrapping -x).
        Value* y0 = b_.CreateICmpEQ(y, zero);
        if (!s) return b_.CreateSelect(y0, zero, b_.CreateUDiv(x, b_.CreateSelect(y0, one, y)));
        Value* ym1 = b_.CreateICmpEQ(y, llvm::ConstantInt::getSigned(ty, -1));
        Value* safe = b_.CreateSelect(b_.CreateOr(y0, ym1), one, y);
        Value* q = b_.CreateSDiv(x, safe);
        return b_.CreateSelect(y0, zero, b_.CreateSelect(ym1, b_.CreateSub(zero, x), q));
    }
    case BinaryOp::max:
        return b_.CreateBinaryIntrinsic(s ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, x, y);
    case BinaryOp::min:
        return b_.CreateBinaryIntrinsic(s ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, x, y);
    default: unsupported(kir::op_name(op), t);
    }
}

Value* OpEmitter::compare(BinaryOp op, Type t, Value* x, Value* y) {
    using P = llvm::CmpInst::Predicate;
    if (kir::is_float(t)) {
        // IEEE: NaN is unordered, so only `ne` is true for it.
        P p = op == BinaryOp::eq ? P::FCMP_OEQ : op == BinaryOp::ne ? P::FCMP_UNE : op == BinaryOp::lt ? P::FCMP_OLT
            : op == BinaryOp::le ? P::FCMP_OLE : op == BinaryOp::gt ? P::FCMP_OGT : P::FCMP_OGE;
        return b_.CreateFCmp(p, x, y);
    }
    const bool s = is_signed_int(t);  // bool and u8 compare unsigned (false < true)
    P p = op == BinaryOp::eq ? P::ICMP_EQ : op == BinaryOp::ne ? P::ICMP_NE
        : op == BinaryOp::lt ? (s ? P::ICMP_SLT : P::ICMP_ULT) : op == BinaryOp::le ? (s ? P::ICMP_SLE : P::ICMP_ULE)
        : op == BinaryOp::gt ? (s ? P::ICMP_SGT : P::ICMP_UGT) : (s ? P::ICMP_SGE : P::ICMP_UGE);
    return b_.CreateICmp(p, x, y);
}

// ---- casts (core::convert) ----

Value* OpEmitter::emit_cast(Type from, Type to, Value* v) {
    if (from == to) return v;
    llvm::Type* ty = ltype(to);
    if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(v->getType())) ty = llvm::FixedVectorType::get(ty, vt->getNumElements());
    if (to == Type::boolean) {
        if (kir::is_float(from)) return b_.CreateFCmpUNE(v, fconst(v->getType(), 0.0));  // NaN -> true
        return b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
    }
    if (kir::is_float(from) && kir::is_float(to)) return b_.CreateFPCast(v, ty);
    if (kir::is_float(from)) {  // truncate toward zero, saturate, NaN -> 0
        auto id = to == Type::u8 ? llvm::Intrinsic::fptoui_sat : llvm::Intrinsic::fptosi_sat;
        return b_.CreateIntrinsic(id, {ty, v->getType()}, {v});
    }
    const bool s = is_signed_int(from);
    if (kir::is_float(to)) return s ? b_.CreateSIToFP(v, ty) : b_.CreateUIToFP(v, ty);
    if (!is_int(to)) fail(Bailout::unsupported_dtype, "cast to an unknown type");
    return b_.CreateIntCast(v, ty, s);  // narrower wraps; bool and u8 zero-extend
}

}  // namespace kiln::tiers::llvm_tier
