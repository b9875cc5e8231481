#pragma once
// The graph IR: ops (ops.def), typed values, attributes, nodes and graphs.
// A graph is a list of nodes in topological order; every node defines one value, whose id
// is the node's index. Graphs are built once (by the tracer, the parser or a pass) and then
// shared immutably.
#include <kiln/dim.h>
#include <kiln/dtype.h>
#include <kiln/tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace kiln::ir {

enum class Op : std::uint8_t {
#define KILN_OP(id, kind, min_in, max_in) id,
#include "src/ir/ops.def"
};
enum class OpKind : std::uint8_t { Source, Unary, Binary, Compare, Select, Reduce, Other };

std::string_view op_name(Op op);
std::optional<Op> op_from_name(std::string_view name);
OpKind op_kind(Op op);
int op_min_inputs(Op op);
int op_max_inputs(Op op);  // -1: variadic
inline bool is_elementwise(Op op) {
    OpKind k = op_kind(op);
    return k == OpKind::Unary || k == OpKind::Binary || k == OpKind::Compare || k == OpKind::Select;
}

struct TensorType {
    DType dtype = DType::f32;
    std::vector<Dim> dims;
    std::int64_t rank() const { return static_cast<std::int64_t>(dims.size()); }
    bool is_static() const;
    Shape static_shape() const;  // throws if symbolic
    std::string to_string() const;  // "f32[?batch,784]"
    friend bool operator==(const TensorType&, const TensorType&) = default;
};
TensorType static_type(DType dtype, const Shape& shape);

using AttrValue =
    std::variant<std::int64_t, double, std::vector<std::int64_t>, std::vector<Dim>, DType, std::string>;

// A small name-sorted attribute list.
class Attrs {
public:
    Attrs() = default;
    Attrs& set(std::string name, AttrValue value);
    bool has(std::string_view name) const { return find(name) != nullptr; }
    const AttrValue* find(std::string_view name) const;
    std::int64_t i(std::string_view name) const;
    double f(std::string_view name) const;
    const std::vector<std::int64_t>& ints(std::string_view name) const;
    const std::vector<Dim>& dims(std::string_view name) const;
    DType dtype(std::string_view name) const;
    const std::string& str(std::string_view name) const;
    const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
    friend bool operator==(const Attrs&, const Attrs&) = default;

private:
    std::vector<std::pair<std::string, AttrValue>> items_;
};

using ValueId = std::int32_t;

struct Node {
    Op op = Op::input;
    std::vector<ValueId> inputs;
    Attrs attrs;
    TensorType type;  // the output's type
    Tensor value;     // Op::constant only: the data (contiguous)
};

struct Graph {
    std::string name;
    std::vector<Node> nodes;
    std::vector<ValueId> inputs;   // the Op::input nodes, in argument order
    std::vector<ValueId> outputs;  // may repeat, may name inputs or constants
};

// Equality of structure: ops, edges, attributes, types and constant values. Both ignore the
// graph name, so identical structures under different names share compiled code.
bool structurally_equal(const Graph& a, const Graph& b);
std::uint64_t structural_hash(const Graph& g);

}  // namespace kiln::ir
