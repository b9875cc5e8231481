#pragma once
// Private to the interpreter: the per-family kernels that interp.cpp dispatches to, and the
// small helpers they share. Every kernel takes any strides and returns a tensor of
// out_shape (see interp.h for the contract).
#include "src/core/element.h"
#include "src/ir/ir.h"
#include "src/support/check.h"

#include <kiln/tensor.h>

#include <cstdint>
#include <type_traits>
#include <vector>

namespace kiln::interp {

// ---- one function per op family (elementwise.cpp, reduce.cpp, norm.cpp, ...) ----
Tensor unary(const ir::Node& node, const Tensor& x, const Shape& out_shape);
Tensor binary(const ir::Node& node, const Tensor& a, const Tensor& b, const Shape& out_shape);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, const Shape& out_shape);
Tensor reduce(const ir::Node& node, const Tensor& x, const Shape& out_shape);
Tensor softmax(const ir::Node& node, const Tensor& x, const Shape& out_shape);
Tensor layer_norm(const ir::Node& node, const std::vector<Tensor>& in, const Shape& out_shape);
Tensor rms_norm(const ir::Node& node, const std::vector<Tensor>& in, const Shape& out_shape);
Tensor batch_norm(const ir::Node& node, const std::vector<Tensor>& in, const Shape& out_shape);
Tensor matmul(const Tensor& a, const Tensor& b, const Shape& out_shape);
Tensor conv2d(const ir::Node& node, const std::vector<Tensor>& in, const Shape& out_shape);
Tensor conv2d_nchwc(const ir::Node& node, const std::vector<Tensor>& in, const Shape& out_shape);
Tensor pool2d(const ir::Node& node, const Tensor& x, const Shape& out_shape);
Tensor global_avg_pool2d(const Tensor& x, const Shape& out_shape);
Tensor shape_op(const ir::Node& node, const std::vector<Tensor>& in, const Shape& out_shape);
Tensor arange(const ir::Node& node, const Shape& out_shape);

// ---- shared helpers ----

// Storage value <-> compute value (f16/bf16 compute in float, every other type in itself).
template <class T> inline core::compute_t<T> ld(T v) {
    if constexpr (core::is_half_v<T>) return static_cast<float>(v);
    else return v;
}
template <class T> inline T st(core::compute_t<T> v) {
    if constexpr (core::is_half_v<T>) return T(v);
    else return v;
}

// The dtype kernels that need dense floating data compute in: f32 for f16/bf16, else itself.
inline DType compute_dtype(DType t) { return t == DType::f16 || t == DType::bf16 ? DType::f32 : t; }

// A dense tensor holding x's values in dtype `t` (x itself when it already is one).
inline Tensor dense_as(const Tensor& x, DType t) {
    if (x.dtype() == t) return x.contiguous();
    return x.astype(t);
}

// Calls f(T{}) for a floating dtype (f32, f64, f16, bf16); any other dtype is a bug,
// since shape inference admits only floating operands where this is used.
template <class F> void dispatch_floating(DType t, const char* what, F&& f) {
    core::dispatch(t, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_floating_point_v<core::compute_t<T>>) f(tag);
        else KILN_UNREACHABLE("interp: " << what << " on non-floating dtype " << dtype_name(t));
    });
}

inline std::int64_t numel_of(const Shape& s) {
    std::int64_t n = 1;
    for (auto d : s) n *= d;
    return n;
}

}  // namespace kiln::interp
