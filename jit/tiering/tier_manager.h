#pragma once
// The tier-up policy of one function. It takes the groups of the function's executable plan
// (jit/exec/pipeline.h), hears from the executor after each group runs (jit/exec/run_plan.h:
// CallObserver) and decides from the group's profile (profiling/group_profile.h: its time per
// call on each kind of code, per param signature) and the engine's cost model
// (jit/tiering/cost_model.h: compile costs measured, speed-ups learned):
//   - a group compiles when the time it is expected to save pays for the compile:
//       (time per call now - estimated time per call on the next code)
//         x expected future calls (as many as it has run, at least min_future_calls)
//       >= the compile's cost (0 when the code is already made: this engine's code cache or
//          KILN_CACHE_DIR), times the group's backoff;
//     so a group that costs 30 ms a call compiles after its first call and a 2 µs one waits;
//   - the count thresholds are the bounds: a group compiles at the latest after
//     tier1_threshold calls on the interpreter (tier 1) and tier2_threshold calls below
//     tier 2 (tier 2), whatever the saving (1: at the first call), unless the engine has
//     measured that the next code is no faster for that kind of group;
//   - tier 1 (the baseline) is generic: one version serves every shape;
//   - the first tier-2 version binds the params every observed signature agreed on: all
//     of them when the group has seen one signature (a specialisation), only the dims that
//     never changed when they vary (a generic version), so mixed traffic runs compiled code
//     within a few calls. When a generic version's guard fails (a dim it bound changed), a
//     second one binds nothing. At most max_generic_versions;
//   - a signature that runs generic code gets its own specialisation (up to
//     max_specializations per group) only when the estimated gain over the generic code,
//     times its expected calls, pays for the compile.
// No recompile storms: at most max_specializations + max_generic_versions tier-2 versions per
// group; evictions and failures double the group's backoff (it scales both the count bound
// and the cost), and max_failures failures blacklist it.
// Compiles run on the engine's CompileQueue (jit/tiering/compile_queue.h) unless async_compile is
// off or there is no queue: calls never wait for them and run the best code already
// published. Jobs are ordered by the group's share of its function's time (hot groups
// first) and tier-1 jobs before tier-2 ones. One tier-2 compile per group is in flight at
// a time.
#include "jit/exec/code_cache.h"
#include "jit/exec/group_runtime.h"
#include "jit/exec/run_plan.h"
#include "jit/tiering/compile_queue.h"
#include "jit/tiering/cost_model.h"
#include "jit/tiering/device_tiering.h"
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

// The policy's last decision about a group (for FunctionStats), under TierUpState::mu.
struct TierUpDecision {
    enum class What : std::uint8_t {
        none,          // nothing weighed yet (no call, or no compiling tier)
        waits,         // a compile was weighed and does not pay yet
        compiles,      // a compile was requested
        compiling,     // a tier-2 compile is in flight
        settled,       // the code it runs is the best the policy will make for it
        full,          // no more versions allowed (generic versions or specialisations used up)
        blacklisted,   // too many compile failures
        tier1_faster,  // tier 1 measured clearly faster than tier 2 at a signature: it runs tier 1 there
    };
    What what = What::none;
    int tier = 0;          // of the compile weighed
    bool generic = false;  // a generic tier-2 version (else specialised, for tier 2)
    TierUpEstimate est;
    std::uint64_t waited = 0, bound = 0;  // calls counted toward the threshold, and the threshold
};

