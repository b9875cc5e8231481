// Elementwise kernels: unary ops, cast, binary arithmetic, comparisons and where.
//
// Semantics (the interpreter is the specification):
// - Operands are broadcast to out_shape (NumPy rules) through stride-0 views; any strides.
// - Arithmetic runs in compute_t<T> (float for f16/bf16, T otherwise) and the result is
//   rounded once to the output dtype.
// - Integers: add/sub/mul/neg/abs wrap around (two's complement, computed in uint64_t, so
//   abs(INT_MIN) == INT_MIN and -INT_MIN == INT_MIN); division truncates toward zero;
//   x / 0 == 0 for every integer x (there is no trap); INT_MIN / -1 == INT_MIN (wraps).
// - maximum/minimum propagate NaN (either operand NaN gives NaN; the first NaN operand is
//   returned); for equal operands (including -0.0 vs +0.0) the first operand is returned.
// - relu(NaN) = NaN, relu(-0.0) = +0.0; sign(±0) = +0, sign(NaN) = NaN.
// - round is half-to-even (std::nearbyint in the default rounding mode).
// - clamp: lo and hi are first converted to the operand dtype (saturating for integers),
//   then x < lo ? lo : (x > hi ? hi : x), so NaN stays NaN.
// - cast uses core::convert: float -> integer truncates toward zero and saturates, NaN -> 0;
//   integer -> narrower integer wraps (two's complement); anything -> bool is x != 0 (NaN ->
//   true); bool -> number is 0 or 1.
// - Comparisons on floating operands follow IEEE (NaN compares unequal to everything, so
//   ne(NaN, NaN) is true). bool operands compare as false < true.
#include "src/core/strided.h"
#include "src/support/check.h"
#include "tiers/interp/kernels.h"

#include <array>
#include <cmath>
#include <type_traits>

