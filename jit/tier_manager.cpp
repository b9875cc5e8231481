#include "jit/tier_manager.h"

#include "src/kir/lower.h"
#include "src/support/check.h"
#include "src/support/log.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <thread>

namespace kiln::jit {
namespace {
// A group that has seen more distinct signatures than this gets a generic version rather
// than more specialisations.
constexpr std::size_t kDistinctBeforeGeneric = 4;
// Distinct signatures counted per group (memory stays bounded).
constexpr std::size_t kMaxTrackedSignatures = 64;
// Compile failures of a group before it is blacklisted.
constexpr int kMaxFailures = 3;
// A tier-2 compile slower than this counts as a failure (a timeout) toward the blacklist;
// its code, which is correct, is still published.
constexpr std::uint64_t kCompileBudgetUs = 10'000'000;

std::atomic<std::int64_t> g_compile_delay_ms{0};
}  // namespace

void set_compile_delay_for_testing(std::chrono::milliseconds delay) { g_compile_delay_ms.store(delay.count()); }

// The lowering decides what it can express and says why when it cannot.
GroupRuntime::GroupRuntime(const ir::Graph& g, passes::Group grp) : group(std::move(grp)) {
    kernel = kir::lower(g, group, &lower_failure);
}

TierManager::TierManager(std::shared_ptr<const ir::Graph> graph, const Options& options, TierSet tiers)
    : graph_(std::move(graph)), options_(options), tiers_(std::move(tiers)), partition_(passes::partition(*graph_)) {
    if (tiers_.queue && options_.async_compile) ticket_ = tiers_.queue->new_ticket();
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

TierManager::~TierManager() { cancel_compiles(); }

void TierManager::cancel_compiles() {
    if (ticket_) tiers_.queue->cancel(ticket_);
}

void TierManager::wait_for_compiles() {
    if (ticket_) ticket_->wait_idle();
}

const CompiledVersion* TierManager::select(const CodeSet& code, const std::int64_t* params) {
    for (const auto& v : code.versions)
        if (v.guard.check(params)) return &v;
    return nullptr;
}

void TierManager::note_call(GroupRuntime& gr, const std::vector<std::int64_t>& params, int ran_tier) {
    if (!gr.kernel || !jit_enabled()) return;
    bool t1 = false, t2 = false, generic = false;
    {
        std::lock_guard<std::mutex> lock(gr.mu);
        if (tiers_.tier1 && ran_tier == 0 && !gr.tier1_requested &&
            ++gr.interpreted_calls >= static_cast<std::uint64_t>(options_.tier1_threshold)) {
            gr.tier1_requested = t1 = true;
        }
        if (tiers_.tier2 && !gr.blacklisted && !gr.compiling) {
            auto it = gr.signature_calls.find(params);
            if (it == gr.signature_calls.end() && gr.signature_calls.size() < kMaxTrackedSignatures)
                it = gr.signature_calls.emplace(params, 0).first;
            if (it != gr.signature_calls.end() && ++it->second >= static_cast<std::uint64_t>(options_.tier2_threshold)) {
                bool room = gr.specializations.load(std::memory_order_relaxed) < options_.max_specializations;
                generic = !room || gr.signature_calls.size() > kDistinctBeforeGeneric;
                if (!generic || gr.generic_compiles < 2) gr.compiling = t2 = true;  // else nothing more to try
            }
        }
    }
    if (t1) request_tier1(gr);
    if (t2) request_tier2(gr, params, generic);
}

void TierManager::ensure_compiled(GroupRuntime& gr, const std::vector<std::int64_t>& params) {
    if (!tiers_.tier2 || !gr.kernel) return;
    for (const auto& v : gr.code()->versions)
        if (v.tier >= 2 && v.guard.check(params.data())) return;
    bool generic = false;
    {
        std::lock_guard<std::mutex> lock(gr.mu);
        if (gr.blacklisted || gr.compiling) return;
        generic = gr.specializations.load(std::memory_order_relaxed) >= options_.max_specializations;
        if (generic && gr.generic_compiles >= 2) return;
        if (gr.signature_calls.size() < kMaxTrackedSignatures) gr.signature_calls.emplace(params, 0);
        gr.compiling = true;
    }
    request_tier2(gr, params, generic);
}

// Queued jobs run by priority: the group's share of its function's time so far (hot groups
// tier up first), plus `boost` (tier-1 jobs, microseconds each, go before tier-2 ones).
void TierManager::submit(GroupRuntime& gr, double boost, std::function<void()> job) {
    if (!ticket_) {
        job();
        return;
    }
    std::uint64_t total = 0;
    for (const auto& g : groups_) total += g->ns.load(std::memory_order_relaxed);
    const double share = total ? static_cast<double>(gr.ns.load(std::memory_order_relaxed)) / static_cast<double>(total) : 0.0;
    tiers_.queue->submit(ticket_, boost + share, std::move(job));
}

void TierManager::request_tier1(GroupRuntime& gr) {
    submit(gr, 1.0, [this, &gr] { compile_tier1(gr); });
}

void TierManager::request_tier2(GroupRuntime& gr, const std::vector<std::int64_t>& params, bool generic) {
    submit(gr, 0.0, [this, &gr, params, generic] { compile_tier2(gr, params, generic); });
}

tiers::CompileResult TierManager::run_tier(tiers::Tier& tier, const GroupRuntime& gr, const kir::Specialization& spec,
                                           bool generic, std::uint64_t* us) {
    auto t0 = std::chrono::steady_clock::now();
    tiers::CompileResult r;
    try {
        r = tier.compile(*gr.kernel, spec);
    } catch (const std::exception& e) {  // a tier must not throw; if it does, it is a failure like any other
        r = tiers::CompileResult{};
        r.bailout = tiers::Bailout::backend_error;
        r.detail = e.what();
    }
    const auto t1 = std::chrono::steady_clock::now();
    *us = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(t1 - t0).count());
    if (auto* tr = trace()) {
        std::string bound;
        for (std::size_t p = 0; p < spec.params.size(); ++p)
            if (spec.params[p]) bound += (bound.empty() ? "" : ",") + gr.kernel->params[p] + "=" + std::to_string(*spec.params[p]);
        tr->complete("compile", graph_->name + "/" + gr.group.name + " -> tier " + std::to_string(tier.level()), t0, t1,
                     "\"backend\":\"" + std::string(tier.name()) + "\",\"tier\":" + std::to_string(tier.level()) +
                         ",\"group\":\"" + profiling::Trace::escape(gr.group.name) + "\",\"generic\":" +
                         (generic ? "true" : "false") + ",\"bound\":\"" + profiling::Trace::escape(bound) +
                         "\",\"outcome\":\"" + (r.kernel ? std::string("compiled") : std::string(tiers::bailout_name(r.bailout))) +
                         "\",\"cache\":\"miss\"");
    }
    counters_.compile_us.fetch_add(*us, std::memory_order_relaxed);
    counters_.bailouts[static_cast<std::size_t>(r.bailout)].fetch_add(1, std::memory_order_relaxed);
    if (r.kernel) counters_.compiles.fetch_add(1, std::memory_order_relaxed);
    else counters_.compile_failures.fetch_add(1, std::memory_order_relaxed);
    return r;
}

void TierManager::compile_tier1(GroupRuntime& gr) {
    const kir::Kernel& k = *gr.kernel;
    kir::Specialization spec;
    spec.params.resize(k.params.size());  // nothing bound: one version serves every shape
    std::uint64_t us = 0;
    tiers::CompileResult r = run_tier(*tiers_.tier1, gr, spec, true, &us);
    std::lock_guard<std::mutex> lock(gr.mu);
    if (!r.kernel) {
        // Not retried: a generic kernel's bail-out is deterministic (tier1_requested stays set).
        support::log().info("{}: {} stays below tier 1 ({}: {})", graph_->name, gr.group.name,
                            tiers::bailout_name(r.bailout), r.detail);
        return;
    }
    auto next = std::make_shared<CodeSet>(*gr.code());
    next->versions.push_back(CompiledVersion{std::move(spec), Guard{}, std::move(r.kernel), tiers_.tier1->level(), true});
    gr.publish(std::move(next));
    support::log().info("{}: {} -> tier {} ({} us)", graph_->name, gr.group.name, tiers_.tier1->level(), us);
}

void TierManager::compile_tier2(GroupRuntime& gr, const std::vector<std::int64_t>& params, bool generic) {
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
    if (auto ms = g_compile_delay_ms.load(); ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    std::uint64_t us = 0;
    tiers::CompileResult r = run_tier(*tiers_.tier2, gr, spec, generic, &us);
    const bool slow = r.kernel && us > kCompileBudgetUs;
    if (slow) counters_.bailouts[static_cast<std::size_t>(tiers::Bailout::timeout)].fetch_add(1, std::memory_order_relaxed);

    std::lock_guard<std::mutex> lock(gr.mu);
    gr.compiling = false;
    if (!r.kernel || slow) {
        if (++gr.failures >= kMaxFailures) gr.blacklisted = true;
        support::log().info("{}: {} compile {} ({}: {}){}", graph_->name, gr.group.name, slow ? "over budget" : "failed",
                            tiers::bailout_name(slow ? tiers::Bailout::timeout : r.bailout), r.detail,
                            gr.blacklisted ? "; blacklisted" : "");
        // Back off: the signature counts start again, so the next try needs another threshold of calls.
        gr.signature_calls.clear();
        if (!r.kernel) return;
    }
    auto next = std::make_shared<CodeSet>(*gr.code());
    CompiledVersion v{std::move(spec), std::move(guard), std::move(r.kernel), tiers_.tier2->level(), generic};
    auto first_lower = std::find_if(next->versions.begin(), next->versions.end(),
                                    [&](const CompiledVersion& c) { return c.tier < v.tier; });
    if (generic) {
        ++gr.generic_compiles;
        next->versions.insert(first_lower, std::move(v));  // after the specialisations, before tier 1
    } else {
        gr.specializations.fetch_add(1, std::memory_order_relaxed);
        next->versions.insert(next->versions.begin(), std::move(v));
    }
    gr.publish(std::move(next));
    support::log().info("{}: {} -> tier {} ({}, {} us)", graph_->name, gr.group.name, tiers_.tier2->level(),
                        generic ? "generic" : "specialised", us);
}

}  // namespace kiln::jit
