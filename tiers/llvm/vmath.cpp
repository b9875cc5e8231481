// The f32 polynomials of the LLVM tier (ops.h): exp, log, tanh, erf, sin and cos as
// branch-free sequences of f32 (and for sin/cos f64) instructions that the loop vectoriser
// can widen. Coefficients: src/cpu/vmath_coeffs.h (shared with tier 1's tiers/asmjit/vmath.cpp,
// so that both tiers agree). Each states its accuracy against the interpreter's libm result.
#include "tiers/llvm/ops.h"

#include "src/cpu/vmath_coeffs.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <limits>

namespace kiln::tiers::llvm_tier {

using llvm::Value;
using namespace cpu::vmath;

template <std::size_t N> Value* OpEmitter::horner(const float (&c)[N], Value* x) {
    llvm::Type* ty = x->getType();
    Value* p = fconst(ty, c[0]);
    for (std::size_t i = 1; i < N; ++i) p = fma(p, x, fconst(ty, c[i]));
    return p;
}

// Max error 1.06 ulp over all floats (measured against exp in double); exp(NaN) is NaN,
// results are subnormal down to exp(-103.97) and overflow to inf from 88.73 on.
// x = n ln2 + r with |r| <= ln2/2, exp(r) by a polynomial, 2^n applied as two factors
// 2^n1 * 2^n2 (each normal for n in [-150, 128], so a subnormal result is rounded once).
// No instruction turns NaN into a number: the clamps keep it and it reaches the result
// through r, so no final select is needed (and no fptosi, which would be poison on NaN).
Value* OpEmitter::exp_f32(Value* x) {
    llvm::Type* ty = x->getType();
    // `x < lo ? lo : x` keeps NaN and is one max instruction (maxnum would make NaN lo).
    Value* xc = b_.CreateSelect(b_.CreateFCmpOLT(x, fconst(ty, -104.0)), fconst(ty, -104.0), x);
    xc = b_.CreateSelect(b_.CreateFCmpOGT(xc, fconst(ty, 89.0)), fconst(ty, 89.0), xc);
    // Adding 1.5 * 2^23 rounds to an integer (the sum's last bit is worth 1) and leaves
    // it in the low mantissa bits: t = magic + 254 + n and t1 = magic + 127 + n1, with
    // n = round(x log2e) and n1 = round(x log2e / 2), so n2 = n - n1 is within 1 of n1.
    constexpr double magic = 12582912.0;
    Value* t = fma(xc, fconst(ty, 1.44269504088896341), fconst(ty, magic + 254.0));
    Value* t1 = fma(xc, fconst(ty, 0.5 * 1.44269504088896341), fconst(ty, magic + 127.0));
    Value* n = b_.CreateFSub(t, fconst(ty, magic + 254.0));  // exact
    Value* r = fma(n, fconst(ty, -0.693359375), xc);         // ln2 in two parts: n * hi is exact
    r = fma(n, fconst(ty, 2.12194440e-4), r);
    Value* y = fma(horner(kExpP, r), r, fconst(ty, 1.0));
    // Shifted left by 23, the bits of t1 are those of 2^n1 (127 + n1 in the exponent field;
    // magic's bits fall off the top), and bits(t) - bits(t1) = 127 + n2 those of 2^n2.
    llvm::Type* ity = lanes_of(b_.getInt32Ty());
    Value* bt = b_.CreateBitCast(t, ity);
    Value* bt1 = b_.CreateBitCast(t1, ity);
    Value* s1 = b_.CreateBitCast(b_.CreateShl(bt1, 23), ty);
    Value* s2 = b_.CreateBitCast(b_.CreateShl(b_.CreateSub(bt, bt1), 23), ty);
    return b_.CreateFMul(b_.CreateFMul(y, s1), s2);
}

// exp(-z) as sigmoid's 1 / (1 + exp(-z)) needs it: the same reduction and polynomial as
// exp_f32 with one scale factor 2^n, z clamped to [-89, 87]. Above 87 the result is exp(-87)
// ~ 1.6e-38, not exp(-z), where 1 + e is 1 all the same, and n >= -126 keeps 2^n normal, so
// that its bits are t's shifted (no integer subtract and max: 4% fewer instructions in a
// SiLU). From z ~ -88.37 down (n = 128: the exponent field all ones) the factor is inf, so
// 1 / (1 + e) is 0 where sigmoid(z) lies below the smallest normal float (as the
// interpreter's subnormal results flushed to 0; sigmoid(-inf) = 0, silu(-inf) = -inf * 0 =
// NaN as in the interpreter). One formula for both signs: for z < 0 it divides by
// 1 + exp(|z|), whose relative error (~2.5 ulp) the quotient keeps, so that the stable
// form's select between 1 / (1 + e) and e / (1 + e) (a compare, a blend and a multiply on
// the pipes a SiLU epilogue saturates) is not needed. The polynomial is one degree below
// exp_f32's (kExpSigmoidP): one FMA fewer ran a SiLU 6% faster in a depthwise conv's
// epilogue at 256 bits and 2.5% at 512 (144 channels at 56 x 56, 0.309 -> 0.290 ms and
// 0.244 -> 0.238; 1 thread, AMD EPYC Zen 4), for a worst case of 3 ulp instead of 2
// against double (the range tests; bound 4).
//
// z enters unnegated: the reduction runs on q = -r (q = z + n ln2, the FMAs' constants
// negated, exact as rounding is symmetric) and the polynomial in q, so the values are bit
// for bit those of exp(x) at x = -z, without the negation's instruction on the chain. With `nan_in_numerator` (the caller divides z
// itself, or a value NaN wherever z is, by 1 + e: SiLU's z / (1 + exp(-z))) the clamps are
// two integer minimums on z's bits, which AMD's cores run beside the FMA pipes a SiLU
// saturates (float min and max share those two): unsigned min with -89's bits bounds the
// negative floats (larger magnitude, larger bits), then signed min with 87's the positive
// (a negative float's bits are negative as signed integers). NaN comes out clamped there,
// and reaches the result through the numerator; otherwise the selects keep it (through r).
// A SiLU loop written with intrinsics, AMD EPYC Zen 4, 256 bits, L1-resident: 0.287 ->
// 0.263 ns per element (the negation alone 0.284, the integer clamps alone 0.283); the
// 16 -> 96 1x1 conv at 112 x 112 with SiLU under KILN_CPU_ISA=avx2, 1 thread: 0.858 -> 0.804
// ms (three interleaved runs each, 0.86-0.87 -> 0.80-0.85).
Value* OpEmitter::exp_sigmoid_f32(Value* z, bool nan_in_numerator) {
    llvm::Type* ty = z->getType();
    Value* zc;
    if (nan_in_numerator) {
        llvm::Type* ity = lanes_of(b_.getInt32Ty());
        Value* bits = b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, b_.CreateBitCast(z, ity),
                                               llvm::ConstantInt::get(ity, 0xC2B20000u));  // -89.0f
        bits = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, bits, llvm::ConstantInt::get(ity, 0x42AE0000u));  // 87.0f
        zc = b_.CreateBitCast(bits, ty);
    } else {
        zc = b_.CreateSelect(b_.CreateFCmpOLT(z, fconst(ty, -89.0)), fconst(ty, -89.0), z);
        zc = b_.CreateSelect(b_.CreateFCmpOGT(zc, fconst(ty, 87.0)), fconst(ty, 87.0), zc);
    }
    constexpr double magic = 12582912.0;  // t = magic + 127 + n, n = round(-z log2e) (see exp_f32)
    Value* t = fma(zc, fconst(ty, -1.44269504088896341), fconst(ty, magic + 127.0));
    Value* n = b_.CreateFSub(t, fconst(ty, magic + 127.0));
    Value* q = fma(n, fconst(ty, 0.693359375), zc);  // q = -r, r = -z - n ln2
    q = fma(n, fconst(ty, -2.12194440e-4), q);
    // Horner in q with the coefficients c_k (-1)^(k+1): after step k its value is (-1)^(k+1)
    // times Horner's in r, the last one -p(r), so that y = 1 + r p(r) = 1 + q (-p(r)).
    constexpr std::size_t kN = std::size(kExpSigmoidP);
    float neg[kN];
    for (std::size_t k = 0; k < kN; ++k) neg[k] = (k % 2 == 0) ? -kExpSigmoidP[k] : kExpSigmoidP[k];
    Value* y = fma(horner(neg, q), q, fconst(ty, 1.0));
    // 127 + n in [1, 255], the low bits of t, shifted left by 23 (magic's bits fall off the
    // top) are the bits of 2^n (inf for n = 128).
    llvm::Type* ity = lanes_of(b_.getInt32Ty());
    return b_.CreateFMul(y, b_.CreateBitCast(b_.CreateShl(b_.CreateBitCast(t, ity), 23), ty));
}