// The tier-up policy's state of one group (GroupRuntime::tierup), under `mu`.
struct TierUpState {
    std::mutex mu;
    int failures = 0;          // compile failures of this group
    bool blacklisted = false;  // too many failures: never tried again
    bool compiling = false;    // a tier-2 compile is in flight (one at a time)
    // Tier 1: interpreted calls (the profile's calls less its compiled calls) are counted
    // from `interpreted_base`, which a reset moves to the count then; requested once,
    // whatever the outcome (a generic version serves every shape, and its bail-outs are
    // deterministic: `tier1_declined` says why).
    std::uint64_t interpreted_base = 0;
    // Set when an eviction (which may be handled by another function's manager, without this
    // group's profile) took the tier-1 version: the next call moves interpreted_base.
    bool rebase_interpreted = false;
    bool tier1_requested = false;
    std::string tier1_declined;
    std::uint64_t uncovered = 0;  // calls below tier 2 since the last tier-2 compile ended (or the code was evicted)
    int generic_compiles = 0;
    // Each eviction or failure doubles the calls and the cost this group needs before
    // compiling again (up to Tunables::max_backoff), so a cache too small for the traffic
    // cannot cause a compile storm.
    std::uint64_t backoff = 1;
    std::uint16_t learned = 0;  // (from, to) pairs of code kinds whose speed ratio this group taught the cost model
    // The last probe of the caches for the next tier-2 version (TierManager::made_already).
    struct Probe {
        bool valid = false;
        bool generic = false;
        int generic_compiles = 0;
        std::size_t distinct = 0;
        std::vector<std::int64_t> params;
        bool made = false;  // the code was there
    } probe;
    // Signatures that run tier 1 on trial (CodeSet::tier1_signatures) until their timed
    // calls say whether tier 1 is clearly faster there than tier 2 (TierManager::prefer_tier1).
    std::vector<std::vector<std::int64_t>> tier1_trials;
    std::size_t tier1_trials_started = 0;  // bounded by limits::tier1_signatures_kept
    std::size_t tier1_pins = 0;            // signatures in the group's CodeSet::tier1_signatures
    // A pinned signature runs tier 2 again after some tier-1 calls, to be timed there afresh
    // (TierManager::prefer_tier1): a pin made on tier-2 times that a busy moment inflated
    // does not last.
    struct Recheck {
        std::vector<std::int64_t> params;
        std::uint64_t calls_left = 0;  // tier-1 calls until tier 2 runs again
        std::uint64_t timed_from = 0;  // while it runs: its tier-2 timed calls when it began
        int done = 0;                  // rechecks begun
        bool running = false;
    };
    std::vector<Recheck> rechecks;
    TierUpDecision last;
    std::atomic<int> specializations{0};  // fully bound versions of this group (read without the lock by stats)
};

// The compiling tiers and the compile queue an engine gives its functions (any may be null).
struct EngineResources {
    std::shared_ptr<tiers::Tier> tier1, tier2;
    std::shared_ptr<CompileQueue> queue;
    std::shared_ptr<profiling::ChromeTrace> trace;  // KILN_TRACE: compiles are recorded here
    std::shared_ptr<CodeCache> cache;         // the engine's code cache (null: a private unbounded one)
    std::shared_ptr<DiskCache> disk;          // KILN_CACHE_DIR (null: none)
    std::shared_ptr<CostModel> costs;         // the engine's estimates (null: a private one)
    std::shared_ptr<GpuTiers> gpu;            // the GPU tiers (null: device tensors are rejected, KILN_DEVICE=cpu)
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
    // Requests the tier-2 versions an earlier process with this graph recorded in
    // KILN_CACHE_DIR (jit/tiering/version_record.h), loading or compiling each, and waits
    // for them; returns how many the function holds now of those recorded (0 without a
    // persistent cache or a record) (Function::warmup()).
    std::size_t warmup_recorded();
    // Takes evicted code out of the groups that published it and resets their tier-up
    // state for it (a dropped specialisation needs another threshold of calls to come back).
    // Call holding no group lock.
    void drop(std::vector<Evicted>& evicted);

