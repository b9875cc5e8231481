#include "jit/run_plan.h"

#include "src/core/strided.h"
#include "src/support/check.h"
#include "tiers/interp/interp.h"

#include <chrono>

namespace kiln::jit {
namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t ns_since(Clock::time_point t0) {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

// The shape of buffer `b` of a group (inputs, then outputs).
const Shape& buffer_shape(const passes::Group& g, const ShapePlan& sp, std::size_t b) {
    ir::ValueId v = b < g.inputs.size() ? g.inputs[b] : g.outputs[b - g.inputs.size()];
    return sp.shapes[static_cast<std::size_t>(v)];
}

}  // namespace

bool has_empty_buffer(const passes::Group& g, const ShapePlan& sp) {
    for (std::size_t b = 0; b < g.inputs.size() + g.outputs.size(); ++b)
        for (auto d : buffer_shape(g, sp, b))
            if (d == 0) return true;
    return false;
}

void group_params(const kir::Kernel& k, const passes::Group& g, const ShapePlan& sp, std::vector<std::int64_t>& out) {
    out.resize(k.param_sources.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
        const auto& src = k.param_sources[i];
        out[i] = buffer_shape(g, sp, static_cast<std::size_t>(src.buffer))[static_cast<std::size_t>(src.dim)];
    }
}

void warmup_groups(TierManager& tm, const ShapePlan& sp) {
    std::vector<std::int64_t> params;
    for (auto& grp : tm.groups()) {
        if (!grp->kernel || has_empty_buffer(grp->group, sp)) continue;
        group_params(*grp->kernel, grp->group, sp, params);
        tm.ensure_compiled(*grp, params);
    }
}

namespace {

// The caller's tensor for graph output value `v`, when it can be written directly: dense,
// and sharing no storage with an input (compiled kernels assume buffers do not alias).
const Tensor* caller_buffer(const ir::Graph& graph, std::span<const Tensor> inputs, std::span<const Tensor> caller_outputs,
                            ir::ValueId v) {
    if (caller_outputs.empty()) return nullptr;
    for (std::size_t i = 0; i < graph.outputs.size(); ++i) {
        if (graph.outputs[i] != v) continue;
        const Tensor& c = caller_outputs[i];
        if (!c.is_contiguous()) return nullptr;
        for (const Tensor& in : inputs)
            if (in.shares_storage(c)) return nullptr;
        return &c;
    }
    return nullptr;
}

void run_compiled(const CompiledVersion& v, const kir::Kernel& k, const passes::Group& g, const ir::Graph& graph,
                  const ShapePlan& sp, std::vector<Tensor>& values, const std::vector<std::int64_t>& params,
                  std::span<const Tensor> inputs, std::span<const Tensor> caller_outputs) {
    std::vector<Tensor> keep;  // dense copies of strided inputs live until the kernel returns
    std::vector<void*> buffers;
    buffers.reserve(g.inputs.size() + g.outputs.size());
    for (auto in : g.inputs) {
        const Tensor& t = values[static_cast<std::size_t>(in)];
        if (t.is_contiguous()) {
            buffers.push_back(t.data());
        } else {
            keep.push_back(t.contiguous());
            buffers.push_back(keep.back().data());
        }
    }
    for (auto out : g.outputs) {
        if (const Tensor* c = caller_buffer(graph, inputs, caller_outputs, out)) {
            buffers.push_back(c->data());
            values[static_cast<std::size_t>(out)] = *c;
            continue;
        }
        Tensor t = Tensor::empty(sp.shapes[static_cast<std::size_t>(out)], graph.nodes[static_cast<std::size_t>(out)].type.dtype);
        buffers.push_back(t.data());
        values[static_cast<std::size_t>(out)] = std::move(t);
    }
    std::int64_t extent = kir::eval_index(k.extent, params.data());
    if (extent <= 0) return;
    std::int64_t work = 1;
    for (auto d : sp.shapes[static_cast<std::size_t>(g.outputs[0])]) work *= d;
    std::int64_t per_outer = std::max<std::int64_t>(1, work / extent);
    // A matmul kernel does K multiply-adds per output element.
    if (k.matmul) per_outer *= std::max<std::int64_t>(1, kir::eval_index(k.matmul->k, params.data()));
    tiers::KernelFn fn = v.code->entry();
    void* const* bufs = buffers.data();
    const std::int64_t* ps = params.data();
    core::parallel_range(extent, per_outer, [&](std::int64_t b, std::int64_t e) { fn(bufs, ps, b, e); });
}

}  // namespace

std::vector<Tensor> run_groups(const Plan& plan, TierManager& tm, const ShapePlan& sp, std::span<const Tensor> inputs,
                               profiling::FunctionProfile* profile, int* max_tier,
                               std::span<const Tensor> caller_outputs) {
    const ir::Graph& g = *plan.graph;
    std::vector<Tensor> values(g.nodes.size());
    for (std::size_t i = 0; i < g.inputs.size(); ++i) values[static_cast<std::size_t>(g.inputs[i])] = inputs[i];
    for (std::size_t id : plan.order)
        if (g.nodes[id].op == ir::Op::constant) values[id] = g.nodes[id].value;
    const auto& last_use = tm.last_use();
    const auto& step_of = tm.step_of();
    auto release = [&](std::size_t id, std::int32_t upto) {
        for (auto in : g.nodes[id].inputs)
            if (last_use[static_cast<std::size_t>(in)] <= upto && g.nodes[static_cast<std::size_t>(in)].op != ir::Op::input)
                values[static_cast<std::size_t>(in)] = Tensor();
    };
    std::vector<Tensor> args;
    std::vector<std::int64_t> params;
    int top = 0;
    for (auto& grp : tm.groups()) {
        GroupRuntime& gr = *grp;
        const passes::Group& group = gr.group;
        auto t0 = Clock::now();
        gr.calls.fetch_add(1, std::memory_order_relaxed);
        bool done = false, planned = false;
        // Zero-size buffers run on the interpreter: it raises the errors the op owes
        // (e.g. max over an empty row) and costs nothing.
        if (gr.kernel && !has_empty_buffer(group, sp)) {
            group_params(*gr.kernel, group, sp, params);
            planned = true;
            std::shared_ptr<const CodeSet> code = gr.code();
            if (!code->versions.empty()) {
                if (const CompiledVersion* v = TierManager::select(*code, params.data())) {
                    run_compiled(*v, *gr.kernel, group, g, sp, values, params, inputs, caller_outputs);
                    top = std::max(top, v->tier);
                    gr.calls_compiled.fetch_add(1, std::memory_order_relaxed);
                    done = true;
                } else {
                    gr.guard_failures.fetch_add(1, std::memory_order_relaxed);
                    gr.deopts.fetch_add(1, std::memory_order_relaxed);
                }
            }
        }
        if (!done) {
            for (auto nid : group.nodes) {
                auto id = static_cast<std::size_t>(nid);
                const ir::Node& node = g.nodes[id];
                args.clear();
                for (auto in : node.inputs) args.push_back(values[static_cast<std::size_t>(in)]);
                const ir::Node& eff = sp.nodes[id] ? *sp.nodes[id] : node;
                auto n0 = Clock::now();
                values[id] = interp::run_node(eff, args, sp.shapes[id]);
                if (profile) profile->record_node(id, ns_since(n0));
                args.clear();
                release(id, step_of[id]);
            }
        }
        // Free what this group read for the last time (compiled groups read all at once).
        std::int32_t last_step = step_of[static_cast<std::size_t>(group.nodes.back())];
        for (auto nid : group.nodes) release(static_cast<std::size_t>(nid), last_step);
        gr.ns.fetch_add(ns_since(t0), std::memory_order_relaxed);
        if (!done && planned) tm.note_interpreted(gr, params);
    }
    *max_tier = top;
    std::vector<Tensor> outs;
    outs.reserve(g.outputs.size());
    for (auto o : g.outputs) outs.push_back(values[static_cast<std::size_t>(o)]);
    return outs;
}

}  // namespace kiln::jit
