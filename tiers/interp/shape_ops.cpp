// Shape and data-movement ops.
//
// - reshape (to out_shape; the `shape` attribute may hold symbols), permute, squeeze,
//   unsqueeze, broadcast_to, slice and narrow return views sharing the input's storage
//   (reshape of a non-contiguous input copies first). narrow's start and length must be
//   concrete (the executor's per-call node copy) and within the input (else kiln::Error).
// - arange computes start + i * step in int64 and converts each value as cast does.
// - concat, gather and pad return new dense tensors.
// - gather follows NumPy `take` along one axis: out = x.shape[:axis] + idx.shape +
//   x.shape[axis+1:]; indices of any integer dtype; a negative index counts from the back;
//   an index outside [-size, size) throws kiln::Error naming the index as given.
// - pad fills with `value` converted to the dtype (core::convert: saturating for integers,
//   NaN -> 0 for integers, non-zero -> true for bool), then copies
//   the input into the interior.
#include "src/core/strided.h"
#include "src/support/check.h"
#include "tiers/interp/kernels.h"

#include <cstring>

namespace kiln::interp {
namespace {

using I64 = std::int64_t;

Tensor concat(const ir::Node& node, const std::vector<Tensor>& in, const Shape& out_shape) {
    const I64 axis = node.attrs.i("axis");
    const Tensor& first = in[0];
    KILN_CHECK(axis >= 0 && axis < first.rank(), "interp: concat axis");
    Tensor out = Tensor::empty(out_shape, first.dtype());
    I64 at = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
        const Tensor& t = in[i];
        KILN_CHECK(t.dtype() == first.dtype() && t.rank() == first.rank(), "interp: concat operands");
        for (I64 d = 0; d < t.rank(); ++d)
            KILN_USER_CHECK(d == axis || t.dim(d) == out_shape[static_cast<std::size_t>(d)],
                            "concat: operand " << i << " has shape " << shape_to_string(t.shape())
                                               << ", which differs from " << shape_to_string(out_shape)
                                               << " at axis " << d);
        const I64 len = t.dim(axis);
        KILN_USER_CHECK(at + len <= out_shape[static_cast<std::size_t>(axis)],
                        "concat: operands are longer than the output along axis " << axis);
        if (len > 0) out.slice(axis, at, at + len).copy_from(t);
        at += len;
    }
    KILN_USER_CHECK(at == out_shape[static_cast<std::size_t>(axis)],
                    "concat: operands fill " << at << " of " << out_shape[static_cast<std::size_t>(axis)]
                                             << " along axis " << axis);
    return out;
}

Tensor gather(const ir::Node& node, const Tensor& x, const Tensor& idx, const Shape& out_shape) {
    const I64 axis = node.attrs.i("axis");
    KILN_CHECK(axis >= 0 && axis < x.rank() && is_integer(idx.dtype()), "interp: gather operands");
    const I64 size = x.dim(axis);
    // Indices as int64, validated and made non-negative.
    const Tensor ic = idx.contiguous();
    const I64 ni = ic.numel();
    std::vector<I64> index(static_cast<std::size_t>(ni));
    core::dispatch(ic.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            const T* p = static_cast<const T*>(ic.data());
            for (I64 i = 0; i < ni; ++i) {
                const I64 v = static_cast<I64>(p[i]);
                KILN_USER_CHECK(v >= -size && v < size,
                                "gather: index " << v << " is out of range for axis " << axis << " of size " << size);
                index[static_cast<std::size_t>(i)] = v < 0 ? v + size : v;
            }
        } else {
            KILN_UNREACHABLE("interp: gather indices of dtype " << dtype_name(ic.dtype()));
        }
    });
    Tensor out = Tensor::empty(out_shape, x.dtype());
    if (out.numel() == 0) return out;
    // x as [outer, size, inner]; out as [outer, ni, inner]: copy runs of `inner` elements.
    I64 outer = 1, inner = 1;
    for (I64 d = 0; d < axis; ++d) outer *= x.dim(d);
    for (I64 d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
    KILN_CHECK(outer * ni * inner == out.numel(), "interp: gather output shape " << shape_to_string(out_shape));
    const Tensor xc = x.contiguous();
    const std::size_t es = dtype_size(x.dtype());
    const char* src = static_cast<const char*>(xc.data());
    char* dst = static_cast<char*>(out.data());
    const std::size_t run = static_cast<std::size_t>(inner) * es;
    core::parallel_range(outer * ni, inner, [&](I64 lo, I64 hi) {
        for (I64 t = lo; t < hi; ++t) {
            const I64 o = t / ni, j = index[static_cast<std::size_t>(t % ni)];
            std::memcpy(dst + static_cast<std::size_t>(t) * run, src + static_cast<std::size_t>(o * size + j) * run, run);
        }
    });
    return out;
}