namespace kiln::interp {
namespace {

using I64 = std::int64_t;
using U64 = std::uint64_t;
template <std::size_t K> using Arr = std::array<I64, K>;

// out = f(in) elementwise; `in` has out's shape (any strides). f maps storage to storage.
template <class O, class T, class F> void map1(const Tensor& out, const Tensor& in, F f) {
    O* po = static_cast<O*>(out.data());
    const T* pi = static_cast<const T*>(in.data());
    core::parallel_for_each_row<2>(out.shape(), {&out.strides(), &in.strides()},
                                   [&](I64 n, const Arr<2>& off, const Arr<2>& step) {
                                       O* o = po + off[0];
                                       const T* i = pi + off[1];
                                       if (step[0] == 1 && step[1] == 1) {
                                           for (I64 k = 0; k < n; ++k) o[k] = f(i[k]);
                                       } else {
                                           for (I64 k = 0; k < n; ++k) o[k * step[0]] = f(i[k * step[1]]);
                                       }
                                   });
}

template <class O, class T, class F> void map2(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
    O* po = static_cast<O*>(out.data());
    const T* pa = static_cast<const T*>(a.data());
    const T* pb = static_cast<const T*>(b.data());
    core::parallel_for_each_row<3>(out.shape(), {&out.strides(), &a.strides(), &b.strides()},
                                   [&](I64 n, const Arr<3>& off, const Arr<3>& step) {
                                       O* o = po + off[0];
                                       const T* x = pa + off[1];
                                       const T* y = pb + off[2];
                                       if (step[0] == 1 && step[1] == 1 && step[2] == 1) {
                                           for (I64 k = 0; k < n; ++k) o[k] = f(x[k], y[k]);
                                       } else if (step[0] == 1 && step[1] == 1 && step[2] == 0) {
                                           const T s = *y;  // a row against a broadcast scalar
                                           for (I64 k = 0; k < n; ++k) o[k] = f(x[k], s);
                                       } else {
                                           for (I64 k = 0; k < n; ++k)
                                               o[k * step[0]] = f(x[k * step[1]], y[k * step[2]]);
                                       }
                                   });
}

// ---- unary ----

template <class C> C sigmoid_of(C v) {
    // Stable for both signs: exp never overflows.
    if (v >= C(0)) return C(1) / (C(1) + std::exp(-v));
    C e = std::exp(v);
    return e / (C(1) + e);
}

template <class T> void float_unary(ir::Op op, const ir::Attrs& attrs, const Tensor& out, const Tensor& x) {
    using C = core::compute_t<T>;
    auto go = [&](auto g) { map1<T, T>(out, x, [g](T v) { return st<T>(g(ld<T>(v))); }); };
    switch (op) {
    case ir::Op::neg: go([](C v) { return -v; }); break;
    case ir::Op::abs: go([](C v) { return std::fabs(v); }); break;
    case ir::Op::exp: go([](C v) { return std::exp(v); }); break;
    case ir::Op::log: go([](C v) { return std::log(v); }); break;
    case ir::Op::sqrt: go([](C v) { return std::sqrt(v); }); break;
    case ir::Op::rsqrt: go([](C v) { return C(1) / std::sqrt(v); }); break;
    case ir::Op::reciprocal: go([](C v) { return C(1) / v; }); break;
    case ir::Op::sin: go([](C v) { return std::sin(v); }); break;
    case ir::Op::cos: go([](C v) { return std::cos(v); }); break;
    case ir::Op::tanh: go([](C v) { return std::tanh(v); }); break;
    case ir::Op::sigmoid: go([](C v) { return sigmoid_of(v); }); break;
    case ir::Op::relu: go([](C v) { return v > C(0) ? v : (std::isnan(v) ? v : C(0)); }); break;
    case ir::Op::gelu:
        if (attrs.i("approx") == 0) {
            go([](C v) { return C(0.5) * v * (C(1) + std::erf(v * C(0.70710678118654752440))); });
        } else {
            go([](C v) {
                const C k = C(0.79788456080286535588);  // sqrt(2 / pi)
                return C(0.5) * v * (C(1) + std::tanh(k * (v + C(0.044715) * v * v * v)));
            });
        }
        break;
    case ir::Op::silu: go([](C v) { return v * sigmoid_of(v); }); break;
    case ir::Op::erf: go([](C v) { return std::erf(v); }); break;
    case ir::Op::floor: go([](C v) { return std::floor(v); }); break;
    case ir::Op::ceil: go([](C v) { return std::ceil(v); }); break;
    case ir::Op::round: go([](C v) { return std::nearbyint(v); }); break;
    case ir::Op::sign:
        go([](C v) { return v > C(0) ? C(1) : v < C(0) ? C(-1) : std::isnan(v) ? v : C(0); });
        break;
    case ir::Op::clamp: {
        const C lo = ld<T>(core::convert<T>(attrs.f("lo"))), hi = ld<T>(core::convert<T>(attrs.f("hi")));
        go([lo, hi](C v) { return v < lo ? lo : (v > hi ? hi : v); });
        break;
    }
    default: KILN_UNREACHABLE("interp: " << ir::op_name(op) << " has no floating kernel");
    }
}

template <class T> void int_unary(ir::Op op, const ir::Attrs& attrs, const Tensor& out, const Tensor& x) {
    auto go = [&](auto g) { map1<T, T>(out, x, g); };
    switch (op) {
    case ir::Op::neg: go([](T v) { return static_cast<T>(U64(0) - static_cast<U64>(v)); }); break;
    case ir::Op::abs:
        if constexpr (std::is_signed_v<T>) go([](T v) { return v < 0 ? static_cast<T>(U64(0) - static_cast<U64>(v)) : v; });
        else go([](T v) { return v; });
        break;
    case ir::Op::relu:
        if constexpr (std::is_signed_v<T>) go([](T v) { return v > 0 ? v : T(0); });
        else go([](T v) { return v; });
        break;
    case ir::Op::sign:
        if constexpr (std::is_signed_v<T>) go([](T v) { return static_cast<T>((v > 0) - (v < 0)); });
        else go([](T v) { return static_cast<T>(v != 0); });
        break;
    case ir::Op::clamp: {
        const T lo = core::convert<T>(attrs.f("lo")), hi = core::convert<T>(attrs.f("hi"));
        go([lo, hi](T v) { return v < lo ? lo : (v > hi ? hi : v); });
        break;
    }
    default: KILN_UNREACHABLE("interp: " << ir::op_name(op) << " has no integer kernel");
    }
}

// ---- binary ----

template <class T> void float_binary(ir::Op op, const Tensor& out, const Tensor& a, const Tensor& b) {
    using C = core::compute_t<T>;
    auto go = [&](auto g) { map2<T, T>(out, a, b, [g](T x, T y) { return st<T>(g(ld<T>(x), ld<T>(y))); }); };
    switch (op) {
    case ir::Op::add: go([](C x, C y) { return x + y; }); break;
    case ir::Op::sub: go([](C x, C y) { return x - y; }); break;
    case ir::Op::mul: go([](C x, C y) { return x * y; }); break;
    case ir::Op::div: go([](C x, C y) { return x / y; }); break;
    case ir::Op::pow: go([](C x, C y) { return std::pow(x, y); }); break;
    case ir::Op::maximum:
        go([](C x, C y) { return std::isnan(x) ? x : std::isnan(y) ? y : (y > x ? y : x); });
        break;
    case ir::Op::minimum:
        go([](C x, C y) { return std::isnan(x) ? x : std::isnan(y) ? y : (y < x ? y : x); });
        break;
    default: KILN_UNREACHABLE("interp: " << ir::op_name(op) << " has no floating kernel");
    }
}

template <class T> void int_binary(ir::Op op, const Tensor& out, const Tensor& a, const Tensor& b) {
    auto go = [&](auto g) { map2<T, T>(out, a, b, g); };
    switch (op) {
    case ir::Op::add: go([](T x, T y) { return static_cast<T>(static_cast<U64>(x) + static_cast<U64>(y)); }); break;
    case ir::Op::sub: go([](T x, T y) { return static_cast<T>(static_cast<U64>(x) - static_cast<U64>(y)); }); break;
    case ir::Op::mul: go([](T x, T y) { return static_cast<T>(static_cast<U64>(x) * static_cast<U64>(y)); }); break;
    case ir::Op::div:
        go([](T x, T y) -> T {
            if (y == 0) return T(0);
            if constexpr (std::is_signed_v<T>)
                if (y == T(-1)) return static_cast<T>(U64(0) - static_cast<U64>(x));
            return static_cast<T>(x / y);
        });
        break;
    case ir::Op::maximum: go([](T x, T y) { return y > x ? y : x; }); break;
    case ir::Op::minimum: go([](T x, T y) { return y < x ? y : x; }); break;
    default: KILN_UNREACHABLE("interp: " << ir::op_name(op) << " has no integer kernel");
    }
}

template <class T> void compare(ir::Op op, const Tensor& out, const Tensor& a, const Tensor& b) {
    auto go = [&](auto g) { map2<bool, T>(out, a, b, [g](T x, T y) { return g(ld<T>(x), ld<T>(y)); }); };
    switch (op) {
    case ir::Op::eq: go([](auto x, auto y) { return x == y; }); break;
    case ir::Op::ne: go([](auto x, auto y) { return x != y; }); break;
    case ir::Op::lt: go([](auto x, auto y) { return x < y; }); break;
    case ir::Op::le: go([](auto x, auto y) { return x <= y; }); break;
    case ir::Op::gt: go([](auto x, auto y) { return x > y; }); break;
    case ir::Op::ge: go([](auto x, auto y) { return x >= y; }); break;
    default: KILN_UNREACHABLE("interp: " << ir::op_name(op) << " is not a comparison");
    }
}

}  // namespace

Tensor unary(const ir::Node& node, const Tensor& x, const Shape& out_shape) {
    KILN_CHECK(x.shape() == out_shape, "interp: " << ir::op_name(node.op) << ": operand shape "
                                                  << shape_to_string(x.shape()) << " != output shape "
                                                  << shape_to_string(out_shape));
    if (node.op == ir::Op::cast) {
        Tensor out = Tensor::empty(out_shape, node.attrs.dtype("dtype"));
        out.copy_from(x);  // core::convert per element
        return out;
    }
    Tensor out = Tensor::empty(out_shape, x.dtype());
    core::dispatch(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, bool>) {
            KILN_CHECK(node.op == ir::Op::logical_not, "interp: " << ir::op_name(node.op) << " on bool");
            map1<bool, bool>(out, x, [](bool v) { return !v; });
        } else if constexpr (std::is_floating_point_v<core::compute_t<T>>) {
            float_unary<T>(node.op, node.attrs, out, x);
        } else {
            int_unary<T>(node.op, node.attrs, out, x);
        }
    });
    return out;
}

