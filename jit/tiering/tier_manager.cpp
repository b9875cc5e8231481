#include "jit/tiering/tier_manager.h"

#include "src/support/check.h"
#include "src/support/log.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <thread>

namespace kiln::jit {
namespace {
std::atomic<std::int64_t> g_compile_delay_ms{0};

// threshold * backoff, saturating (a threshold may be "never": INT64_MAX).
std::uint64_t scaled(std::int64_t threshold, std::uint64_t backoff) {
    const auto t = static_cast<std::uint64_t>(threshold);
    return t > UINT64_MAX / backoff ? UINT64_MAX : t * backoff;
}
}  // namespace

void set_compile_delay_for_testing(std::chrono::milliseconds delay) { g_compile_delay_ms.store(delay.count()); }

TierManager::TierManager(std::shared_ptr<const Executable> exe, const profiling::FunctionProfile& profile,
                         const Tunables& tunables, EngineResources tiers)
    : exe_(std::move(exe)), profile_(profile), name_(exe_->graph->name), tunables_(tunables), tiers_(std::move(tiers)) {
    if (tiers_.queue && tunables_.async_compile) ticket_ = tiers_.queue->new_ticket();
    if (!tiers_.cache) tiers_.cache = std::make_shared<CodeCache>(0);
    for (const auto& gr : exe_->groups) gr->tierup = std::make_shared<TierUpState>();
}

TierManager::~TierManager() { cancel_compiles(); }

void TierManager::cancel_compiles() {
    if (ticket_) tiers_.queue->cancel(ticket_);
}

void TierManager::wait_for_compiles() {
    if (ticket_) ticket_->wait_idle();
}

void TierManager::warmup(const ShapePlan& sp) {
    std::vector<std::int64_t> params;
    // Two rounds: a group whose request was skipped because a compile of it (for another
    // signature) was in flight gets its own in the second.
    for (int round = 0; round < 2; ++round) {
        for (auto& grp : exe_->groups) {
            if (!grp->kernel || has_empty_buffer(grp->group, sp)) continue;
            group_params(*grp->kernel, grp->group, sp, params);
            ensure_compiled(*grp, params);
        }
        wait_for_compiles();  // warmup compiles ahead: the next call finds the code
    }
}

void TierManager::drop(std::vector<Evicted>& evicted) {
    for (Evicted& ev : evicted) {
        const CodeEntry* e = ev.entry.get();
        for (const auto& w : ev.users) {
            std::shared_ptr<GroupRuntime> gr = w.lock();
            if (!gr) continue;
            TierUpState& st = *gr->tierup;
            std::lock_guard<std::mutex> lock(st.mu);
            auto next = std::make_shared<CodeSet>(*gr->code());
            std::uint64_t dropped = 0;
            for (const CompiledVersion& v : next->versions) {
                if (v.entry.get() != e) continue;
                ++dropped;
                if (v.tier < 2) {  // tier 1 comes back after another threshold of interpreted calls
                    st.tier1_requested = false;
                    st.rebase_interpreted = true;
                } else if (v.generic) {
                    --st.generic_compiles;
                } else {
                    st.specializations.fetch_sub(1, std::memory_order_relaxed);
                    std::vector<std::int64_t> sig;
                    for (const auto& p : v.spec.params) sig.push_back(p.value_or(0));
                    st.signature_calls.erase(sig);  // another threshold of calls before it is compiled again
                }
            }
            if (!dropped) continue;
            st.backoff = std::min(st.backoff * 2, tunables_.max_backoff);
            std::erase_if(next->versions, [&](const CompiledVersion& v) { return v.entry.get() == e; });
            gr->publish(std::move(next));
            gr->evictions.fetch_add(dropped, std::memory_order_relaxed);
            if (auto* tr = trace())
                tr->instant("cache", "evict", "\"group\":\"" + profiling::ChromeTrace::escape(gr->group.name) +
                                                  "\",\"tier\":" + std::to_string(e->tier) +
                                                  ",\"bytes\":" + std::to_string(e->bytes));
        }
    }
    evicted.clear();
}

void TierManager::group_ran(GroupRuntime& gr, const std::vector<std::int64_t>& params, int ran_tier) {
    if (!gr.kernel || !compiles()) return;
    TierUpState& st = *gr.tierup;
    const profiling::GroupProfile& prof = profile_.group(gr.index);
    bool t1 = false, t2 = false, generic = false;
    {
        std::lock_guard<std::mutex> lock(st.mu);
        if (st.rebase_interpreted) {  // count from the call after the eviction (this one, when interpreted)
            st.interpreted_base = prof.interpreted_calls() - (ran_tier == 0 ? 1 : 0);
            st.rebase_interpreted = false;
        }
        if (tiers_.tier1 && ran_tier == 0 && !st.tier1_requested &&
            prof.interpreted_calls() - st.interpreted_base >=
                scaled(tunables_.tier1_threshold, st.backoff)) {
            st.tier1_requested = t1 = true;
        }
        if (tiers_.tier2 && !st.blacklisted && !st.compiling) {
            auto it = st.signature_calls.find(params);
            if (it == st.signature_calls.end() && st.signature_calls.size() < tunables_.max_tracked_signatures)
                it = st.signature_calls.emplace(params, 0).first;
            if (it != st.signature_calls.end() && ++it->second >= scaled(tunables_.tier2_threshold, st.backoff)) {
                bool room = st.specializations.load(std::memory_order_relaxed) < tunables_.max_specializations;
                generic = !room || st.signature_calls.size() > tunables_.distinct_before_generic;
                if (!generic || st.generic_compiles < tunables_.max_generic_versions) st.compiling = t2 = true;  // else nothing more to try
            }
        }
    }
    if (t1) request_tier1(gr);
    if (t2) request_tier2(gr, params, generic);
}

void TierManager::ensure_compiled(GroupRuntime& gr, const std::vector<std::int64_t>& params) {
    if (!tiers_.tier2 || !gr.kernel) return;
    TierUpState& st = *gr.tierup;
    for (const auto& v : gr.code()->versions)
        if (v.tier >= 2 && v.guard.check(params.data())) return;
    bool generic = false;
    {
        std::lock_guard<std::mutex> lock(st.mu);
        if (st.blacklisted || st.compiling) return;
        generic = st.specializations.load(std::memory_order_relaxed) >= tunables_.max_specializations;
        if (generic && st.generic_compiles >= tunables_.max_generic_versions) return;
        if (st.signature_calls.size() < tunables_.max_tracked_signatures) st.signature_calls.emplace(params, 0);
        st.compiling = true;
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
    const std::uint64_t total = profile_.total_group_ns();
    const std::uint64_t ns = profile_.group(gr.index).ns.load(std::memory_order_relaxed);
    const double share = total ? static_cast<double>(ns) / static_cast<double>(total) : 0.0;
    tiers_.queue->submit(ticket_, boost + share, std::move(job));
}

void TierManager::request_tier1(GroupRuntime& gr) {
    submit(gr, tunables_.tier1_priority_boost, [this, g = gr.shared_from_this()] { compile_tier1(*g); });
}

void TierManager::request_tier2(GroupRuntime& gr, const std::vector<std::int64_t>& params, bool generic) {
    submit(gr, 0.0, [this, g = gr.shared_from_this(), params, generic] { compile_tier2(*g, params, generic); });
}

void TierManager::trace_compile(const tiers::Tier& tier, const GroupRuntime& gr, const kir::Specialization& spec,
                                bool generic, std::chrono::steady_clock::time_point t0, const char* outcome,
                                const char* cache) {
    auto* tr = trace();
    if (!tr) return;
    std::string bound;
    for (std::size_t p = 0; p < spec.params.size(); ++p)
        if (spec.params[p]) bound += (bound.empty() ? "" : ",") + gr.kernel->params[p] + "=" + std::to_string(*spec.params[p]);
    tr->complete("compile", name_ + "/" + gr.group.name + " -> tier " + std::to_string(tier.level()), t0,
                 std::chrono::steady_clock::now(),
                 "\"backend\":\"" + std::string(tier.name()) + "\",\"tier\":" + std::to_string(tier.level()) +
                     ",\"group\":\"" + profiling::ChromeTrace::escape(gr.group.name) + "\",\"generic\":" +
                     (generic ? "true" : "false") + ",\"bound\":\"" + profiling::ChromeTrace::escape(bound) +
                     "\",\"outcome\":\"" + outcome + "\",\"cache\":\"" + cache + "\"");
}

TierManager::Obtained TierManager::obtain(tiers::Tier& tier, GroupRuntime& gr, const kir::Specialization& spec,
                                          bool generic, std::vector<Evicted>* evicted) {
    Obtained o;
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed_us = [&] {
        return static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
    };
    const std::string key = code_key(tier, gr.kir_text(), spec);
    const std::shared_ptr<GroupRuntime> self = gr.shared_from_this();
    // 1. Code another group of this engine already has, or is making now (then this waits).
    if ((o.entry = tiers_.cache->find_or_claim(key, self))) {
        counters_.cache_hits.fetch_add(1, std::memory_order_relaxed);
        trace_compile(tier, gr, spec, generic, t0, "compiled", "hit");
        return o;
    }
    struct Release {  // after the insert below, so that the waiters find the code
        CodeCache& cache;
        const std::string& key;
        ~Release() { cache.release(key); }
    } release{*tiers_.cache, key};
    // 2. Code an earlier process left in KILN_CACHE_DIR.
    DiskCache* disk = tier.persists_code() ? tiers_.disk.get() : nullptr;
    if (disk) {
        if (auto stored = disk->load(key)) {
            tiers::CompileResult r = tier.load(stored->object, stored->symbol);
            if (r.kernel) {
                o.us = elapsed_us();
                counters_.disk_hits.fetch_add(1, std::memory_order_relaxed);
                o.entry = tiers_.cache->insert(key, std::move(r.kernel), tier.level(), self, evicted);
                trace_compile(tier, gr, spec, generic, t0, "compiled", "disk");
                return o;
            }
            if (r.bailout != tiers::Bailout::unavailable) disk->reject(key, "the tier cannot load it: " + r.detail);
        }
    }
    // 3. A compile.
    if (auto ms = g_compile_delay_ms.load(); ms > 0 && tier.level() >= 2)
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    tiers::CompileResult r;
    try {
        r = tier.compile_group({*exe_->graph, gr.group, &*gr.kernel}, spec);
    } catch (const std::exception& e) {  // a tier must not throw; if it does, it is a failure like any other
        r = tiers::CompileResult{};
        r.bailout = tiers::Bailout::backend_error;
        r.detail = e.what();
    }
    o.compiled = true;
    o.us = elapsed_us();
    trace_compile(tier, gr, spec, generic, t0, r.kernel ? "compiled" : tiers::bailout_name(r.bailout).data(), "miss");
    counters_.compile_us.fetch_add(o.us, std::memory_order_relaxed);
    counters_.bailouts[static_cast<std::size_t>(r.bailout)].fetch_add(1, std::memory_order_relaxed);
    if (r.kernel) {
        counters_.compiles.fetch_add(1, std::memory_order_relaxed);
        const auto t = static_cast<std::size_t>(std::clamp(tier.level(), 0, static_cast<int>(kNumTiers) - 1));
        gr.compiles_by_tier[t].fetch_add(1, std::memory_order_relaxed);
        gr.compile_us_by_tier[t].fetch_add(o.us, std::memory_order_relaxed);
    } else {
        counters_.compile_failures.fetch_add(1, std::memory_order_relaxed);
    }
    if (r.kernel) {
        if (disk && !r.object.empty()) disk->store(key, DiskEntry{std::move(r.object), std::move(r.symbol)});
        o.entry = tiers_.cache->insert(key, std::move(r.kernel), tier.level(), self, evicted);
    }
    o.result = std::move(r);
    return o;
}

void TierManager::compile_tier1(GroupRuntime& gr) {
    const kir::Kernel& k = *gr.kernel;
    TierUpState& st = *gr.tierup;
    kir::Specialization spec;
    spec.params.resize(k.params.size());  // nothing bound: one version serves every shape
    std::vector<Evicted> evicted;
    Obtained o = obtain(*tiers_.tier1, gr, spec, true, &evicted);
    {
        std::lock_guard<std::mutex> lock(st.mu);
        if (!o.entry) {
            // Not retried: a generic kernel's bail-out is deterministic (tier1_requested stays set).
            support::log().info("{}: {} stays below tier 1 ({}: {})", name_, gr.group.name,
                                tiers::bailout_name(o.result.bailout), o.result.detail);
            return;
        }
        // Code evicted since it was found is not published (the cache no longer accounts it).
        if (o.entry->resident.load(std::memory_order_acquire)) {
            auto next = std::make_shared<CodeSet>(*gr.code());
            next->versions.push_back(
                CompiledVersion{std::move(spec), Guard{}, o.entry->code, o.entry, tiers_.tier1->level(), true});
            gr.publish(std::move(next));
            support::log().info("{}: {} -> tier {} ({} us)", name_, gr.group.name, tiers_.tier1->level(), o.us);
        } else {
            st.tier1_requested = false;
            st.interpreted_base = profile_.group(gr.index).interpreted_calls();
        }
    }
    drop(evicted);
}

void TierManager::compile_tier2(GroupRuntime& gr, const std::vector<std::int64_t>& params, bool generic) {
    const kir::Kernel& k = *gr.kernel;
    TierUpState& st = *gr.tierup;
    kir::Specialization spec;
    spec.params.resize(k.params.size());
    Guard guard;
    {
        std::lock_guard<std::mutex> lock(st.mu);
        for (std::size_t p = 0; p < params.size(); ++p) {
            bool bind = true;
            if (generic) {
                // First generic version: bind what every observed signature agreed on.
                if (st.generic_compiles > 0) bind = false;
                for (const auto& [sig, n] : st.signature_calls)
                    if (sig[p] != params[p]) bind = false;
            }
            if (bind) {
                spec.params[p] = params[p];
                guard.bound.emplace_back(static_cast<int>(p), params[p]);
            }
        }
    }
    std::vector<Evicted> evicted;
    Obtained o = obtain(*tiers_.tier2, gr, spec, generic, &evicted);
    const bool slow = o.entry && o.compiled && o.us > tunables_.compile_budget_us;
    if (slow) counters_.bailouts[static_cast<std::size_t>(tiers::Bailout::timeout)].fetch_add(1, std::memory_order_relaxed);
    {
        std::lock_guard<std::mutex> lock(st.mu);
        st.compiling = false;
        if (!o.entry || slow) {
            if (++st.failures >= tunables_.max_failures) st.blacklisted = true;
            support::log().info("{}: {} compile {} ({}: {}){}", name_, gr.group.name, slow ? "over budget" : "failed",
                                tiers::bailout_name(slow ? tiers::Bailout::timeout : o.result.bailout), o.result.detail,
                                st.blacklisted ? "; blacklisted" : "");
            // Back off: the signature counts start again, so the next try needs another threshold of calls.
            st.signature_calls.clear();
        }
        if (o.entry && o.entry->resident.load(std::memory_order_acquire)) {
            auto next = std::make_shared<CodeSet>(*gr.code());
            CompiledVersion v{std::move(spec), std::move(guard), o.entry->code, o.entry, tiers_.tier2->level(), generic};
            auto first_lower = std::find_if(next->versions.begin(), next->versions.end(),
                                            [&](const CompiledVersion& c) { return c.tier < v.tier; });
            if (generic) {
                ++st.generic_compiles;
                next->versions.insert(first_lower, std::move(v));  // after the specialisations, before tier 1
            } else {
                st.specializations.fetch_add(1, std::memory_order_relaxed);
                next->versions.insert(next->versions.begin(), std::move(v));
            }
            gr.publish(std::move(next));
            support::log().info("{}: {} -> tier {} ({}, {} us{})", name_, gr.group.name, tiers_.tier2->level(),
                                generic ? "generic" : "specialised", o.us,
                                o.compiled ? "" : ", from a cache");
        }
    }
    drop(evicted);
}

}  // namespace kiln::jit
