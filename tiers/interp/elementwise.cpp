// Elementwise kernels: unary ops, cast, binary arithmetic, comparisons and where.
//
// Semantics (the interpreter is the specification):
// - Operands are broadcast to out_shape (NumPy rules) through stride-0 views; any strides.
// - Each op computes its scalar formula from src/core/scalar_ops.h (NaN handling, integer
//   wrap-around and division by zero, round half to even, clamp and comparisons are defined
//   there) in compute_t<T> (float for f16/bf16, T otherwise), and the result is rounded
//   once to the output dtype.
// - cast uses core::convert: float -> integer truncates toward zero and saturates, NaN -> 0;
//   integer -> narrower integer wraps (two's complement); anything -> bool is x != 0 (NaN ->
//   true); bool -> number is 0 or 1.
// - where reads its condition as bytes: any non-zero byte selects the first operand.
#include "src/core/scalar_ops.h"
#include "src/core/strided.h"
#include "src/support/check.h"
#include "tiers/interp/kernels.h"

#include <array>
#include <type_traits>

namespace kiln::interp {
namespace {

using I64 = std::int64_t;
template <std::size_t K> using Arr = std::array<I64, K>;
namespace scalar = core::scalar;

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
// The formulas are core::scalar's (src/core/scalar_ops.h), computed in compute_t<T>.

template <class T> void float_unary(ir::Op op, const ir::Attrs& attrs, const Tensor& out, const Tensor& x) {
    using C = core::compute_t<T>;
    auto go = [&](auto g) { map1<T, T>(out, x, [g](T v) { return st<T>(g(ld<T>(v))); }); };
    switch (op) {
    case ir::Op::neg: go([](C v) { return scalar::neg(v); }); break;
    case ir::Op::abs: go([](C v) { return scalar::abs(v); }); break;
    case ir::Op::exp: go([](C v) { return scalar::exp(v); }); break;
    case ir::Op::log: go([](C v) { return scalar::log(v); }); break;
    case ir::Op::sqrt: go([](C v) { return scalar::sqrt(v); }); break;
    case ir::Op::rsqrt: go([](C v) { return scalar::rsqrt(v); }); break;
    case ir::Op::reciprocal: go([](C v) { return scalar::reciprocal(v); }); break;
    case ir::Op::sin: go([](C v) { return scalar::sin(v); }); break;
    case ir::Op::cos: go([](C v) { return scalar::cos(v); }); break;
    case ir::Op::tanh: go([](C v) { return scalar::tanh(v); }); break;
    case ir::Op::sigmoid: go([](C v) { return scalar::sigmoid(v); }); break;
    case ir::Op::relu: go([](C v) { return scalar::relu(v); }); break;
    case ir::Op::gelu:
        if (attrs.i("approx") == 0) go([](C v) { return scalar::gelu_erf(v); });
        else go([](C v) { return scalar::gelu_tanh(v); });
        break;
    case ir::Op::silu: go([](C v) { return scalar::silu(v); }); break;
    case ir::Op::erf: go([](C v) { return scalar::erf(v); }); break;
    case ir::Op::floor: go([](C v) { return scalar::floor(v); }); break;
    case ir::Op::ceil: go([](C v) { return scalar::ceil(v); }); break;
    case ir::Op::round: go([](C v) { return scalar::round(v); }); break;
    case ir::Op::sign: go([](C v) { return scalar::sign(v); }); break;
    case ir::Op::clamp: {
        const C lo = scalar::clamp_bound<T>(attrs.f("lo")), hi = scalar::clamp_bound<T>(attrs.f("hi"));
        go([lo, hi](C v) { return scalar::clamp(v, lo, hi); });
        break;
    }
    default: KILN_UNREACHABLE("interp: " << ir::op_name(op) << " has no floating kernel");
    }
}

template <class T> void int_unary(ir::Op op, const ir::Attrs& attrs, const Tensor& out, const Tensor& x) {
    auto go = [&](auto g) { map1<T, T>(out, x, g); };
    switch (op) {
    case ir::Op::neg: go([](T v) { return scalar::neg(v); }); break;
    case ir::Op::abs: go([](T v) { return scalar::abs(v); }); break;
    case ir::Op::relu: go([](T v) { return scalar::relu(v); }); break;
    case ir::Op::sign: go([](T v) { return scalar::sign(v); }); break;
    case ir::Op::clamp: {
        const T lo = scalar::clamp_bound<T>(attrs.f("lo")), hi = scalar::clamp_bound<T>(attrs.f("hi"));
        go([lo, hi](T v) { return scalar::clamp(v, lo, hi); });
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
    case ir::Op::add: go([](C x, C y) { return scalar::add(x, y); }); break;
    case ir::Op::sub: go([](C x, C y) { return scalar::sub(x, y); }); break;
    case ir::Op::mul: go([](C x, C y) { return scalar::mul(x, y); }); break;
    case ir::Op::div: go([](C x, C y) { return scalar::div(x, y); }); break;
    case ir::Op::pow: go([](C x, C y) { return scalar::pow(x, y); }); break;
    case ir::Op::maximum: go([](C x, C y) { return scalar::maximum(x, y); }); break;
    case ir::Op::minimum: go([](C x, C y) { return scalar::minimum(x, y); }); break;
    default: KILN_UNREACHABLE("interp: " << ir::op_name(op) << " has no floating kernel");
    }
}

template <class T> void int_binary(ir::Op op, const Tensor& out, const Tensor& a, const Tensor& b) {
    auto go = [&](auto g) { map2<T, T>(out, a, b, g); };
    switch (op) {
    case ir::Op::add: go([](T x, T y) { return scalar::add(x, y); }); break;
    case ir::Op::sub: go([](T x, T y) { return scalar::sub(x, y); }); break;
    case ir::Op::mul: go([](T x, T y) { return scalar::mul(x, y); }); break;
    case ir::Op::div: go([](T x, T y) { return scalar::div(x, y); }); break;
    case ir::Op::maximum: go([](T x, T y) { return scalar::maximum(x, y); }); break;
    case ir::Op::minimum: go([](T x, T y) { return scalar::minimum(x, y); }); break;
    default: KILN_UNREACHABLE("interp: " << ir::op_name(op) << " has no integer kernel");
    }
}

template <class T> void compare(ir::Op op, const Tensor& out, const Tensor& a, const Tensor& b) {
    auto go = [&](auto g) { map2<bool, T>(out, a, b, [g](T x, T y) { return g(ld<T>(x), ld<T>(y)); }); };
    switch (op) {
    case ir::Op::eq: go([](auto x, auto y) { return scalar::eq(x, y); }); break;
    case ir::Op::ne: go([](auto x, auto y) { return scalar::ne(x, y); }); break;
    case ir::Op::lt: go([](auto x, auto y) { return scalar::lt(x, y); }); break;
    case ir::Op::le: go([](auto x, auto y) { return scalar::le(x, y); }); break;
    case ir::Op::gt: go([](auto x, auto y) { return scalar::gt(x, y); }); break;
    case ir::Op::ge: go([](auto x, auto y) { return scalar::ge(x, y); }); break;
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
            map1<bool, bool>(out, x, [](bool v) { return scalar::logical_not(v); });
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
