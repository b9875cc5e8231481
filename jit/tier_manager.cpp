#include "jit/tier_manager.h"

#include "src/kir/lower.h"
#include "src/support/check.h"
#include "src/support/log.h"

#include <algorithm>
#include <chrono>
#include <climits>

namespace kiln::jit {
namespace {
// A group that has seen more distinct signatures than this gets a generic version rather
// than more specialisations.
constexpr std::size_t kDistinctBeforeGeneric = 4;
// Distinct signatures counted per group (memory stays bounded).
constexpr std::size_t kMaxTrackedSignatures = 64;
// Compile failures of a group before it is blacklisted.
constexpr int kMaxFailures = 3;
}  // namespace

// The lowering decides what it can express and says why when it cannot.
GroupRuntime::GroupRuntime(const ir::Graph& g, passes::Group grp) : group(std::move(grp)) {
    kernel = kir::lower(g, group, &lower_failure);
}

TierManager::TierManager(std::shared_ptr<const ir::Graph> graph, const Options& options,
                         std::shared_ptr<tiers::Tier> tier2)
    : graph_(std::move(graph)), options_(options), tier2_(std::move(tier2)), partition_(passes::partition(*graph_)) {
    for (const auto& grp : partition_.groups) groups_.push_back(std::make_unique<GroupRuntime>(*graph_, grp));
    const auto& nodes = graph_->nodes;
    step_of_.assign(nodes.size(), -1);
    last_use_.assign(nodes.size(), -1);
    std::int32_t step = 0;
    for (const auto& grp : partition_.groups)
        for (auto id : grp.nodes) step_of_[static_cast<std::size_t>(id)] = step++;
    for (std::size_t id = 0; id < nodes.size(); ++id) {
        if (step_of_[id] < 0) continue;
        for (auto in : nodes[id].inputs)
            last_use_[static_cast<std::size_t>(in)] = std::max(last_use_[static_cast<std::size_t>(in)], step_of_[id]);
    }
    for (auto o : graph_->outputs) last_use_[static_cast<std::size_t>(o)] = INT32_MAX;
}

const CompiledVersion* TierManager::select(const CodeSet& code, const std::int64_t* params) {
    for (const auto& v : code.versions)
        if (v.guard.check(params)) return &v;
    return nullptr;
}

void TierManager::note_interpreted(GroupRuntime& gr, const std::vector<std::int64_t>& params) {
    if (!tier2_ || !gr.kernel) return;
    bool generic = false;
    {
        std::lock_guard<std::mutex> lock(gr.mu);
        if (gr.blacklisted || gr.compiling) return;
        auto it = gr.signature_calls.find(params);
        if (it == gr.signature_calls.end()) {
            if (gr.signature_calls.size() >= kMaxTrackedSignatures) return;
            it = gr.signature_calls.emplace(params, 0).first;
        }
        if (++it->second < static_cast<std::uint64_t>(options_.tier2_threshold)) return;
        bool room = gr.specializations.load(std::memory_order_relaxed) < options_.max_specializations;
        generic = !room || gr.signature_calls.size() > kDistinctBeforeGeneric;
        if (generic && gr.generic_compiles >= 2) return;  // nothing more to try
        gr.compiling = true;
    }
    compile(gr, params, generic);
}

void TierManager::ensure_compiled(GroupRuntime& gr, const std::vector<std::int64_t>& params) {
    if (!tier2_ || !gr.kernel) return;
    if (select(*gr.code(), params.data())) return;
    bool generic = false;
    {
        std::lock_guard<std::mutex> lock(gr.mu);
        if (gr.blacklisted || gr.compiling) return;
        generic = gr.specializations.load(std::memory_order_relaxed) >= options_.max_specializations;
        if (generic && gr.generic_compiles >= 2) return;
        if (gr.signature_calls.size() < kMaxTrackedSignatures) gr.signature_calls.emplace(params, 0);
        gr.compiling = true;
    }
    compile(gr, params, generic);
}

void TierManager::compile(GroupRuntime& gr, const std::vector<std::int64_t>& params, bool generic) {
    const kir::Kernel& k = *gr.kernel;
    kir::Specialization spec;
    spec.params.resize(k.params.size());
    Guard guard;
    {
        std::lock_guard<std::mutex> lock(gr.mu);
        for (std::size_t p = 0; p < params.size(); ++p) {
            bool bind = true;
            if (generic) {
                // First generic version: bind what every observed signature agreed on.
                if (gr.generic_compiles > 0) bind = false;
                for (const auto& [sig, n] : gr.signature_calls)
                    if (sig[p] != params[p]) bind = false;
            }
            if (bind) {
                spec.params[p] = params[p];
                guard.bound.emplace_back(static_cast<int>(p), params[p]);
            }
        }
    }
    auto t0 = std::chrono::steady_clock::now();
    tiers::CompileResult r;
    try {
        r = tier2_->compile(k, spec);
    } catch (const std::exception& e) {  // a tier must not throw; if it does, it is a failure like any other
        r.bailout = tiers::Bailout::backend_error;
        r.detail = e.what();
    }
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
    counters_.compile_us.fetch_add(static_cast<std::uint64_t>(us), std::memory_order_relaxed);
    counters_.bailouts[static_cast<std::size_t>(r.bailout)].fetch_add(1, std::memory_order_relaxed);

    std::lock_guard<std::mutex> lock(gr.mu);
    gr.compiling = false;
    if (!r.kernel) {
        counters_.compile_failures.fetch_add(1, std::memory_order_relaxed);
        if (++gr.failures >= kMaxFailures) gr.blacklisted = true;
        support::log().info("{}: {} compile failed ({}: {}){}", graph_->name, gr.group.name, tiers::bailout_name(r.bailout),
                            r.detail, gr.blacklisted ? "; blacklisted" : "");
        // Back off: the signature counts start again, so the next try needs another threshold of calls.
        gr.signature_calls.clear();
        return;
    }
    counters_.compiles.fetch_add(1, std::memory_order_relaxed);
    auto next = std::make_shared<CodeSet>(*gr.code());
    CompiledVersion v{std::move(spec), std::move(guard), std::move(r.kernel), tier2_->level(), generic};
    if (generic) {
        ++gr.generic_compiles;
        next->versions.push_back(std::move(v));
    } else {
        gr.specializations.fetch_add(1, std::memory_order_relaxed);
        next->versions.insert(next->versions.begin(), std::move(v));
    }
    gr.publish(std::move(next));
    support::log().info("{}: {} -> tier {} ({}, {} us)", graph_->name, gr.group.name, tier2_->level(),
                        generic ? "generic" : "specialised", us);
}

}  // namespace kiln::jit
