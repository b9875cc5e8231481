#pragma once
// The meaning of every elementwise op on one scalar: one formula per op, in one place. The
// interpreter's kernels (tiers/interp/elementwise.cpp), the KIR evaluator (src/kir/eval.cpp)
// and the functions that tier 1's code calls for f64 and libm ops (tiers/asmjit/callouts.cpp)
// all compute with these, so they agree bit for bit. The code the tiers inline (LLVM IR,
// x86 sequences, the f32 polynomials of src/cpu/vmath_coeffs.h) implements the same
// formulas, exactly where the tier documents it and within the tier tests' tolerance where
// it approximates.
//
// Each function computes in the type of its arguments: float or double for the floating
// ops (f16 and bf16 compute in float: core::compute_t), the integer type itself for the
// integer ops. Casts are core::convert (element.h).
//
// Floating point:
// - every unary op gives NaN for NaN (relu and sign included); relu(-0) = +0, sign(±0) = +0;
// - round is half to even (std::nearbyint in the default rounding mode);
// - sigmoid never overflows in exp (a form for each sign); silu(x) = x * sigmoid(x);
//   gelu has an erf form and a tanh form;
// - maximum/minimum propagate NaN (the first NaN operand is returned); for equal operands
//   (-0 and +0 included) the first operand is returned;
// - clamp(x, lo, hi) = x < lo ? lo : (x > hi ? hi : x), so NaN stays NaN;
// - comparisons follow IEEE: NaN compares unequal to everything (ne(NaN, NaN) is true).
// Integers (two's complement; computed in uint64_t where C++ would overflow):
// - add, sub, mul, neg and abs wrap around: abs(INT_MIN) == -INT_MIN == INT_MIN;
// - division truncates toward zero; x / 0 == 0 for every x; INT_MIN / -1 == INT_MIN;
// - unsigned: abs and relu are the identity, sign is 0 or 1;
// - bool compares as false < true.
// Tests: tests/test_ops_elementwise.cpp checks these against a double-precision reference on
// edge values (NaN, infinities, signed zeros, tiny and huge values).
#include "src/core/element.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace kiln::core::scalar {

namespace detail {
template <class T> T wrap_neg(T v) { return static_cast<T>(std::uint64_t(0) - static_cast<std::uint64_t>(v)); }
}  // namespace detail

// ---- unary ----

template <class T> T neg(T v) {
    if constexpr (std::is_floating_point_v<T>) return -v;
    else return detail::wrap_neg(v);
}
template <class T> T abs(T v) {
    if constexpr (std::is_floating_point_v<T>) return std::fabs(v);
    else if constexpr (std::is_signed_v<T>) return v < 0 ? detail::wrap_neg(v) : v;
    else return v;
}
template <class T> T relu(T v) {
    if constexpr (std::is_floating_point_v<T>) return v > T(0) ? v : (std::isnan(v) ? v : T(0));
    else if constexpr (std::is_signed_v<T>) return v > 0 ? v : T(0);
    else return v;
}
template <class T> T sign(T v) {
    if constexpr (std::is_floating_point_v<T>) return v > T(0) ? T(1) : v < T(0) ? T(-1) : std::isnan(v) ? v : T(0);
    else if constexpr (std::is_signed_v<T>) return static_cast<T>((v > 0) - (v < 0));
    else return static_cast<T>(v != 0);
}
inline bool logical_not(bool v) { return !v; }

// Floating only (C is float or double).
template <class C> C exp(C v) { return std::exp(v); }
template <class C> C log(C v) { return std::log(v); }
template <class C> C sqrt(C v) { return std::sqrt(v); }
template <class C> C rsqrt(C v) { return C(1) / std::sqrt(v); }
template <class C> C reciprocal(C v) { return C(1) / v; }
template <class C> C sin(C v) { return std::sin(v); }
template <class C> C cos(C v) { return std::cos(v); }
template <class C> C tanh(C v) { return std::tanh(v); }
template <class C> C erf(C v) { return std::erf(v); }
template <class C> C floor(C v) { return std::floor(v); }
template <class C> C ceil(C v) { return std::ceil(v); }
template <class C> C round(C v) { return std::nearbyint(v); }  // half to even
template <class C> C sigmoid(C v) {
    // Stable for both signs: exp never overflows.
    if (v >= C(0)) return C(1) / (C(1) + std::exp(-v));
    C e = std::exp(v);
    return e / (C(1) + e);
}
template <class C> C silu(C v) { return v * sigmoid(v); }
template <class C> C gelu_erf(C v) { return C(0.5) * v * (C(1) + std::erf(v * C(0.70710678118654752440))); }
template <class C> C gelu_tanh(C v) {
    const C k = C(0.79788456080286535588);  // sqrt(2 / pi)
    return C(0.5) * v * (C(1) + std::tanh(k * (v + C(0.044715) * v * v * v)));
}

// lo and hi are the bounds as clamp_bound gives them.
template <class T> T clamp(T v, T lo, T hi) { return v < lo ? lo : (v > hi ? hi : v); }
// A bound of clamp (an attribute, a double) as every tier uses it: converted to the operand's
// dtype T (saturating for integers), then to T's compute type.
template <class T> compute_t<T> clamp_bound(double v) { return static_cast<compute_t<T>>(convert<T>(v)); }

// ---- binary ----

template <class T> T add(T x, T y) {
    if constexpr (std::is_floating_point_v<T>) return x + y;
    else return static_cast<T>(static_cast<std::uint64_t>(x) + static_cast<std::uint64_t>(y));
}
template <class T> T sub(T x, T y) {
    if constexpr (std::is_floating_point_v<T>) return x - y;
    else return static_cast<T>(static_cast<std::uint64_t>(x) - static_cast<std::uint64_t>(y));
}
template <class T> T mul(T x, T y) {
    if constexpr (std::is_floating_point_v<T>) return x * y;
    else return static_cast<T>(static_cast<std::uint64_t>(x) * static_cast<std::uint64_t>(y));
}
template <class T> T div(T x, T y) {
    if constexpr (std::is_floating_point_v<T>) {
        return x / y;
    } else {
        if (y == 0) return T(0);
        if constexpr (std::is_signed_v<T>)
            if (y == T(-1)) return detail::wrap_neg(x);
        return static_cast<T>(x / y);
    }
}
template <class C> C pow(C x, C y) { return std::pow(x, y); }  // floating only
template <class T> T maximum(T x, T y) {
    if constexpr (std::is_floating_point_v<T>) return std::isnan(x) ? x : std::isnan(y) ? y : (y > x ? y : x);
    else return y > x ? y : x;
}
template <class T> T minimum(T x, T y) {
    if constexpr (std::is_floating_point_v<T>) return std::isnan(x) ? x : std::isnan(y) ? y : (y < x ? y : x);
    else return y < x ? y : x;
}

template <class T> bool eq(T x, T y) { return x == y; }
template <class T> bool ne(T x, T y) { return x != y; }
template <class T> bool lt(T x, T y) { return x < y; }
template <class T> bool le(T x, T y) { return x <= y; }
template <class T> bool gt(T x, T y) { return x > y; }
template <class T> bool ge(T x, T y) { return x >= y; }

}  // namespace kiln::core::scalar
