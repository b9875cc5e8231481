// Lowering of fusion groups into KIR (see lower.h): lower() picks the form of the group and
// runs it on one Lowering (lower_ctx.h), whose buffers and temps are set up here. The rest
// is split by concern: index expressions (lower_index.cpp), views (lower_view.cpp),
// elementwise ops and groups (lower_elementwise.cpp), row reductions (lower_row.cpp),
// matmuls (lower_matmul.cpp) and convolutions (lower_conv.cpp).
#include "src/kir/lower.h"

#include "src/kir/lower_ctx.h"

#include <algorithm>

namespace kiln::kir {
namespace detail {

using ir::ValueId;

Lowering::Lowering(const ir::Graph& graph, const passes::Group& grp) : g(graph), group(grp) {
    k.name = group.name;
    for (std::size_t i = 0; i < group.inputs.size(); ++i) {
        input_buf_[group.inputs[i]] = static_cast<int>(i);
        k.buffers.push_back({"in" + std::to_string(i), node(group.inputs[i]).type.dtype, false});
    }
    for (std::size_t i = 0; i < group.outputs.size(); ++i) {
        output_buf_[group.outputs[i]] = static_cast<int>(k.buffers.size());
        k.buffers.push_back({"out" + std::to_string(i), node(group.outputs[i]).type.dtype, true});
        ++uses_[group.outputs[i]];
    }
    for (ValueId v : group.nodes)
        for (ValueId in : node(v).inputs) ++uses_[in];
}

bool Lowering::in_group(ValueId v) const {
    return std::binary_search(group.nodes.begin(), group.nodes.end(), v);
}

int Lowering::output_buffer(ValueId v) const {
    auto it = output_buf_.find(v);
    return it == output_buf_.end() ? -1 : it->second;
}

int Lowering::input_buffer(ValueId v, const char* what) const {
    auto it = input_buf_.find(v);
    if (it == input_buf_.end()) throw Unsupported{std::string(what) + " is not a group input"};
    return it->second;
}

int Lowering::new_temp(Type t) {
    k.temps.push_back(t);
    return static_cast<int>(k.temps.size()) - 1;
}
}  // namespace detail

std::optional<Kernel> lower(const ir::Graph& g, const passes::Group& group, std::string* why) {
    auto fail = [&](std::string m) -> std::optional<Kernel> {
        if (why) *why = std::move(m);
        return std::nullopt;
    };
    switch (group.kind) {
    case passes::GroupKind::opaque:
        return fail("opaque groups (" + std::string(ir::op_name(g.nodes[static_cast<std::size_t>(group.nodes.front())].op)) +
                    ") are not lowered");
    case passes::GroupKind::elementwise:
    case passes::GroupKind::row_reduction:
    case passes::GroupKind::matmul:
    case passes::GroupKind::conv: break;
    }
    try {
        detail::Lowering L(g, group);
        if (group.kind == passes::GroupKind::elementwise) detail::lower_elementwise(L);
        else if (group.kind == passes::GroupKind::matmul) detail::lower_matmul(L);
        else if (group.kind == passes::GroupKind::conv) detail::lower_conv(L);
        else detail::lower_row(L);
        verify(L.k);
        return std::move(L.k);
    } catch (const detail::Unsupported& u) {
        return fail(u.why);
    }
}

}  // namespace kiln::kir
