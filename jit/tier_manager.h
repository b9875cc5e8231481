#pragma once
// The tier manager of one function: partitions its graph into fusion groups, lowers the
// lowerable ones to kernel IR at load, counts calls per group and shape signature, and
// compiles specialisations when a signature gets hot:
//   - after `tier2_threshold` calls of a group at one signature (its param values), a
//     specialisation with every param bound, while the group holds fewer than
//     `max_specializations` (so the function holds at most that many per group: one
//     per shape signature of traffic) and the group has seen few distinct signatures;
//   - otherwise (a dim keeps changing, or the limit is reached) one generic version that
//     binds only the params every observed signature agreed on; if its guard fails later,
//     a second generic version with no param bound. No recompile storms: at most
//     max_specializations + 2 compiles per group succeed, and failures back off and then
//     blacklist the group.
// Compiles run on the calling thread in this version (the background queue comes later);
// a call that finds a compile of the same group in flight does not wait for it.
#include "jit/group_runtime.h"

#include <kiln/options.h>

#include <array>
#include <atomic>
#include <memory>
#include <vector>

namespace kiln::jit {

struct TierCounters {
    std::atomic<std::uint64_t> compiles{0};
    std::atomic<std::uint64_t> compile_failures{0};
    std::atomic<std::uint64_t> compile_us{0};
    std::array<std::atomic<std::uint64_t>, 8> bailouts{};  // by tiers::Bailout
};

class TierManager {
public:
    // `tier2` may be null (no optimising tier: everything stays on the interpreter).
    TierManager(std::shared_ptr<const ir::Graph> graph, const Options& options, std::shared_ptr<tiers::Tier> tier2);

    const passes::Partition& partition() const { return partition_; }
    std::vector<std::unique_ptr<GroupRuntime>>& groups() { return groups_; }
    const std::vector<std::unique_ptr<GroupRuntime>>& groups() const { return groups_; }
    const TierCounters& counters() const { return counters_; }
    // Execution order: step of each node (groups in order, nodes in group order), and per
    // value the last step that reads it (-1: none; INT32_MAX: a graph output).
    const std::vector<std::int32_t>& step_of() const { return step_of_; }
    const std::vector<std::int32_t>& last_use() const { return last_use_; }
    bool jit_enabled() const { return tier2_ != nullptr; }

    // The version whose guard passes for these params, or null (then the caller counts a
    // guard failure when versions existed, and runs the group on the interpreter).
    static const CompiledVersion* select(const CodeSet& code, const std::int64_t* params);

    // Called after a group ran on the interpreter with these params: counts the signature
    // and compiles when the policy says so.
    void note_interpreted(GroupRuntime& gr, const std::vector<std::int64_t>& params);
    // Compiles now (no threshold) a version covering these params, unless one exists, the
    // group is blacklisted, or a compile is in flight (warmup).
    void ensure_compiled(GroupRuntime& gr, const std::vector<std::int64_t>& params);

private:
    void compile(GroupRuntime& gr, const std::vector<std::int64_t>& params, bool generic);

    std::shared_ptr<const ir::Graph> graph_;
    Options options_;
    std::shared_ptr<tiers::Tier> tier2_;
    passes::Partition partition_;
    std::vector<std::unique_ptr<GroupRuntime>> groups_;
    TierCounters counters_;
    std::vector<std::int32_t> step_of_, last_use_;
};

}  // namespace kiln::jit