Tensor binary(const ir::Node& node, const Tensor& a, const Tensor& b, const Shape& out_shape) {
    KILN_CHECK(a.dtype() == b.dtype(), "interp: " << ir::op_name(node.op) << ": operand dtypes differ");
    const Tensor av = a.broadcast_to(out_shape), bv = b.broadcast_to(out_shape);
    const bool cmp = ir::op_kind(node.op) == ir::OpKind::Compare;
    Tensor out = Tensor::empty(out_shape, cmp ? DType::boolean : a.dtype());
    core::dispatch(a.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if (cmp) {
            compare<T>(node.op, out, av, bv);
        } else if constexpr (std::is_same_v<T, bool>) {
            KILN_UNREACHABLE("interp: " << ir::op_name(node.op) << " on bool");
        } else if constexpr (std::is_floating_point_v<core::compute_t<T>>) {
            float_binary<T>(node.op, out, av, bv);
        } else {
            int_binary<T>(node.op, out, av, bv);
        }
    });
    return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, const Shape& out_shape) {
    KILN_CHECK(cond.dtype() == DType::boolean && a.dtype() == b.dtype(), "interp: where: bad operand dtypes");
    const Tensor cv = cond.broadcast_to(out_shape), av = a.broadcast_to(out_shape), bv = b.broadcast_to(out_shape);
    Tensor out = Tensor::empty(out_shape, a.dtype());
    core::dispatch(a.dtype(), [&](auto tag) {
        using T = decltype(tag);
        T* po = static_cast<T*>(out.data());
        // The condition is read as bytes: any non-zero byte selects `a` (robust to borrowed
        // boolean memory holding values other than 0 and 1).
        const std::uint8_t* pc = static_cast<const std::uint8_t*>(cv.data());
        const T* pa = static_cast<const T*>(av.data());
        const T* pb = static_cast<const T*>(bv.data());
        core::parallel_for_each_row<4>(out_shape, {&out.strides(), &cv.strides(), &av.strides(), &bv.strides()},
                                       [&](I64 n, const Arr<4>& off, const Arr<4>& step) {
                                           T* o = po + off[0];
                                           const std::uint8_t* c = pc + off[1];
                                           const T* x = pa + off[2];
                                           const T* y = pb + off[3];
                                           for (I64 k = 0; k < n; ++k)
                                               o[k * step[0]] = c[k * step[1]] ? x[k * step[2]] : y[k * step[3]];
                                       });
    });
    return out;
}

}  // namespace kiln::interp
