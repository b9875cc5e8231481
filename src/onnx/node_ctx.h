#pragma once
// What an operator converter sees of one ONNX node: its inputs as traced kiln::Vars (with
// their values when known at load time), its attributes with type checks, and where its
// outputs go. Every error names the node, the op and, where there is one, the attribute.
#include <kiln/trace.h>

#include "src/onnx/proto.h"
#include "src/onnx/sym_value.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::onnx_import {

// "ONNX node 'conv1' (Conv)", or "ONNX node #3 (Conv, output 'y')" for an unnamed node.
std::string node_label(const pb::NodeProto& node, int index);

class NodeCtx {
public:
    // `inputs[i]` is undefined for an omitted optional input (an empty name) and for a shape
    // value (`syms[i]` set: sym_value.h).
    NodeCtx(const pb::NodeProto& node, std::string label, std::int64_t opset, std::vector<Var> inputs,
            std::vector<std::optional<SymValue>> syms = {});

    const pb::NodeProto& node() const { return node_; }
    const std::string& op() const { return node_.op_type(); }
    std::int64_t opset() const { return opset_; }
    const std::string& label() const { return label_; }

    // Throws kiln::Error "<label>: attribute 'a': msg" (no attribute part when attr is empty).
    [[noreturn]] void fail(std::string_view attr, const std::string& msg) const;
    void require(bool cond, std::string_view attr, const std::string& msg) const {
        if (!cond) fail(attr, msg);
    }

    // ---- inputs ----
    std::size_t num_inputs() const { return inputs_.size(); }
    bool has(std::size_t i) const { return i < inputs_.size() && (inputs_[i].defined() || sym(i) != nullptr); }
    const Var& in(std::size_t i) const;  // a required input (a shape value is materialised)
    std::vector<Var> all_inputs() const;  // every given input (variadic ops)
    // The value of input i when it is known while loading (a constant), else nullopt.
    std::optional<Tensor> constant(std::size_t i) const;
    // Input i's value, which this op needs while loading; throws when it is computed at run time.
    Tensor need_constant(std::size_t i, const char* what) const;
    std::vector<std::int64_t> need_ints(std::size_t i, const char* what) const;
    double need_scalar(std::size_t i, const char* what) const;
    // ---- shape values (sym_value.h) ----
    const SymValue* sym(std::size_t i) const { return i < syms_.size() && syms_[i] ? &*syms_[i] : nullptr; }
    bool any_sym() const;
    // Input i as a shape value when it is one, or a constant of rank <= 1 with integral values.
    std::optional<SymValue> known(std::size_t i) const;
    // Input i's elements as dims (symbolic sizes allowed); throws when computed from data.
    std::vector<Dim> need_dims(std::size_t i, const char* what) const;
    // Inputs computed at run time from sizes (a shape value that could not be folded, and
    // what was computed from it): a load-time need of one says so instead of suggesting
    // OnnxOptions::input_values. materialised(): this node turned a shape value into data.
    void set_from_sizes(std::vector<bool> from_sizes) { from_sizes_ = std::move(from_sizes); }
    bool materialised() const { return materialised_; }

    // ---- attributes (each checks the attribute's type) ----
    bool has_attr(std::string_view name) const { return find(name) != nullptr; }
    std::int64_t attr_i(std::string_view name, std::int64_t fallback) const;
    std::int64_t attr_i(std::string_view name) const;  // required
    double attr_f(std::string_view name, double fallback) const;
    std::string attr_s(std::string_view name, const std::string& fallback) const;
    std::vector<std::int64_t> attr_ints(std::string_view name, std::vector<std::int64_t> fallback) const;
    std::optional<std::vector<std::int64_t>> attr_ints_opt(std::string_view name) const;
    std::vector<float> attr_floats(std::string_view name) const;
    Tensor attr_tensor(std::string_view name) const;

    // ---- outputs ----
    std::size_t num_outputs() const { return static_cast<std::size_t>(node_.output_size()); }
    bool wants(std::size_t i) const { return i < num_outputs() && !node_.output(static_cast<int>(i)).empty(); }
    void set_out(std::size_t i, const Var& v);
    void set_out(std::size_t i, const SymValue& v);  // a constant when static
    const std::vector<Var>& outputs() const { return outputs_; }
    const std::vector<std::optional<SymValue>>& sym_outputs() const { return sym_outputs_; }

private:
    const pb::AttributeProto* find(std::string_view name) const;
    const pb::AttributeProto& typed(std::string_view name, pb::AttributeProto::AttributeType type) const;

    const pb::NodeProto& node_;
    std::string label_;
    std::int64_t opset_;
    mutable std::vector<Var> inputs_;  // shape values materialised on first use
    std::vector<std::optional<SymValue>> syms_;
    std::vector<bool> from_sizes_;
    mutable bool materialised_ = false;
    std::vector<Var> outputs_;
    std::vector<std::optional<SymValue>> sym_outputs_;
};

// The value of a Var when it is a constant of the trace (known at load time).
std::optional<Tensor> constant_value(const Var& v);

}  // namespace kiln::onnx_import
