// f32 transcendental functions as lane-wise sequences (see vmath.h). The reductions and
// polynomial coefficients are the ones tier 2 inlines (tiers/llvm/vmath.cpp explains where
// they come from and how accurate they are), so both tiers compute the same approximations.
#include "tiers/asmjit/vmath.h"
#include "src/cpu/vmath_coeffs.h"

#include <cstddef>
#include <limits>

namespace kiln::tiers::asmjit_tier {
namespace {

using namespace cpu::vmath;  // the coefficients (src/cpu/vmath_coeffs.h)

template <std::size_t N> F horner(LaneOps& o, const float (&c)[N], F x) {
    F p = o.constant(c[0]);
    for (std::size_t i = 1; i < N; ++i) p = o.fma(p, x, o.constant(c[i]));
    return p;
}

}  // namespace

F vabs(LaneOps& o, F x) { return o.bit_and(x, o.bits(0x7fffffffu)); }
F vneg(LaneOps& o, F x) { return o.bit_xor(x, o.bits(0x80000000u)); }
F vcopysign(LaneOps& o, F mag, F sign) {
    return o.bit_or(o.bit_and(mag, o.bits(0x7fffffffu)), o.bit_and(sign, o.bits(0x80000000u)));
}
K visnan(LaneOps& o, F x) { return o.cmp(x, x, Cmp::unord_q); }

F vexp(LaneOps& o, F x) {
    // Clamps that keep NaN (it reaches the result through r, no select at the end).
    F xc = o.max_x86(o.constant(-104.0f), x);
    xc = o.min_x86(o.constant(89.0f), xc);
    // t = magic + 254 + n, t1 = magic + 127 + n1 in their low bits (1.5 * 2^23 rounds to an
    // integer); 2^n = 2^n1 * 2^n2 from the bits shifted into the exponent field.
    constexpr float magic = 12582912.0f;
    F t = o.fma(xc, o.constant(1.44269504088896341f), o.constant(magic + 254.0f));
    F t1 = o.fma(xc, o.constant(0.5f * 1.44269504088896341f), o.constant(magic + 127.0f));
    F n = o.sub(t, o.constant(magic + 254.0f));
    F r = o.fma(n, o.constant(-0.693359375f), xc);
    r = o.fma(n, o.constant(2.12194440e-4f), r);
    F y = o.fma(horner(o, kExpP, r), r, o.constant(1.0f));
    F s1 = o.shl_i32(t1, 23);
    F s2 = o.shl_i32(o.sub_i32(t, t1), 23);
    return o.mul(o.mul(y, s1), s2);
}

F vlog(LaneOps& o, F x) {
    constexpr float inf = std::numeric_limits<float>::infinity();
    K sub = o.cmp(x, o.constant(1.17549435e-38f), Cmp::lt_os);
    F xs = o.select(sub, o.mul(x, o.constant(8388608.0f)), x);
    F e = o.sub_i32(o.bit_and(o.shr_i32(xs, 23), o.bits(0xff)), o.select(sub, o.bits(126 + 23), o.bits(126)));
    F m = o.bit_or(o.bit_and(xs, o.bits(0x7fffff)), o.bits(0x3f000000));
    K lt = o.cmp(m, o.constant(0.707106781186547524f), Cmp::lt_os);
    F ef = o.from_i32(o.sub_i32(e, o.select(lt, o.bits(1), o.bits(0))));
    F t = o.sub(o.select(lt, o.add(m, m), m), o.constant(1.0f));
    F z = o.mul(t, t);
    F y = o.mul(o.mul(t, z), horner(o, kLogP, t));
    y = o.fma(ef, o.constant(-2.12194440e-4f), y);
    y = o.fma(z, o.constant(-0.5f), y);
    F r = o.fma(ef, o.constant(0.693359375f), o.add(t, y));
    r = o.select(o.cmp(x, o.constant(inf), Cmp::eq_oq), x, r);
    r = o.select(o.cmp(x, o.constant(0.0f), Cmp::eq_oq), o.constant(-inf), r);
    r = o.select(o.cmp(x, o.constant(0.0f), Cmp::lt_os), o.constant(std::numeric_limits<float>::quiet_NaN()), r);
    return o.select(visnan(o, x), x, r);
}

F vtanh(LaneOps& o, F x) {
    F a = vabs(o, x);
    F z = o.mul(a, a);
    F small = o.fma(o.mul(a, z), horner(o, kTanhP, z), a);
    // |x| >= 0.625: (1 - e) / (1 + e) with e = exp(-2|x|), as tier 2 computes it.
    F e = vexp(o, vneg(o, o.add(a, a)));
    F large = o.div(o.sub(o.constant(1.0f), e), o.add(o.constant(1.0f), e));
    F r = o.select(o.cmp(a, o.constant(0.625f), Cmp::lt_os), small, large);
    return vcopysign(o, r, x);
}

F verf(LaneOps& o, F x) {
    F a = o.min_x86(vabs(o, x), o.constant(4.0f));
    F y = o.mul(a, a);
    F small = o.mul(a, horner(o, kErfA, y));
    F v = o.sub(o.div(o.constant(1.0f), a), o.constant(0.625f));
    F large = o.sub(o.constant(1.0f), o.mul(vexp(o, vneg(o, y)), horner(o, kErfB, v)));
    F r = o.select(o.cmp(a, o.constant(1.0f), Cmp::lt_os), small, large);
    r = vcopysign(o, r, x);
    return o.select(visnan(o, x), x, r);
}

F vsigmoid(LaneOps& o, F x) {
    // e = exp(-|x|); x >= 0 ? 1 / (1 + e) : e / (1 + e) (computed as e * that).
    F e = vexp(o, vneg(o, vabs(o, x)));
    F r = o.div(o.constant(1.0f), o.add(o.constant(1.0f), e));
    return o.select(o.cmp(x, o.constant(0.0f), Cmp::ge_os), r, o.mul(e, r));
}

F vgelu_tanh(LaneOps& o, F x) {
    // 0.5 * x * (1 + tanh(u)) == x * sigmoid(2u): one exp and one division.
    F x3 = o.mul(o.mul(o.mul(o.constant(0.044715f), x), x), x);
    F u = o.mul(o.constant(0.79788456080286535588f), o.add(x, x3));
    return o.mul(x, vsigmoid(o, o.add(u, u)));
}

F vgelu_erf(LaneOps& o, F x) {
    F er = verf(o, o.mul(x, o.constant(0.70710678118654752440f)));
    return o.mul(o.mul(o.constant(0.5f), x), o.add(o.constant(1.0f), er));
}

F vsilu(LaneOps& o, F x) { return o.mul(x, vsigmoid(o, x)); }

}  // namespace kiln::tiers::asmjit_tier
