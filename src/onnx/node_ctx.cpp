#include "src/onnx/node_ctx.h"

#include "src/support/check.h"
#include "src/trace/tracer.h"

#include <cmath>
#include <sstream>

namespace kiln::onnx_import {

std::string node_label(const pb::NodeProto& node, int index) {
    std::ostringstream os;
    if (!node.name().empty()) os << "ONNX node '" << node.name() << "' (" << node.op_type() << ")";
    else if (node.output_size() > 0) os << "ONNX node #" << index << " (" << node.op_type() << ", output '" << node.output(0) << "')";
    else os << "ONNX node #" << index << " (" << node.op_type() << ")";
    return os.str();
}

std::optional<Tensor> constant_value(const Var& v) {
    if (v.tracer() == nullptr) return std::nullopt;
    const ir::Node& n = v.tracer()->node(v);
    if (n.op != ir::Op::constant) return std::nullopt;
    return n.value;
}

NodeCtx::NodeCtx(const pb::NodeProto& node, std::string label, std::int64_t opset, std::vector<Var> inputs,
                 std::vector<std::optional<SymValue>> syms)
    : node_(node), label_(std::move(label)), opset_(opset), inputs_(std::move(inputs)), syms_(std::move(syms)) {}

void NodeCtx::fail(std::string_view attr, const std::string& msg) const {
    if (attr.empty()) KILN_USER_ERROR(label_ << ": " << msg);
    KILN_USER_ERROR(label_ << ": attribute '" << attr << "': " << msg);
}

const Var& NodeCtx::in(std::size_t i) const {
    if (!has(i)) fail("", "input " + std::to_string(i) + " is required");
    if (!inputs_[i].defined()) {
        inputs_[i] = materialize(*sym(i));
        materialised_ = true;
    }
    return inputs_[i];
}

bool NodeCtx::any_sym() const {
    for (const auto& s : syms_)
        if (s) return true;
    return false;
}

std::optional<SymValue> NodeCtx::known(std::size_t i) const {
    if (const SymValue* s = sym(i)) return *s;
    if (auto t = constant(i)) return sym_from_constant(*t);
    return std::nullopt;
}

std::vector<Dim> NodeCtx::need_dims(std::size_t i, const char* what) const {
    if (const SymValue* s = sym(i)) return s->elems;
    std::vector<Dim> dims;
    for (std::int64_t v : need_ints(i, what)) dims.emplace_back(v);
    return dims;
}

std::vector<Var> NodeCtx::all_inputs() const {
    std::vector<Var> out;
    for (std::size_t i = 0; i < inputs_.size(); ++i) out.push_back(in(i));
    return out;
}

std::optional<Tensor> NodeCtx::constant(std::size_t i) const {
    if (!has(i)) return std::nullopt;
    return constant_value(inputs_[i]);
}

Tensor NodeCtx::need_constant(std::size_t i, const char* what) const {
    if (const SymValue* s = sym(i))
        fail("", std::string("input ") + std::to_string(i) + " ('" + node_.input(static_cast<int>(i)) + "', " + what +
                     ") is computed from sizes known only at run time (" + s->to_string() +
                     "); this op needs it while loading: give the symbolic dims fixed sizes");
    in(i);
    std::optional<Tensor> t = constant(i);
    if (!t) {
        std::string name = node_.input(static_cast<int>(i));
        if (i < from_sizes_.size() && from_sizes_[i])
            fail("", std::string("input ") + std::to_string(i) + " ('" + name + "', " + what +
                         ") is computed at run time from sizes known only then (shape arithmetic Kiln does not "
                         "fold exactly); this op needs it while loading: give the symbolic dims fixed sizes");
        fail("", std::string("input ") + std::to_string(i) + " ('" + name + "', " + what +
                     ") must be known when the model is loaded: an initializer, a Constant, a value computed "
                     "from them, or a graph input given in OnnxOptions::input_values");
    }
    return *t;
}

std::vector<std::int64_t> NodeCtx::need_ints(std::size_t i, const char* what) const {
    Tensor t = need_constant(i, what);
    require(is_integer(t.dtype()), "", std::string(what) + " must be integers, got " + std::string(dtype_name(t.dtype())));
    require(t.rank() <= 1, "", std::string(what) + " must be a 1-D tensor, got shape " + shape_to_string(t.shape()));
    return t.to_vector<std::int64_t>();
}

double NodeCtx::need_scalar(std::size_t i, const char* what) const {
    Tensor t = need_constant(i, what);
    require(t.numel() == 1, "", std::string(what) + " must hold one value, got shape " + shape_to_string(t.shape()));
    return t.to_doubles()[0];
}

// ---- attributes ----

namespace {
// The attribute's type; models older than IR version 3 may leave `type` unset.
pb::AttributeProto::AttributeType type_of(const pb::AttributeProto& a) {
    if (a.type() != pb::AttributeProto::UNDEFINED) return a.type();
    if (a.has_i()) return pb::AttributeProto::INT;
    if (a.has_f()) return pb::AttributeProto::FLOAT;
    if (a.has_s()) return pb::AttributeProto::STRING;
    if (a.has_t()) return pb::AttributeProto::TENSOR;
    if (a.ints_size() > 0) return pb::AttributeProto::INTS;
    if (a.floats_size() > 0) return pb::AttributeProto::FLOATS;
    return pb::AttributeProto::UNDEFINED;
}
const char* type_name(pb::AttributeProto::AttributeType t) {
    const std::string& n = pb::AttributeProto_AttributeType_Name(t);
    return n.empty() ? "unknown" : n.c_str();
}
}  // namespace

const pb::AttributeProto* NodeCtx::find(std::string_view name) const {
    for (const auto& a : node_.attribute())
        if (a.name() == name) return &a;
    return nullptr;
}

const pb::AttributeProto& NodeCtx::typed(std::string_view name, pb::AttributeProto::AttributeType type) const {
    const pb::AttributeProto* a = find(name);
    KILN_CHECK(a != nullptr, "attribute looked up without has_attr");
    pb::AttributeProto::AttributeType t = type_of(*a);
    // An empty list has no fields set: accept it as either list type.
    bool empty_list = t == pb::AttributeProto::UNDEFINED &&
                      (type == pb::AttributeProto::INTS || type == pb::AttributeProto::FLOATS);
    if (t != type && !empty_list)
        fail(name, std::string("expected type ") + type_name(type) + ", got " + type_name(t));
    if (!a->ref_attr_name().empty()) fail(name, "references to function attributes are not supported");
    return *a;
}

std::int64_t NodeCtx::attr_i(std::string_view name, std::int64_t fallback) const {
    return has_attr(name) ? typed(name, pb::AttributeProto::INT).i() : fallback;
}
std::int64_t NodeCtx::attr_i(std::string_view name) const {
    if (!has_attr(name)) fail(name, "is required");
    return typed(name, pb::AttributeProto::INT).i();
}
double NodeCtx::attr_f(std::string_view name, double fallback) const {
    return has_attr(name) ? static_cast<double>(typed(name, pb::AttributeProto::FLOAT).f()) : fallback;
}
std::string NodeCtx::attr_s(std::string_view name, const std::string& fallback) const {
    return has_attr(name) ? typed(name, pb::AttributeProto::STRING).s() : fallback;
}
std::vector<std::int64_t> NodeCtx::attr_ints(std::string_view name, std::vector<std::int64_t> fallback) const {
    if (!has_attr(name)) return fallback;
    const auto& a = typed(name, pb::AttributeProto::INTS);
    return {a.ints().begin(), a.ints().end()};
}
std::optional<std::vector<std::int64_t>> NodeCtx::attr_ints_opt(std::string_view name) const {
    if (!has_attr(name)) return std::nullopt;
    return attr_ints(name, {});
}
std::vector<float> NodeCtx::attr_floats(std::string_view name) const {
    if (!has_attr(name)) return {};
    const auto& a = typed(name, pb::AttributeProto::FLOATS);
    return {a.floats().begin(), a.floats().end()};
}
Tensor NodeCtx::attr_tensor(std::string_view name) const {
    if (!has_attr(name)) fail(name, "is required");
    return tensor_from_proto(typed(name, pb::AttributeProto::TENSOR).t(), label_ + ": attribute '" + std::string(name) + "'");
}

void NodeCtx::set_out(std::size_t i, const Var& v) {
    if (outputs_.size() <= i) outputs_.resize(i + 1);
    outputs_[i] = v;
}

void NodeCtx::set_out(std::size_t i, const SymValue& v) {
    if (v.is_static()) {
        set_out(i, Var(sym_to_tensor(v)));
        return;
    }
    if (outputs_.size() <= i) outputs_.resize(i + 1);
    if (sym_outputs_.size() <= i) sym_outputs_.resize(i + 1);
    sym_outputs_[i] = v;
}

}  // namespace kiln::onnx_import
