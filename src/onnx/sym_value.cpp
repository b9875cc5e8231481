#include "src/onnx/sym_value.h"

#include "src/support/check.h"

#include <cmath>

namespace kiln::onnx_import {

bool SymValue::is_static() const {
    for (const Dim& d : elems)
        if (!d.is_static()) return false;
    return true;
}

std::string SymValue::to_string() const { return scalar && elems.size() == 1 ? elems[0].to_string() : dims_to_string(elems); }

std::optional<SymValue> sym_from_constant(const Tensor& t) {
    if (t.rank() > 1) return std::nullopt;
    SymValue v;
    v.scalar = t.rank() == 0;
    v.dtype = t.dtype();
    if (t.dtype() == DType::boolean) {
        for (double x : t.to_doubles()) v.elems.emplace_back(x != 0 ? 1 : 0);
        return v;
    }
    if (is_integer(t.dtype())) {
        for (std::int64_t x : t.to_vector<std::int64_t>()) v.elems.emplace_back(x);
        return v;
    }
    for (double x : t.to_doubles()) {
        if (!(std::abs(x) < 0x1p62) || std::trunc(x) != x) return std::nullopt;
        v.elems.emplace_back(static_cast<std::int64_t>(x));
    }
    return v;
}

Tensor sym_to_tensor(const SymValue& v) {
    std::vector<std::int64_t> xs;
    for (const Dim& d : v.elems) xs.push_back(d.value());
    Shape shape = v.scalar ? Shape{} : Shape{static_cast<std::int64_t>(xs.size())};
    Tensor t = Tensor::from_vector(xs, shape);
    return v.dtype == DType::i64 ? t : t.astype(v.dtype);
}

Var materialize(const SymValue& v) {
    if (v.is_static()) return Var(sym_to_tensor(v));
    std::vector<Var> parts;
    for (const Dim& d : v.elems) parts.push_back(arange(d, Dim(1), 1, DType::i64));  // [d]
    Var r = parts.size() == 1 ? parts[0] : concat(parts, 0);
    if (v.scalar) r = reshape(r, {});
    return v.dtype == DType::i64 ? r : cast(r, v.dtype);
}

}  // namespace kiln::onnx_import
