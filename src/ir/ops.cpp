#include "src/ir/ir.h"

#include "src/support/check.h"

#include <algorithm>

namespace kiln::ir {
namespace {
struct OpInfo {
    std::string_view name;
    OpKind kind;
    int min_inputs, max_inputs;
};
constexpr OpInfo kOps[] = {
#define KILN_OP(id, kind, min_in, max_in) {#id, OpKind::kind, min_in, max_in},
#include "src/ir/ops.def"
};
const OpInfo& info(Op op) { return kOps[static_cast<int>(op)]; }
}  // namespace

std::string_view op_name(Op op) { return info(op).name; }
OpKind op_kind(Op op) { return info(op).kind; }
int op_min_inputs(Op op) { return info(op).min_inputs; }
int op_max_inputs(Op op) { return info(op).max_inputs; }
std::optional<Op> op_from_name(std::string_view name) {
    for (std::size_t i = 0; i < std::size(kOps); ++i)
        if (kOps[i].name == name) return static_cast<Op>(i);
    return std::nullopt;
}

bool TensorType::is_static() const {
    return std::all_of(dims.begin(), dims.end(), [](const Dim& d) { return d.is_static(); });
}
Shape TensorType::static_shape() const {
    Shape s;
    s.reserve(dims.size());
    for (const Dim& d : dims) s.push_back(d.value());
    return s;
}
std::string TensorType::to_string() const {
    return std::string(dtype_name(dtype)) + dims_to_string(dims);
}
TensorType static_type(DType dtype, const Shape& shape) {
    TensorType t{dtype, {}};
    t.dims.assign(shape.begin(), shape.end());
    return t;
}

Attrs& Attrs::set(std::string name, AttrValue value) {
    auto it = std::lower_bound(items_.begin(), items_.end(), name,
                               [](const auto& item, const std::string& n) { return item.first < n; });
    if (it != items_.end() && it->first == name) it->second = std::move(value);
    else items_.insert(it, {std::move(name), std::move(value)});
    return *this;
}
const AttrValue* Attrs::find(std::string_view name) const {
    for (const auto& [n, v] : items_)
        if (n == name) return &v;
    return nullptr;
}
namespace {
template <class T> const T& get_attr(const Attrs& a, std::string_view name) {
    const AttrValue* v = a.find(name);
    KILN_CHECK(v != nullptr, "missing attribute '" << name << "'");
    const T* p = std::get_if<T>(v);
    KILN_CHECK(p != nullptr, "attribute '" << name << "' has the wrong type");
    return *p;
}
}  // namespace
std::int64_t Attrs::i(std::string_view name) const { return get_attr<std::int64_t>(*this, name); }
double Attrs::f(std::string_view name) const { return get_attr<double>(*this, name); }
const std::vector<std::int64_t>& Attrs::ints(std::string_view name) const {
    return get_attr<std::vector<std::int64_t>>(*this, name);
}
const std::vector<Dim>& Attrs::dims(std::string_view name) const { return get_attr<std::vector<Dim>>(*this, name); }
DType Attrs::dtype(std::string_view name) const { return get_attr<DType>(*this, name); }
const std::string& Attrs::str(std::string_view name) const { return get_attr<std::string>(*this, name); }

}  // namespace kiln::ir
