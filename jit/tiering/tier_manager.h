#pragma once
// The tier-up policy of one function: it takes the groups of the function's executable plan
// (jit/exec/pipeline.h), hears from the executor after each group runs below tier 2
// (jit/exec/run_plan.h: CallObserver), counts calls per group and shape signature, and
// compiles when the policy says so (thresholds and limits: jit/tiering/tunables.def):
//   - tier 1 (baseline, generic: every dim a run-time argument) once a group has run
//     `tier1_threshold` times on the interpreter;
//   - tier 2, after `tier2_threshold` calls of a group at one signature (its param values)
//     on a lower tier, a specialisation with every param bound, while the group holds fewer
//     than `max_specializations` (so the function holds at most that many per group: one
//     per shape signature of traffic) and the group has seen few distinct signatures;
//   - otherwise (a dim keeps changing, or the limit is reached) one generic tier-2 version
//     that binds only the params every observed signature agreed on; if its guard fails
//     later, a second generic version with no param bound. No recompile storms: at most
//     max_specializations + 2 tier-2 compiles per group succeed, and failures back off and
//     then blacklist the group.
// Compiles run on the engine's CompileQueue (jit/tiering/compile_queue.h) unless async_compile is
// off or there is no queue: calls never wait for them and run the best code already
// published. Jobs are ordered by the group's share of its function's time (hot groups
// first) and tier-1 jobs before tier-2 ones. One compile per group and tier is in flight at
// a time (identical requests are made once).
#include "jit/exec/code_cache.h"
#include "jit/exec/group_runtime.h"
#include "jit/exec/run_plan.h"
#include "jit/tiering/compile_queue.h"
#include "jit/tiering/disk_cache.h"
#include "jit/tiering/settings.h"
#include "profiling/chrome_trace.h"

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace kiln::jit {

struct TierCounters {
    std::atomic<std::uint64_t> compiles{0};
    std::atomic<std::uint64_t> compile_failures{0};
    std::atomic<std::uint64_t> compile_us{0};
    std::atomic<std::uint64_t> cache_hits{0};  // code found in the engine's code cache
    std::atomic<std::uint64_t> disk_hits{0};   // code loaded from the persistent cache
    std::array<std::atomic<std::uint64_t>, tiers::kNumBailouts> bailouts{};  // by tiers::Bailout
};

// The tier-up policy's state of one group (GroupRuntime::tierup), under `mu`.
struct TierUpState {
    std::mutex mu;
    std::map<std::vector<std::int64_t>, std::uint64_t> signature_calls;  // param values -> calls (bounded)
    int failures = 0;          // compile failures of this group
    bool blacklisted = false;  // too many failures: never tried again
    bool compiling = false;    // a tier-2 compile is in flight (identical requests are not repeated)
    // Tier 1: requested after tier1_threshold interpreted calls (the profile's calls less its
    // compiled calls, counted from `interpreted_base`, which a reset moves to the count then);
    // requested once, whatever the outcome (a generic version serves every shape, and its
    // bail-outs are deterministic).
    std::uint64_t interpreted_base = 0;
    // Set when an eviction (which may be handled by another function's manager, without this
    // group's profile) took the tier-1 version: the next call moves interpreted_base.
    bool rebase_interpreted = false;
    bool tier1_requested = false;
    int generic_compiles = 0;
    // Each eviction of this group's code doubles the calls it needs before compiling again
    // (up to Tunables::max_backoff), so a cache too small for the traffic cannot cause a compile storm.
    std::uint64_t backoff = 1;
    std::atomic<int> specializations{0};  // fully bound versions of this group (read without the lock by stats)
};

// The compiling tiers and the compile queue an engine gives its functions (any may be null).
struct EngineResources {
    std::shared_ptr<tiers::Tier> tier1, tier2;
    std::shared_ptr<CompileQueue> queue;
    std::shared_ptr<profiling::ChromeTrace> trace;  // KILN_TRACE: compiles are recorded here
    std::shared_ptr<CodeCache> cache;         // the engine's code cache (null: a private unbounded one)
    std::shared_ptr<DiskCache> disk;          // KILN_CACHE_DIR (null: none)
};

// Test hook: every later tier-2 compile first sleeps this long (0: none), as a slow compile would.
void set_compile_delay_for_testing(std::chrono::milliseconds delay);

class TierManager final : public CallObserver {
public:
    // `profile`: the function's, which outlives this manager (its counters drive the policy).
    TierManager(std::shared_ptr<const Executable> exe, const profiling::FunctionProfile& profile,
                const Tunables& tunables, EngineResources tiers);
    ~TierManager();  // cancel_compiles()
    // Drops this function's queued compiles and waits for its running ones; no compile of it
    // runs afterwards.
    void cancel_compiles();
    TierManager(const TierManager&) = delete;
    TierManager& operator=(const TierManager&) = delete;

    const TierCounters& counters() const { return counters_; }
    profiling::ChromeTrace* trace() const { return tiers_.trace.get(); }
    // Whether this function has a compiling tier (CallObserver).
    bool compiles() const override { return tiers_.tier1 != nullptr || tiers_.tier2 != nullptr; }
    // Blocks until every compile requested so far has finished (Function::wait_for_compiles).
    void wait_for_compiles();
    // Compiles, for every lowerable group, a version that covers this shape plan, and waits
    // for them (Function::warmup).
    void warmup(const ShapePlan& sp);
    // Takes evicted code out of the groups that published it and resets their tier-up
    // state for it (a dropped specialisation needs another threshold of calls to come back).
    // Call holding no group lock.
    void drop(std::vector<Evicted>& evicted);

    // Called after a group ran below tier 2 (`ran_tier`: 0 the interpreter, 1 the baseline)
    // with these params: counts the call and the signature and requests compiles when the
    // policy says so (CallObserver).
    void group_ran(GroupRuntime& gr, const std::vector<std::int64_t>& params, int ran_tier) override;
    // Requests (no threshold) a tier-2 version covering these params, unless one exists, the
    // group is blacklisted, or a compile is in flight (warmup; wait_for_compiles waits for it).
    void ensure_compiled(GroupRuntime& gr, const std::vector<std::int64_t>& params);

private:
    void request_tier1(GroupRuntime& gr);
    void request_tier2(GroupRuntime& gr, const std::vector<std::int64_t>& params, bool generic);
    void submit(GroupRuntime& gr, double boost, std::function<void()> job);
    void compile_tier1(GroupRuntime& gr);
    void compile_tier2(GroupRuntime& gr, const std::vector<std::int64_t>& params, bool generic);
    // Code for `gr` at `spec` from `tier`: from the engine's code cache, the persistent
    // cache (tiers that can load objects), or a compile (timed, counted, traced).
    struct Obtained {
        std::shared_ptr<CodeEntry> entry;  // null: no code (result says why)
        tiers::CompileResult result;
        std::uint64_t us = 0;              // time spent compiling or loading
        bool compiled = false;             // a compile ran
    };
    Obtained obtain(tiers::Tier& tier, GroupRuntime& gr, const kir::Specialization& spec, bool generic,
                    std::vector<Evicted>* evicted);
    void trace_compile(const tiers::Tier& tier, const GroupRuntime& gr, const kir::Specialization& spec, bool generic,
                       std::chrono::steady_clock::time_point t0, const char* outcome, const char* cache);

    std::shared_ptr<const Executable> exe_;
    const profiling::FunctionProfile& profile_;
    const std::string& name_;  // the function's
    Tunables tunables_;
    EngineResources tiers_;
    std::shared_ptr<CompileQueue::Ticket> ticket_;
    TierCounters counters_;
};

}  // namespace kiln::jit