    // Called after a group ran (see CallObserver): records what the cost model can learn
    // from the signature and requests compiles when the policy says so.
    void group_ran(GroupRuntime& gr, const std::vector<std::int64_t>& params, profiling::CodeKind ran,
                   const profiling::SignatureObservation& sig) override;
    // Requests (no threshold) a tier-2 version covering these params, unless one exists, the
    // group is blacklisted, or a compile is in flight (warmup; wait_for_compiles waits for it).
    void ensure_compiled(GroupRuntime& gr, const std::vector<std::int64_t>& params);
    const CostModel& costs() const { return *tiers_.costs; }
    // The policy's last decision about `gr`, in words (FunctionStats: GroupStats::tierup).
    std::string describe(const GroupRuntime& gr) const;
    TierUpDecision decision(const GroupRuntime& gr) const;

private:
    // The policy's steps for one observed call, under the group's lock; each returns
    // whether to request that compile.
    void learn(GroupRuntime& gr, TierUpState& st, profiling::CodeKind ran, const profiling::SignatureObservation& sig);
    bool weigh_tier1(GroupRuntime& gr, TierUpState& st);
    bool weigh_tier2(GroupRuntime& gr, TierUpState& st, const std::vector<std::int64_t>& params,
                     profiling::CodeKind ran, const profiling::SignatureObservation& sig, bool* generic);
    bool weigh_specialization(GroupRuntime& gr, TierUpState& st, const std::vector<std::int64_t>& params,
                              const profiling::SignatureObservation& sig);
    // With the time model on: whether this signature's timed calls show the group's tier-2
    // code clearly slower (kTier1Faster) than its tier-1 code at the same signature; then the
    // signature runs tier 1 from now on (CodeSet::tier1_signatures, at most
    // limits::tier1_signatures_kept per group; no tier-2 compile is made for it). A signature
    // timed on tier 2 and on the interpreter but never on tier 1, whose tier-2 time is clearly
    // above what the cost model expects of tier 1 there, runs tier 1 on trial until two of its
    // tier-1 calls are timed, then keeps whichever code is faster (at most
    // tier1_signatures_kept trials per group, so the exploration is bounded). A pinned
    // signature runs tier 2 again after kRecheckCalls tier-1 calls, then 4x and 16x as many:
    // two new timed tier-2 calls there decide again (tier 2's best time is of all its calls).
    bool prefer_tier1(GroupRuntime& gr, TierUpState& st, const std::vector<std::int64_t>& params,
                      profiling::CodeKind ran, const profiling::SignatureObservation& sig);
    // Whether the calls counted reached the threshold, for a compile to code `ratio` times as fast.
    bool at_bound(const TierUpDecision& d, double ratio) const;
    // Whether a published tier-2 version (a specialisation, if `specialised`) covers these
    // params: a call that chose its code before that version was published reports the
    // code it ran, which must not ask for the version again.
    bool covered(const GroupRuntime& gr, const std::vector<std::int64_t>& params, bool specialised) const;
    // What the next tier-2 version of `gr` for `params` binds (TierUpState::mu held).
    kir::Specialization tier2_spec(const GroupRuntime& gr, const TierUpState& st,
                                   const std::vector<std::int64_t>& params, bool generic) const;
    // Whether the code of the next tier-2 version for `params` is already made (the code
    // cache or KILN_CACHE_DIR); probed once per version (TierUpState::probe).
    bool made_already(const GroupRuntime& gr, TierUpState& st, const std::vector<std::int64_t>& params, bool generic,
                      std::size_t distinct) const;
    void trace_decision(const GroupRuntime& gr, const TierUpDecision& d, const char* why);
    // Rewrites this function's record of its tier-2 versions in KILN_CACHE_DIR, when it changed.
    void save_versions();
    const std::string& versions_key_locked();  // saved_mu_ held
    void request_tier1(GroupRuntime& gr);
    void request_tier2(GroupRuntime& gr, kir::Specialization spec, bool generic);
    void submit(GroupRuntime& gr, double boost, std::function<void()> job);
    void compile_tier1(GroupRuntime& gr);
    void compile_tier2(GroupRuntime& gr, kir::Specialization spec, bool generic);
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
    std::mutex saved_mu_;
    std::string saved_;                      // the record last written (save_versions)
    std::vector<std::uint64_t> kir_hashes_;  // per group, its kernel's hash once needed (0: not yet)
    std::string versions_key_;               // the record's key, made once (it hashes the whole graph)
};

}  // namespace kiln::jit
