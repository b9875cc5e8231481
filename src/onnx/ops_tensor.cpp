// Constants and tensor-valued helpers: Constant, ConstantOfShape, Shape, Size, Range,
// EyeLike, Cast, CastLike, Gather, Dropout (inference), Hardmax.
#include "src/onnx/registry.h"
#include "src/support/checked.h"

#include <algorithm>
#include <cmath>

namespace kiln::onnx_import {
namespace {

// Tensors a model asks the importer to create must stay reasonable.
constexpr std::int64_t kMaxCreatedElements = std::int64_t{1} << 28;

Shape created_shape(const NodeCtx& c, const std::vector<std::int64_t>& shape) {
    std::int64_t n = 1;
    for (auto d : shape) {
        c.require(d >= 0, "", "dims must be >= 0, got " + std::to_string(d));
        c.require(n <= kMaxCreatedElements / std::max<std::int64_t>(d, 1), "", "the tensor would be too large");
        n *= std::max<std::int64_t>(d, 1);
    }
    return shape;
}

void constant_op(NodeCtx& c) {
    c.require(c.node().attribute_size() == 1, "", "expected exactly one value attribute");
    const std::string& a = c.node().attribute(0).name();
    Tensor t;
    if (a == "value") t = c.attr_tensor("value");
    else if (a == "value_float") t = Tensor::full({}, c.attr_f("value_float", 0.0), DType::f32);
    else if (a == "value_int") t = Tensor::full({}, static_cast<double>(c.attr_i("value_int")), DType::i64);
    else if (a == "value_floats") {
        std::vector<float> v = c.attr_floats("value_floats");
        t = Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())});
    } else if (a == "value_ints") {
        std::vector<std::int64_t> v = c.attr_ints("value_ints", {});
        t = Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())});
    } else {
        c.fail(a, "is not supported (sparse and string constants)");
    }
    c.set_out(0, Var(t));
}

void constant_of_shape(NodeCtx& c) {
    Tensor value = c.has_attr("value") ? c.attr_tensor("value") : Tensor::zeros({1}, DType::f32);
    c.require(value.numel() == 1, "value", "must hold one element");
    if (const SymValue* s = c.sym(0)) {  // sizes known at run time: a broadcast of the value
        c.require(!s->scalar, "", "the shape must be a 1-D tensor, got the scalar " + s->to_string());
        c.set_out(0, broadcast_to(Var(value.reshape({}).contiguous()), s->elems));
        return;
    }
    Shape shape = created_shape(c, c.need_ints(0, "shape"));
    Tensor out = Tensor::empty(shape, value.dtype());
    if (out.numel() > 0) out.copy_from(value.reshape({}).broadcast_to(shape));
    c.set_out(0, Var(out));
}

void shape_op(NodeCtx& c) {
    Var x = c.in(0);
    std::int64_t r = x.rank();
    auto clampi = [r](std::int64_t v) { return v < 0 ? std::max<std::int64_t>(v + r, 0) : std::min(v, r); };
    std::int64_t start = clampi(c.attr_i("start", 0)), end = clampi(c.attr_i("end", r));
    SymValue dims;  // a shape value (sym_value.h); a constant when every dim is static
    for (std::int64_t i = start; i < end; ++i) dims.elems.push_back(x.dim(i));
    c.set_out(0, dims);
}

void size_op(NodeCtx& c) {
    Dim n(1);
    for (const Dim& d : c.in(0).dims()) n = n * d;
    if (n.is_static()) support::checked_numel(static_dims(c, c.in(0), "Size"), "Size");
    c.set_out(0, SymValue{{n}, true, DType::i64});
}

// Range whose start or limit is a shape value: an arange of a symbolic length.
void symbolic_range(NodeCtx& c) {
    std::optional<SymValue> s = c.known(0), l = c.known(1), d = c.known(2);
    for (int i = 0; i < 3; ++i) {
        const std::optional<SymValue>& v = i == 0 ? s : i == 1 ? l : d;
        const char* what = i == 0 ? "start" : i == 1 ? "limit" : "delta";
        if (!v) {  // computed from data, or a constant that is not a whole number
            const Tensor t = c.need_constant(static_cast<std::size_t>(i), what);
            c.fail("", std::string(what) + " (" + std::string(dtype_name(t.dtype())) + shape_to_string(t.shape()) +
                           ") must be a scalar with an integral value when a bound is a size known only at run time");
        }
        c.require(v->elems.size() == 1, "", "start, limit and delta must be scalars");
    }
    c.require(d->is_static() && d->elems[0].value() != 0, "", "delta must be a nonzero constant, got " + d->to_string());
    const std::int64_t step = d->elems[0].value();
    std::optional<Dim> n = (l->elems[0] - s->elems[0]).div_exact(step);
    c.require(n.has_value(), "",
              "the number of elements ceil((" + l->to_string() + " - " + s->to_string() + ") / " + std::to_string(step) +
                  ") is not a sum of sizes Kiln can carry; only an exact division is");
    c.set_out(0, arange(s->elems[0], *n, step, s->dtype));
}