// Max error 0.83 ulp; log(<0) = NaN, log(±0) = -inf, log(inf) = inf, subnormals handled.
Value* OpEmitter::log_f32(Value* x) {
    llvm::Type* ty = x->getType();
    llvm::Type* i32 = lanes_of(b_.getInt32Ty());
    Value* sub = b_.CreateFCmpOLT(x, fconst(ty, 1.17549435e-38));
    Value* xs = b_.CreateSelect(sub, b_.CreateFMul(x, fconst(ty, 8388608.0)), x);
    Value* bits = b_.CreateBitCast(xs, i32);
    Value* e = b_.CreateSub(b_.CreateAnd(b_.CreateLShr(bits, 23), u32(0xff)),
                            b_.CreateSelect(sub, u32(126 + 23), u32(126)));
    Value* m = b_.CreateBitCast(b_.CreateOr(b_.CreateAnd(bits, u32(0x7fffff)), u32(0x3f000000)), ty);
    Value* lt = b_.CreateFCmpOLT(m, fconst(ty, 0.707106781186547524));
    Value* ef = b_.CreateSIToFP(b_.CreateSub(e, b_.CreateZExt(lt, i32)), ty);
    Value* t = b_.CreateFSub(b_.CreateSelect(lt, b_.CreateFAdd(m, m), m), fconst(ty, 1.0));
    Value* z = b_.CreateFMul(t, t);
    Value* y = b_.CreateFMul(b_.CreateFMul(t, z), horner(kLogP, t));
    y = fma(ef, fconst(ty, -2.12194440e-4), y);
    y = fma(z, fconst(ty, -0.5), y);
    Value* r = fma(ef, fconst(ty, 0.693359375), b_.CreateFAdd(t, y));
    r = b_.CreateSelect(b_.CreateFCmpOEQ(x, fconst(ty, std::numeric_limits<double>::infinity())), x, r);
    r = b_.CreateSelect(b_.CreateFCmpOEQ(x, fconst(ty, 0.0)), fconst(ty, -std::numeric_limits<double>::infinity()), r);
    r = b_.CreateSelect(b_.CreateFCmpOLT(x, fconst(ty, 0.0)), fconst(ty, std::numeric_limits<double>::quiet_NaN()), r);
    return b_.CreateSelect(isnan(x), x, r);
}

