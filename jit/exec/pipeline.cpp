#include "jit/exec/pipeline.h"

#include "src/ir/printer.h"
#include "src/ir/verifier.h"
#include "src/kir/lower.h"
#include "src/support/check.h"
#include "src/support/log.h"
#include "tiers/gpu/gpu_source.h"
#include "tiers/interp/interp_tier.h"

#include <chrono>
#include <climits>
#include <filesystem>
#include <fstream>

namespace kiln::jit {
namespace {

// Times the steps of one pipeline run into `steps`.
class StepTimer {
public:
    explicit StepTimer(std::vector<PipelineStep>& steps) : steps_(steps) {}
    template <class F> void operator()(const char* name, F&& step) {
        const auto t0 = std::chrono::steady_clock::now();
        step();
        const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - t0;
        steps_.push_back({name, ms.count()});
    }

private:
    std::vector<PipelineStep>& steps_;
};

// Each group's kernel IR, verified, or the reason it has none (the group then runs on the
// interpreter: a kernel that fails verification is Kiln's bug, but never a wrong answer);
// and tier 0's code for it.
std::vector<std::shared_ptr<GroupRuntime>> lower_groups(const ir::Graph& g, const passes::Partition& p) {
    tiers::Tier& tier0 = *interp::interp_tier();
    std::vector<std::shared_ptr<GroupRuntime>> groups;
    groups.reserve(p.groups.size());
    for (std::size_t i = 0; i < p.groups.size(); ++i) {
        const passes::Group& grp = p.groups[i];
        std::string why;
        std::optional<kir::Kernel> k = kir::lower(g, grp, &why);
        if (k) {
            try {
                kir::verify(*k);
            } catch (const std::exception& e) {
                support::log().error("{}: {}: the lowered kernel IR fails verification: {}", g.name, grp.name, e.what());
                why = std::string("the lowered kernel IR fails verification: ") + e.what();
                k.reset();
            }
        }
        tiers::CompileResult interpreted = tier0.compile_group({g, grp, k ? &*k : nullptr}, {});
        KILN_CHECK(interpreted.kernel != nullptr, "the interpreter declined " << grp.name << ": " << interpreted.detail);
        groups.push_back(
            std::make_shared<GroupRuntime>(i, grp, std::move(k), std::move(why), std::move(interpreted.kernel)));
    }
    return groups;
}

void schedule(Executable& x) {
    const auto& nodes = x.graph->nodes;
    const std::size_t n = nodes.size();
    std::vector<bool> needed(n, false);
    for (auto o : x.graph->outputs) needed[static_cast<std::size_t>(o)] = true;
    for (auto i : x.graph->inputs) needed[static_cast<std::size_t>(i)] = true;
    for (std::size_t i = n; i-- > 0;)
        if (needed[i])
            for (auto in : nodes[i].inputs) needed[static_cast<std::size_t>(in)] = true;
    for (std::size_t i = 0; i < n; ++i)
        if (needed[i]) x.order.push_back(i);
    x.arg_index.assign(n, -1);
    for (std::size_t i = 0; i < x.graph->inputs.size(); ++i)
        x.arg_index[static_cast<std::size_t>(x.graph->inputs[i])] = static_cast<std::int32_t>(i);

    x.step_of.assign(n, -1);
    x.last_use.assign(n, -1);
    std::int32_t step = 0;
    for (const auto& grp : x.partition.groups)
        for (auto id : grp.nodes) x.step_of[static_cast<std::size_t>(id)] = step++;
    for (std::size_t id = 0; id < n; ++id) {
        if (x.step_of[id] < 0) continue;
        for (auto in : nodes[id].inputs) {
            auto& last = x.last_use[static_cast<std::size_t>(in)];
            last = std::max(last, x.step_of[id]);
        }
    }
    for (auto o : x.graph->outputs) x.last_use[static_cast<std::size_t>(o)] = INT32_MAX;
}

void dump(const Executable& x, const PipelineSettings& s) {
    const std::string& name = x.graph->name;
    auto write = [&](const std::string& suffix, const std::string& text) {
        namespace fs = std::filesystem;
        const fs::path p = fs::path(s.dump_dir) / (name + suffix);  // the engine created the folder
        std::ofstream out(p);
        if (out) out << text;
        else support::log().warn("KILN_DUMP: cannot write {}", p.string());
    };
    if (s.dump_graph) write(".graph.txt", ir::print(*x.graph));
    if (s.dump_groups) write(".groups.txt", passes::to_string(x.partition, *x.graph));
    if (s.dump_kir) {
        std::string text;
        for (const auto& gr : x.groups)
            text += gr->kernel ? kir::print(*gr->kernel) + "\n" : "# " + gr->group.name + ": " + gr->lower_failure + "\n\n";
        write(".kir.txt", text);
    }
    // The GPU source of every group the printer can express, GPU or not.
    for (const auto dialect : {tiers::gpu::Dialect::cuda, tiers::gpu::Dialect::hip}) {
        const bool hip = dialect == tiers::gpu::Dialect::hip;
        if (!(hip ? s.dump_hip : s.dump_cuda)) continue;
        for (const auto& gr : x.groups) {
            if (!gr->kernel) continue;
            const tiers::gpu::GpuSource src = tiers::gpu::print_source(*gr->kernel, {}, dialect);
            if (src.ok) write("." + gr->group.name + (hip ? ".hip" : ".cu"), src.code);
        }
    }
}

}  // namespace

std::shared_ptr<const Executable> lower_function(std::shared_ptr<const ir::Graph> graph, const PipelineSettings& s) {
    auto x = std::make_shared<Executable>();
    x->graph = std::move(graph);
    x->sample_runs = s.sample_runs;
    x->image_run_min_bytes = s.image_run_min_bytes;
    StepTimer step(x->steps);
    step("verify", [&] { ir::verify(*x->graph); });
    if (passes::nchwc_applies(*x->graph, s.nchwc))
        step("nchwc", [&] {
            auto blocked = std::make_shared<const ir::Graph>(passes::to_nchwc(*x->graph));
            ir::verify(*blocked);
            x->graph = std::move(blocked);
        });
    const ir::Graph& g = *x->graph;
    step("partition", [&] { x->partition = passes::partition(g); });
    step("lower", [&] { x->groups = lower_groups(g, x->partition); });
    step("schedule", [&] { schedule(*x); });
    step("place", [&] { x->place.assign(g.nodes.size(), Place::host); });
    if (s.dump_graph || s.dump_groups || s.dump_kir || s.dump_cuda || s.dump_hip) step("dump", [&] { dump(*x, s); });

    if (support::log().should_log(spdlog::level::debug)) {
        std::size_t lowered = 0;
        for (const auto& gr : x->groups) lowered += gr->kernel.has_value();
        std::string times;
        for (const auto& st : x->steps) times += fmt::format(" {} {:.3f} ms;", st.name, st.ms);
        support::log().debug("pipeline '{}': {} nodes, {} groups, {} lowered;{}", g.name, g.nodes.size(),
                             x->groups.size(), lowered, times);
    }
    return x;
}

}  // namespace kiln::jit
