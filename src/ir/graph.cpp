#include <kiln/graph.h>

#include "src/ir/ir.h"
#include "src/ir/parser.h"
#include "src/ir/printer.h"
#include "src/support/check.h"

#include <ostream>

namespace kiln {
namespace {
const ir::Graph& get(const std::shared_ptr<const ir::Graph>& g) {
    KILN_USER_CHECK(g != nullptr, "Graph: the graph is empty (default-constructed)");
    return *g;
}
ValueInfo info(const ir::Graph& g, ir::ValueId id, std::string name) {
    const ir::Node& n = g.nodes[static_cast<std::size_t>(id)];
    return {std::move(name), n.type.dtype, n.type.dims};
}
}  // namespace

Graph::Graph(std::shared_ptr<const ir::Graph> impl) : impl_(std::move(impl)) {}

const std::string& Graph::name() const { return get(impl_).name; }
std::int64_t Graph::num_nodes() const { return static_cast<std::int64_t>(get(impl_).nodes.size()); }
std::vector<ValueInfo> Graph::inputs() const {
    const ir::Graph& g = get(impl_);
    std::vector<ValueInfo> out;
    for (auto id : g.inputs) out.push_back(info(g, id, g.nodes[static_cast<std::size_t>(id)].attrs.str("name")));
    return out;
}
std::vector<ValueInfo> Graph::outputs() const {
    const ir::Graph& g = get(impl_);
    std::vector<ValueInfo> out;
    for (std::size_t i = 0; i < g.outputs.size(); ++i) out.push_back(info(g, g.outputs[i], "out" + std::to_string(i)));
    return out;
}
std::string Graph::to_string(const PrintOptions& options) const {
    return ir::print(get(impl_), options.max_constant_elements);
}
Graph Graph::parse(const std::string& text) { return Graph(ir::parse(text)); }
std::uint64_t Graph::hash() const { return ir::structural_hash(get(impl_)); }
bool Graph::structurally_equal(const Graph& other) const {
    return ir::structurally_equal(get(impl_), get(other.impl_));
}
std::ostream& operator<<(std::ostream& os, const Graph& g) { return os << g.to_string(); }

const char* version_string() { return KILN_VERSION; }

}  // namespace kiln