// Within 2 ulp of the interpreter (tier test); odd (tanh(-0) = -0), NaN stays NaN.
Value* OpEmitter::tanh_f32(Value* x) {
    llvm::Type* ty = x->getType();
    Value* a = b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
    Value* z = b_.CreateFMul(a, a);
    Value* small = fma(b_.CreateFMul(a, z), horner(kTanhP, z), a);
    // |x| >= 0.625: (1 - e) / (1 + e) with e = exp(-2|x|) in [0, 0.29], so the
    // denominator lies in [1, 2] (tanh(inf) = 1 falls out of e = 0).
    Value* e = exp_f32(b_.CreateFNeg(b_.CreateFAdd(a, a)));
    Value* large = b_.CreateFDiv(b_.CreateFSub(fconst(ty, 1.0), e), b_.CreateFAdd(fconst(ty, 1.0), e));
    Value* r = b_.CreateSelect(b_.CreateFCmpOLT(a, fconst(ty, 0.625)), small, large);
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, r, x);
}

// Max error 2.44 ulp; odd, erf(±inf) = ±1, NaN stays NaN.
Value* OpEmitter::erf_f32(Value* x) {
    llvm::Type* ty = x->getType();
    Value* a = b_.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x),
                                        fconst(ty, 4.0));
    Value* y = b_.CreateFMul(a, a);
    Value* small = b_.CreateFMul(a, horner(kErfA, y));
    Value* v = b_.CreateFSub(b_.CreateFDiv(fconst(ty, 1.0), a), fconst(ty, 0.625));
    Value* large = b_.CreateFSub(fconst(ty, 1.0), b_.CreateFMul(exp_f32(b_.CreateFNeg(y)), horner(kErfB, v)));
    Value* r = b_.CreateSelect(b_.CreateFCmpOLT(a, fconst(ty, 1.0)), small, large);
    r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, r, x);
    return b_.CreateSelect(isnan(x), x, r);
}

