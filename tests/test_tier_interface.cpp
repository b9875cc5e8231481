// Every tier behind one interface (tiers/tier.h): tier 0, the interpreter, makes code for any
// fusion group (tiers/interp/interp_tier.h) that runs the group's nodes on a call's values
// through a ValueEnv; the pipeline gives every group that code; compiled host code runs through
// the same CompiledKernel::launch.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "jit/exec/pipeline.h"
#include "jit/exec/shape_plan.h"
#include "reference.h"
#include "tiers/interp/interp_tier.h"

#include <map>
#include <stdexcept>

using namespace kiln;

namespace {

// The values of one call of a graph, kept in a map: the smallest ValueEnv.
class MapEnv final : public tiers::ValueEnv {
public:
    MapEnv(const ir::Graph& g, const jit::ShapePlan& sp) : g_(g), sp_(sp) {}
    const Tensor& value(ir::ValueId v) {
        auto it = values.find(v);
        REQUIRE_MESSAGE(it != values.end(), "value %" << v << " read before it was defined");
        return it->second;
    }
    const std::vector<Tensor>& operands(ir::ValueId v) override {
        args.clear();
        for (ir::ValueId in : g_.nodes[static_cast<std::size_t>(v)].inputs) args.push_back(value(in));
        return args;
    }
    const ir::Node& node(ir::ValueId v) override {
        const auto id = static_cast<std::size_t>(v);
        return sp_.nodes[id] ? *sp_.nodes[id] : g_.nodes[id];
    }
    const Shape& shape(ir::ValueId v) override { return sp_.shapes[static_cast<std::size_t>(v)]; }
    void define(ir::ValueId v, Tensor t) override {
        ++defined;
        values[v] = std::move(t);
    }
    std::map<ir::ValueId, Tensor> values;
    std::vector<Tensor> args;
    int defined = 0;

private:
    const ir::Graph& g_;
    const jit::ShapePlan& sp_;
};

Graph two_groups() {
    Tensor w = Tensor::randn({8, 5}, 3);
    return trace("two", {arg("x", DType::f32, {dyn("B"), 8})}, [&](const std::vector<Var>& in) -> std::vector<Var> {
        Var h = relu(matmul(in[0], w) + 1.0);             // a matmul group with its epilogue
        return {reshape(softmax(h, -1), {h.dim(0), 5, 1})};  // a row group; the reshape, a graph output, stays a group
    });
}

}  // namespace

TEST_CASE("tier interface: the interpreter is tier 0 and takes every group") {
    std::shared_ptr<tiers::Tier> t0 = interp::interp_tier();
    CHECK(t0->level() == 0);
    CHECK(t0->name() == "interp");
    const auto plan = jit::lower_function(two_groups().impl());
    REQUIRE(plan->groups.size() == 3);
    CHECK_FALSE(plan->groups[2]->kernel.has_value());  // the reshape has no kernel IR, tier 0 still runs it
    for (const auto& gr : plan->groups) {
        CAPTURE(gr->group.name);
        REQUIRE(gr->interpreted != nullptr);
        CHECK(gr->interpreted->place() == tiers::Place::host);
        CHECK(gr->interpreted->code_bytes() == 0);
        tiers::CompileResult r = t0->compile_group({*plan->graph, gr->group, gr->kernel ? &*gr->kernel : nullptr}, {});
        CHECK(r.bailout == tiers::Bailout::none);
        CHECK(r.kernel != nullptr);
    }
    // Kernel IR alone is not what the interpreter runs.
    const tiers::CompileResult r = t0->compile(*plan->groups[0]->kernel, {});
    CHECK(r.bailout == tiers::Bailout::unsupported_op);
    CHECK(r.detail.find("graph nodes") != std::string::npos);
    // Code that runs on tensors needs a call's values.
    CHECK_THROWS_WITH_AS(plan->groups[0]->interpreted->launch({}), doctest::Contains("LaunchArgs::env is null"),
                         std::logic_error);
}

TEST_CASE("tier interface: tier 0's code, launched on a call's values, gives the engine's interpreter answer") {
    Graph g = two_groups();
    const auto plan = jit::lower_function(g.impl());
    Tensor x = Tensor::randn({6, 8}, 11);
    auto sp = jit::make_shape_plan(*plan, {x.shape()}, "test");
    const ir::Graph& ig = *plan->graph;
    MapEnv env(ig, *sp);
    env.values[ig.inputs[0]] = x;
    for (std::size_t id : plan->order)
        if (ig.nodes[id].op == ir::Op::constant) env.values[static_cast<ir::ValueId>(id)] = ig.nodes[id].value;
    int nodes = 0;
    for (const auto& gr : plan->groups) {
        tiers::LaunchArgs a;
        a.env = &env;
        gr->interpreted->launch(a);
        nodes += static_cast<int>(gr->group.nodes.size());
    }
    CHECK(env.defined == nodes);  // every node of every group, once
    const Tensor got = env.value(ig.outputs[0]);
    const Tensor want = ref::interp_engine().load(g)({x})[0];
    CHECK(got.shape() == want.shape());
    CHECK(ref::max_rel_diff(got, want) == 0.0);
}