Tensor pad(const ir::Node& node, const Tensor& x, const Shape& out_shape) {
    const auto& pads = node.attrs.ints("pads");
    KILN_CHECK(static_cast<I64>(pads.size()) == 2 * x.rank() && static_cast<I64>(out_shape.size()) == x.rank(),
               "interp: pad attributes");
    Tensor out = Tensor::full(out_shape, node.attrs.f("value"), x.dtype());
    if (x.numel() == 0) return out;
    Tensor interior = out;
    for (I64 d = 0; d < x.rank(); ++d) {
        const I64 before = pads[static_cast<std::size_t>(2 * d)];
        KILN_CHECK(before + x.dim(d) + pads[static_cast<std::size_t>(2 * d + 1)] == out_shape[static_cast<std::size_t>(d)],
                   "interp: pad output shape");
        interior = interior.slice(d, before, before + x.dim(d));
    }
    interior.copy_from(x);
    return out;
}

// The value of a one-dim attribute that the executor made concrete for this call.
I64 concrete(const ir::Node& node, const char* name) {
    const std::vector<Dim>& d = node.attrs.dims(name);
    KILN_CHECK(d.size() == 1 && d[0].is_static(), "interp: " << ir::op_name(node.op) << "'s " << name << " "
                                                              << dims_to_string(d) << " was not made concrete for the call");
    return d[0].value();
}

Tensor narrow(const ir::Node& node, const Tensor& x, const Shape& out_shape) {
    const I64 axis = node.attrs.i("axis"), start = concrete(node, "start"), length = concrete(node, "length");
    KILN_CHECK(axis >= 0 && axis < x.rank(), "interp: narrow axis");
    const I64 n = x.dim(axis);
    // The shape plan checked this already; a kernel must never read outside its operand.
    KILN_USER_CHECK(start >= 0 && length >= 0 && start <= n && length <= n - start,
                    "narrow: start " << start << " + length " << length << " exceeds dim " << n << " of axis " << axis
                                     << " (operand: " << shape_to_string(x.shape()) << ")");
    Tensor out = x.slice(axis, start, start + length);
    KILN_CHECK(out.shape() == out_shape, "interp: narrow output shape");
    return out;
}

}  // namespace

Tensor arange(const ir::Node& node, const Shape& out_shape) {
    const I64 start = concrete(node, "start"), step = node.attrs.i("step");
    KILN_CHECK(out_shape.size() == 1 && out_shape[0] == concrete(node, "length"), "interp: arange output shape");
    Tensor out = Tensor::empty(out_shape, node.type.dtype);
    core::dispatch(out.dtype(), [&](auto tag) {
        using T = decltype(tag);
        T* p = static_cast<T*>(out.data());
        // Shape inference checked that start + (length - 1) * step fits in int64.
        for (I64 i = 0; i < out_shape[0]; ++i) p[i] = core::convert<T>(start + i * step);
    });
    return out;
}

Tensor shape_op(const ir::Node& node, const std::vector<Tensor>& in, const Shape& out_shape) {
    const Tensor& x = in[0];
    switch (node.op) {
    case ir::Op::reshape: return x.reshape(out_shape);  // a view when x is contiguous, else a copy
    case ir::Op::permute: return x.permute(node.attrs.ints("perm"));
    case ir::Op::squeeze: {
        Tensor t = x;
        const auto& axes = node.attrs.ints("axes");
        for (auto it = axes.rbegin(); it != axes.rend(); ++it) t = t.squeeze(*it);  // back to front
        return t;
    }
    case ir::Op::unsqueeze: {
        Tensor t = x;
        for (auto a : node.attrs.ints("axes")) t = t.unsqueeze(a);  // sorted output positions
        return t;
    }
    case ir::Op::broadcast_to: return x.broadcast_to(out_shape);
    case ir::Op::slice:
        return x.slice(node.attrs.i("axis"), node.attrs.i("start"), node.attrs.i("end"), node.attrs.i("step"));
    case ir::Op::narrow: return narrow(node, x, out_shape);
    case ir::Op::concat: return concat(node, in, out_shape);
    case ir::Op::gather: return gather(node, x, in[1], out_shape);
    case ir::Op::pad: return pad(node, x, out_shape);
    default: KILN_UNREACHABLE("interp: no kernel for " << ir::op_name(node.op));
    }
}

}  // namespace kiln::interp
