#include "jit/exec/shape_plan.h"

#include "jit/exec/bind.h"
#include "src/ir/shape_infer.h"
#include "src/support/check.h"
#include "src/support/checked.h"

#include <algorithm>

namespace kiln::jit {
namespace {

// A copy of narrow or arange `node` whose start and length are the values of their dims in
// this call, or null when both are static already. Shape inference then checks them on the
// call's concrete types (narrow's bounds: 0 <= start, start + length <= the dim).
std::unique_ptr<ir::Node> concrete_start_length(const ir::Node& node, const ir::Bindings& b, std::size_t id,
                                                const std::string& what) {
    std::unique_ptr<ir::Node> copy;
    for (const char* name : {"start", "length"}) {
        const std::vector<Dim>& dims = node.attrs.dims(name);
        if (dims.size() != 1 || dims[0].is_static()) continue;  // the verifier made sure of one dim
        std::optional<std::int64_t> v;
        try {
            v = b.eval(dims[0]);
        } catch (const Error& e) {  // a value that overflows int64
            KILN_USER_ERROR(what << ": %" << id << " = " << ir::op_name(node.op) << ": its " << name << ": " << e.what());
        }
        KILN_USER_CHECK(v.has_value(), what << ": %" << id << " = " << ir::op_name(node.op) << ": its " << name << " "
                                            << dims[0] << " has a symbol without a value in this call");
        if (!copy) copy = std::make_unique<ir::Node>(node);
        copy->attrs.set(name, std::vector<Dim>{Dim(*v)});
    }
    return copy;
}

}  // namespace

std::unique_ptr<ShapePlan> make_shape_plan(const Executable& plan, const std::vector<Shape>& input_shapes,
                                           const std::string& what) {
    const ir::Graph& g = *plan.graph;
    auto sp = std::make_unique<ShapePlan>();
    sp->input_shapes = input_shapes;
    bind_shapes(g, input_shapes, sp->bindings, what);
    sp->shapes.resize(g.nodes.size());
    sp->nodes.resize(g.nodes.size());
    std::vector<ir::TensorType> types(g.nodes.size());
    std::vector<const ir::TensorType*> in_types;
    for (std::size_t id : plan.order) {
        const ir::Node& node = g.nodes[id];
        if (node.op == ir::Op::input) {
            sp->shapes[id] = input_shapes[static_cast<std::size_t>(plan.arg_index[id])];
        } else if (node.op == ir::Op::constant) {
            sp->shapes[id] = node.value.shape();
        } else {
            in_types.clear();
            for (auto in : node.inputs) in_types.push_back(&types[static_cast<std::size_t>(in)]);
            const ir::Node* eff = &node;
            if (node.op == ir::Op::reshape || node.op == ir::Op::broadcast_to) {
                const std::int64_t numel =
                    support::checked_numel(sp->shapes[static_cast<std::size_t>(node.inputs[0])], what);
                Shape target = ir::concrete_target(node, sp->bindings, numel);
                sp->nodes[id] = std::make_unique<ir::Node>(node);
                sp->nodes[id]->attrs.set("shape", std::vector<Dim>(target.begin(), target.end()));
                eff = sp->nodes[id].get();
            } else if (node.op == ir::Op::narrow || node.op == ir::Op::arange) {
                if (auto concrete = concrete_start_length(node, sp->bindings, id, what)) {
                    sp->nodes[id] = std::move(concrete);
                    eff = sp->nodes[id].get();
                }
            }
            Shape shape;
            try {
                shape = ir::infer_type(node.op, in_types, eff->attrs, nullptr).static_shape();
            } catch (const Error& e) {  // say which call and node
                KILN_USER_ERROR(what << ": %" << id << ": " << e.what());
            }
            std::string why;
            KILN_USER_CHECK(sp->bindings.unify(node.type.dims, shape, &why),
                            what << ": %" << id << " = " << ir::op_name(node.op) << " gives shape " << shape_to_string(shape)
                                 << " at run time, which does not fit its traced type " << node.type.to_string() << ": "
                                 << why);
            // Every value a call computes has a byte size that fits in int64.
            if (!support::bytes_fit(shape, dtype_size(node.type.dtype)))
                support::checked_bytes(shape, dtype_size(node.type.dtype),
                                       what + ": %" + std::to_string(id) + " = " + std::string(ir::op_name(node.op)));
            sp->shapes[id] = std::move(shape);
        }
        types[id] = ir::static_type(node.type.dtype, sp->shapes[id]);
    }
    for (auto o : g.outputs) sp->output_shapes.push_back(sp->shapes[static_cast<std::size_t>(o)]);
    sp->group_work.reserve(plan.groups.size());
    for (const auto& grp : plan.groups) {
        std::int64_t work = 0;
        if (!grp->group.outputs.empty())
            work = support::checked_numel(sp->shapes[static_cast<std::size_t>(grp->group.outputs.front())], what);
        for (auto in : grp->group.inputs)
            work = std::max(work, support::checked_numel(sp->shapes[static_cast<std::size_t>(in)], what));
        sp->group_work.push_back(work);
    }
    return sp;
}

namespace {

// A hash of a list of shapes, read through `shape_at(i)`: the same for a shape list and for
// the tensors that have those shapes. Word at a time (the hot path hashes every call's shapes).
template <class ShapeAt> std::uint64_t hash_shapes(std::size_t n, ShapeAt shape_at) {
    auto mix = [](std::uint64_t h, std::uint64_t v) { return (h ^ v) * 0x9e3779b97f4a7c15ULL; };
    std::uint64_t h = mix(0xcbf29ce484222325ULL, n);
    for (std::size_t i = 0; i < n; ++i) {
        const Shape& s = shape_at(i);
        h = mix(h, s.size());
        for (auto d : s) h = mix(h, static_cast<std::uint64_t>(d));
    }
    h = (h ^ (h >> 33)) * 0xff51afd7ed558ccdULL;  // the high bits into the low ones, which pick the slot
    return h ^ (h >> 33);
}

std::uint64_t hash_of(const std::vector<Shape>& shapes) {
    return hash_shapes(shapes.size(), [&](std::size_t i) -> const Shape& { return shapes[i]; });
}
std::uint64_t hash_of(std::span<const Tensor> inputs) {
    return hash_shapes(inputs.size(), [&](std::size_t i) -> const Shape& { return inputs[i].shape(); });
}

bool same_shapes(const std::vector<Shape>& a, const std::vector<Shape>& b) { return a == b; }
bool same_shapes(const std::vector<Shape>& a, std::span<const Tensor> b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i] != b[i].shape()) return false;
    return true;
}

