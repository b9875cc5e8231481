#include "reference_kir.h"

#include "reference.h"
#include "src/kir/eval.h"
#include "jit/exec/pipeline.h"
#include "tiers/interp/interp.h"

#include <optional>
#include <string>

#include <doctest/doctest.h>

namespace ref {

std::vector<kiln::Tensor> evaluate_group(const kiln::kir::Kernel& k, const kiln::passes::Group& group,
                                         const kiln::ir::Graph& g, const kiln::jit::ShapePlan& sp,
                                         const std::vector<kiln::Tensor>& vals) {
    std::vector<kiln::Tensor> bufs;
    for (auto v : group.inputs) bufs.push_back(vals[static_cast<std::size_t>(v)].contiguous());
    for (auto v : group.outputs)
        bufs.push_back(kiln::Tensor::empty(sp.shapes[static_cast<std::size_t>(v)], g.nodes[static_cast<std::size_t>(v)].type.dtype));
    std::vector<void*> ptrs;
    for (kiln::Tensor& t : bufs) ptrs.push_back(t.data());
    std::vector<std::int64_t> params;
    for (const auto& src : k.param_sources) {
        if (src.from_symbol()) {  // a symbol's value in the call (narrow's start)
            const auto v = sp.bindings.get(src.symbol);
            REQUIRE_MESSAGE(v.has_value(), "?", src.symbol, " is unbound");
            params.push_back(*v);
            continue;
        }
        params.push_back(bufs[static_cast<std::size_t>(src.buffer)].shape()[static_cast<std::size_t>(src.dim)]);
    }
    const std::int64_t extent = kiln::kir::eval_index(k.extent, params.data());
    REQUIRE(extent >= 0);
    const std::int64_t mid = extent / 3;
    kiln::kir::evaluate(k, ptrs.data(), params.data(), 0, mid);
    kiln::kir::evaluate(k, ptrs.data(), params.data(), mid, extent);
    return std::vector<kiln::Tensor>(bufs.begin() + static_cast<std::ptrdiff_t>(group.inputs.size()), bufs.end());
}

namespace {
namespace ir = kiln::ir;
namespace kir = kiln::kir;
namespace passes = kiln::passes;
using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
}  // namespace

GroupRunStats check_lowered_graph(const kiln::Graph& kg, const std::vector<Tensor>& inputs, double tol_scale) {
    const ir::Graph& g = *kg.impl();
    const auto plan = kiln::jit::lower_function(kg.impl());
    std::vector<Shape> shapes;
    for (const Tensor& t : inputs) shapes.push_back(t.shape());
    auto sp = kiln::jit::make_shape_plan(*plan, shapes, "check_lowered_graph");
    std::vector<Tensor> vals(g.nodes.size());
    for (std::size_t id : plan->order) {
        if (g.nodes[id].op == ir::Op::input) vals[id] = inputs[static_cast<std::size_t>(plan->arg_index[id])];
        if (g.nodes[id].op == ir::Op::constant) vals[id] = g.nodes[id].value;
    }
    auto interp = [&](ir::ValueId v, const std::vector<Tensor>& env) {
        const auto id = static_cast<std::size_t>(v);
        std::vector<Tensor> ins;
        for (auto in : g.nodes[id].inputs) ins.push_back(env[static_cast<std::size_t>(in)]);
        const ir::Node& nd = sp->nodes[id] ? *sp->nodes[id] : g.nodes[id];
        return kiln::interp::run_node(nd, ins, sp->shapes[id]);
    };
    GroupRunStats stats;
    for (const auto& group : plan->groups) {
        const passes::Group& gr = group->group;
        ++stats.groups;
        INFO("group ", gr.name);
        const std::string& why = group->lower_failure;
        const std::optional<kir::Kernel>& k = group->kernel;
        if (!k) {
            CHECK_MESSAGE((gr.kind != passes::GroupKind::elementwise && gr.kind != passes::GroupKind::row_reduction),
                          "not lowered: ", why);
            CHECK(!why.empty());
            for (auto v : gr.nodes) vals[static_cast<std::size_t>(v)] = interp(v, vals);
            continue;
        }
        ++stats.lowered;
        CHECK_NOTHROW(kir::verify(*k));
        const std::string text = kir::print(*k);
        INFO(text);
        CHECK(text.find("buffer b0") != std::string::npos);
        CHECK(text.find("for outer in") != std::string::npos);
        // The interpreter's answer on the same inputs.
        std::vector<Tensor> want = vals;
        for (auto v : gr.nodes) want[static_cast<std::size_t>(v)] = interp(v, want);
        // The kernel on the evaluator, in two chunks of its outer range.
        const std::vector<Tensor> outs = evaluate_group(*k, gr, g, *sp, vals);
        for (std::size_t i = 0; i < gr.outputs.size(); ++i) {
            const auto v = static_cast<std::size_t>(gr.outputs[i]);
            const Tensor& got = outs[i];
            const DType dt = g.nodes[v].type.dtype;
            check_close(got, from_kiln(want[v]), dt, tol_for(dt, tol_scale), gr.name + " output " + std::to_string(i));
            vals[v] = got;
        }
    }
    const std::vector<Tensor> engine = run_graph(kg, inputs);
    REQUIRE(engine.size() == g.outputs.size());
    for (std::size_t i = 0; i < engine.size(); ++i) {
        const DType dt = g.nodes[static_cast<std::size_t>(g.outputs[i])].type.dtype;
        check_close(vals[static_cast<std::size_t>(g.outputs[i])], from_kiln(engine[i]), dt,
                         tol_for(dt, tol_scale), "graph output " + std::to_string(i));
    }
    return stats;
}

}  // namespace ref