// Max error 1.56 ulp for |x| <= 1e7 (all floats measured), accurate to ~1e12 (sampled);
// sin(±0) = ±0; ±inf and NaN give NaN; past ~1e14 a value in [-1, 1], not sin(x).
Value* OpEmitter::sincos_f32(Value* x, bool cosine) {
    llvm::Type* ty = x->getType();
    llvm::Type* d = lanes_of(b_.getDoubleTy());
    Value* xd = b_.CreateFPExt(x, d);
    Value* j = b_.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, b_.CreateFMul(xd, fconst(d, 0.63661977236758134308)));
    Value* nj = b_.CreateFNeg(j);
    Value* r = fma(nj, fconst(d, 1.57079632673412561417e+00), xd);
    r = fma(nj, fconst(d, 6.07710050650619224932e-11), r);
    // The quadrant: saturating conversion, defined for every j (NaN gives 0).
    Value* q = b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {lanes_of(b_.getInt32Ty()), d}, {j});
    if (cosine) q = b_.CreateAdd(q, u32(1));
    // Past |x| ~ 1e14 the reduction is meaningless: keep r in range so that the result is
    // at least a value in [-1, 1] (the interpreter reduces exactly; see codegen.h).
    r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, r, fconst(d, -0.7853981633974483));
    r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, r, fconst(d, 0.7853981633974483));
    Value* rf = b_.CreateFPTrunc(r, ty);
    Value* z = b_.CreateFMul(rf, rf);
    Value* s = fma(b_.CreateFMul(rf, z), horner(kSinP, z), rf);
    Value* c = fma(b_.CreateFMul(z, z), horner(kCosP, z), fma(fconst(ty, -0.5), z, fconst(ty, 1.0)));
    Value* v = b_.CreateSelect(b_.CreateICmpNE(b_.CreateAnd(q, u32(1)), u32(0)), c, s);
    v = b_.CreateSelect(b_.CreateICmpNE(b_.CreateAnd(q, u32(2)), u32(0)), b_.CreateFNeg(v), v);
    if (!cosine) v = b_.CreateSelect(b_.CreateFCmpOEQ(x, fconst(ty, 0.0)), x, v);
    // ±inf and NaN give NaN (the clamp above turned them into numbers).
    Value* bad = b_.CreateFCmpUGE(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x),
                                  fconst(ty, std::numeric_limits<double>::infinity()));
    return b_.CreateSelect(bad, b_.CreateFSub(x, x), v);
}

}  // namespace kiln::tiers::llvm_tier