// Probes `table` (linearly, from the key's hash) for the plan of `key`: returns its slot, or
// the empty slot where it would go, and the plan found there (null: none). The table is
// never full (at most half its slots are used), so the probe ends.
template <class Table, class Key> std::size_t probe(const Table& table, const Key& key, const ShapePlan** found) {
    const std::size_t mask = table.size() - 1;
    for (std::size_t i = static_cast<std::size_t>(hash_of(key)) & mask;; i = (i + 1) & mask) {
        const ShapePlan* p = table[i].load(std::memory_order_acquire);
        if (!p || same_shapes(p->input_shapes, key)) {
            *found = p;
            return i;
        }
    }
}

}  // namespace

const ShapePlan* ShapePlanCache::find(const std::vector<Shape>& shapes) const {
    const ShapePlan* p = nullptr;
    probe(table_, shapes, &p);
    return p;
}

const ShapePlan* ShapePlanCache::find(std::span<const Tensor> inputs) const {
    const ShapePlan* p = nullptr;
    probe(table_, inputs, &p);
    return p;
}

ShapePlanRef ShapePlanCache::insert(std::unique_ptr<const ShapePlan> sp) {
    std::lock_guard<std::mutex> lock(mu_);
    const ShapePlan* p = nullptr;
    const std::size_t slot = probe(table_, sp->input_shapes, &p);
    if (p) return ShapePlanRef(p);  // another thread kept the same shapes first
    if (owned_.size() >= kCapacity) return ShapePlanRef(std::move(sp));
    if (owned_.empty()) owned_.reserve(kCapacity);
    owned_.push_back(std::move(sp));
    p = owned_.back().get();
    table_[slot].store(p, std::memory_order_release);  // the plan is complete before a lookup can see it
    return ShapePlanRef(p);
}

std::size_t ShapePlanCache::size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return owned_.size();
}

}  // namespace kiln::jit