void range_op(NodeCtx& c) {
    if (c.any_sym()) return symbolic_range(c);
    Tensor start = c.need_constant(0, "start");
    c.require(start.numel() == 1 && c.need_constant(1, "limit").numel() == 1 && c.need_constant(2, "delta").numel() == 1, "",
              "start, limit and delta must be scalars");
    double s = c.need_scalar(0, "start"), l = c.need_scalar(1, "limit"), d = c.need_scalar(2, "delta");
    c.require(d != 0.0, "", "delta must not be 0");
    double count = std::ceil((l - s) / d);
    c.require(std::isfinite(count), "", "the number of elements is not finite");
    auto n = static_cast<std::int64_t>(std::max(count, 0.0));
    created_shape(c, {n});
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = s + static_cast<double>(i) * d;
    c.set_out(0, Var(Tensor::from_vector(v, {n}).astype(start.dtype())));
}

DType to_dtype(const NodeCtx& c, std::int64_t onnx_type, const char* attr) {
    auto dt = dtype_from_onnx(onnx_type);
    if (!dt) c.fail(attr, "element type " + onnx_type_name(onnx_type) + " is not supported");
    return *dt;
}

void cast_op(NodeCtx& c) {
    Var x = c.in(0);
    DType to = to_dtype(c, c.attr_i("to"), "to");
    c.set_out(0, to == x.dtype() ? x : cast(x, to));
}
void cast_like(NodeCtx& c) {
    Var x = c.in(0);
    DType to = c.in(1).dtype();
    c.set_out(0, to == x.dtype() ? x : cast(x, to));
}

void eye_like(NodeCtx& c) {
    Shape s = static_dims(c, c.in(0), "EyeLike");
    c.require(s.size() == 2, "", "expected a 2-D input");
    DType dt = c.has_attr("dtype") ? to_dtype(c, c.attr_i("dtype"), "dtype") : c.in(0).dtype();
    std::int64_t k = c.attr_i("k", 0);
    std::vector<double> v(static_cast<std::size_t>(s[0] * s[1]), 0.0);
    for (std::int64_t i = 0; i < s[0]; ++i)
        if (i + k >= 0 && i + k < s[1]) v[static_cast<std::size_t>(i * s[1] + i + k)] = 1.0;
    c.set_out(0, Var(Tensor::from_vector(v, s).astype(dt)));
}

void gather_op(NodeCtx& c) {
    Var x = c.in(0);
    c.set_out(0, gather(x, c.in(1), norm_axis(c, c.attr_i("axis", 0), x.rank(), "axis")));
}

void dropout(NodeCtx& c) {
    // Inference: the identity (and an all-true mask). Training mode only when nothing drops.
    bool training = c.has(2) && c.need_scalar(2, "training_mode") != 0.0;
    if (training) {
        double ratio = c.has(1) ? c.need_scalar(1, "ratio") : 0.5;
        c.require(ratio == 0.0, "", "training mode with a non-zero ratio is not supported (inference only)");
    }
    Var x = c.in(0);
    c.set_out(0, x);
    if (c.wants(1)) c.set_out(1, Var(Tensor::full(static_dims(c, x, "the mask output"), 1.0, DType::boolean)));
}

void hardmax(NodeCtx& c) {
    Var x = c.in(0);
    c.require(c.opset() >= 13, "", "Hardmax before opset 13 (2-D coercion) is not supported");
    std::int64_t axis = norm_axis(c, c.attr_i("axis", -1), x.rank(), "axis");
    Dim d = x.dim(axis);
    c.require(d.is_static(), "", "needs a static dim on the axis");
    Shape iota_shape(static_cast<std::size_t>(x.rank()), 1);
    iota_shape[static_cast<std::size_t>(axis)] = d.value();
    std::vector<std::int64_t> iota(static_cast<std::size_t>(d.value()));
    for (std::size_t i = 0; i < iota.size(); ++i) iota[i] = static_cast<std::int64_t>(i);
    Var hot = Var(Tensor::from_vector(iota, iota_shape)) == argmax(x, axis, true);
    c.set_out(0, cast(hot, x.dtype()));
}

}  // namespace

void add_tensor_ops(Registry& r) {
    r["Constant"] = {constant_op, {"value", "value_float", "value_floats", "value_int", "value_ints"}, {}};
    r["ConstantOfShape"] = {constant_of_shape, {"value"}, {0}};
    r["Shape"] = {shape_op, {"start", "end"}, {}};
    r["Size"] = {size_op, {}, {}};
    r["Range"] = {range_op, {}, {0, 1, 2}};
    r["EyeLike"] = {eye_like, {"dtype", "k"}, {}};
    r["Cast"] = {cast_op, {"saturate", "to"}, {}};  // saturate (19): float8 targets only
    r["CastLike"] = {cast_like, {"saturate"}, {}};
    r["Gather"] = {gather_op, {"axis"}, {}};
    r["Dropout"] = {dropout, {"ratio", "seed", "is_test"}, {1, 2}};
    r["Hardmax"] = {hardmax, {"axis"}, {}};
}

}  // namespace kiln::onnx_import
