#pragma once
// The executor's state for one fusion group of one function: its kernel IR (lowered once by
// jit/exec/pipeline.h), the compiled versions published so far (an immutable CodeSet swapped
// atomically, so a running call keeps the versions it loaded alive), and its code's counters.
// The group's calls and time are in the function's profile (profiling/profile.h). The JIT's
// tier-up policy (jit/tiering/tier_manager.h) publishes code here and keeps its own
// per-group state behind `tierup`, which the executor never reads.
#include "jit/exec/code_cache.h"
#include "jit/exec/guard.h"
#include "src/kir/kir.h"
#include "src/passes/fuse.h"
#include "tiers/tier.h"

#include <kiln/engine.h>  // kNumTiers

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kiln::jit {

struct CompiledVersion {
    kir::Specialization spec;
    Guard guard;
    std::shared_ptr<const tiers::CompiledKernel> code;
    std::shared_ptr<CodeEntry> entry;  // its place in the engine's code cache (jit/exec/code_cache.h)
    int tier = 2;
    bool generic = false;  // leaves some params as run-time arguments
};

struct CodeSet {
    std::vector<CompiledVersion> versions;  // tier-2 specialisations, tier-2 generic versions, the tier-1 version
    // Param signatures (all of the kernel's params) at which the tier-1 version measured
    // clearly faster than the tier-2 code that covers them: they run the tier-1 version
    // (the tier-up policy adds them, a few at most: jit/tiering/tier_manager.h).
    std::vector<std::vector<std::int64_t>> tier1_signatures;
};

// The version of `code` that runs for these params: the tier-1 version at a signature of
// tier1_signatures (then *preferred is set), else the first version whose guard passes; null
// when none passes. Touches the chosen version's cache entry (recency for the code cache's
// LRU bound).
const CompiledVersion* select_version(const CodeSet& code, const std::int64_t* params, bool* preferred = nullptr);

// The tier-up policy's state of one group (defined by jit/tiering/tier_manager.h).
struct TierUpState;

class GroupRuntime : public CodeUser, public std::enable_shared_from_this<GroupRuntime> {
public:
    GroupRuntime(std::size_t index, passes::Group group, std::optional<kir::Kernel> kernel, std::string lower_failure,
                 std::shared_ptr<const tiers::CompiledKernel> interpreted);
    ~GroupRuntime();

    const std::size_t index;  // in the partition, which is the execution order
    const passes::Group group;
    const std::optional<kir::Kernel> kernel;  // nullopt: not lowerable (see lower_failure)
    const std::string lower_failure;
    // Tier 0's code for the group (tiers/interp/interp_tier.h): what runs when no compiled
    // version's guard passes.
    const std::shared_ptr<const tiers::CompiledKernel> interpreted;

    // The published code set, for everything but the per-call path (stats, the tier manager).
    std::shared_ptr<const CodeSet> code() const {
        std::lock_guard<std::mutex> lock(code_mu_);
        return current_;
    }
    // The per-call path reads the same set through a hazard pointer (jit/exec/hazard.h).
    const std::atomic<const CodeSet*>& code_pointer() const { return code_ptr_; }
    // Replaces the published set; the old one is freed once no call reads it (at this or a
    // later publish, or with the group).
    void publish(std::shared_ptr<const CodeSet> c);

    // Counters of the code (relaxed: statistics, not synchronisation); calls and time are in
    // the function's profile (profiling/profile.h: GroupProfile, at `index`).
    std::atomic<std::uint64_t> evictions{0};  // versions the code cache took out
    std::array<std::atomic<std::uint64_t>, kNumTiers> compiles_by_tier{};    // successful compiles
    std::array<std::atomic<std::uint64_t>, kNumTiers> compile_us_by_tier{};  // and their time
    std::array<std::atomic<std::uint64_t>, kNumTiers> compile_cpu_us_by_tier{};  // their thread's CPU time

    // The kernel printed without names (jit/exec/code_cache.h: normalised_kir), made once.
    const std::string& kir_text() const {
        std::call_once(kir_once_, [this] { kir_text_ = normalised_kir(*kernel); });
        return kir_text_;
    }

    // The tier-up policy's state, set by the tier manager when it takes the group.
    std::shared_ptr<TierUpState> tierup;

    // The kernel's derived buffers (kir::Derived), made at the first call of code that reads
    // them (CompiledKernel::reads_derived) from `buffers` (the call's buffers: the sources
    // are input buffers that hold graph constants, the same on every call) and kept with the
    // group; their addresses are appended to `buffers`. True on the call that made them
    // (whose time is then no measure of the code: run_plan.cpp leaves it untimed).
    bool add_derived(std::vector<void*>& buffers) const;

private:
    mutable std::once_flag derived_once_;
    mutable std::vector<Tensor> derived_;
    mutable std::once_flag kir_once_;
    mutable std::string kir_text_;
    mutable std::mutex code_mu_;  // current_, retired_
    std::shared_ptr<const CodeSet> current_ = std::make_shared<const CodeSet>();
    std::vector<std::shared_ptr<const CodeSet>> retired_;  // replaced sets a call may still read
    std::atomic<const CodeSet*> code_ptr_{current_.get()};
};

}  // namespace kiln::jit
