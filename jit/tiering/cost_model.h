#pragma once
// What the tier-up policy (jit/tiering/tier_manager.h) believes about costs, shared by every
// function of an engine:
//   - what a compile costs, per tier and kind of group: the mean of the compiles this engine
//     measured (an exponential moving average), an initial estimate until the first one;
//   - how fast each kind of code runs a kind of group compared with another kind: a ratio per
//     (kind of group, from, to), from initial estimates (cost_model.cpp), learned from this
//     engine's groups that ran one signature on both kinds of code (only such pairs: two
//     signatures' speed-ups are not comparable, e.g. a small batch gains less than a large one).
// The policy compiles when (time per call now - estimated time per call on the next code)
// x expected future calls >= the compile's cost: see decide_tierup.
// Reads take no lock (relaxed atomics); updates take one.
#include "src/passes/fuse.h"
#include "profiling/group_profile.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

namespace kiln::jit {

inline constexpr std::size_t kNumGroupKinds = 5;  // passes::GroupKind

class CostModel {
public:
    CostModel();
    CostModel(const CostModel&) = delete;
    CostModel& operator=(const CostModel&) = delete;

    // Estimated cost in µs of compiling a group of `kind` at `tier` (1 or 2).
    double compile_us(int tier, passes::GroupKind kind) const;
    // A compile at `tier` that gave code took `us` (not a cache hit).
    void record_compile(int tier, passes::GroupKind kind, double us);
    // Compiles measured so far at `tier` for `kind`.
    std::uint64_t compiles_measured(int tier, passes::GroupKind kind) const;

    // Estimated time per call on `to` over time per call on `from` (e.g. 0.125: 8x faster).
    double time_ratio(profiling::CodeKind from, profiling::CodeKind to, passes::GroupKind kind) const;
    // A group of `kind` measured `ratio` (time on `to` / time on `from`, for one signature).
    void record_ratio(profiling::CodeKind from, profiling::CodeKind to, passes::GroupKind kind, double ratio);

private:
    static std::size_t k(passes::GroupKind kind) { return static_cast<std::size_t>(kind); }
    mutable std::mutex mu_;  // updates
    std::array<std::array<std::atomic<double>, 2>, kNumGroupKinds> compile_us_;  // [kind][tier - 1]
    std::array<std::array<std::atomic<std::uint64_t>, 2>, kNumGroupKinds> compiles_{};
    // [kind][from][to]: time per call on `to` over time per call on `from`.
    using Ratios = std::array<std::array<std::atomic<double>, profiling::kNumCodeKinds>, profiling::kNumCodeKinds>;
    std::array<Ratios, kNumGroupKinds> ratio_;
};

// One tier-up estimate: what the policy weighs for a group's next compile.
struct TierUpEstimate {
    double now_ns = 0;       // measured time per call on the code it runs now
    double next_ns = 0;      // estimated time per call on the next code
    double future_calls = 0;  // expected calls to come
    double saving_us = 0;    // (now_ns - next_ns) * future_calls
    double cost_us = 0;      // the compile's estimated cost (0: the code is already made)
    bool pays() const { return now_ns > 0 && saving_us >= cost_us; }
};

// The estimate for moving calls that take `now_ns` each onto code `ratio` times as fast,
// with `calls_so_far` calls seen (the policy expects as many again, and at least
// `min_future_calls`), at a compile cost of `cost_us` scaled by `backoff`.
TierUpEstimate estimate_tierup(double now_ns, double ratio, std::uint64_t calls_so_far,
                               std::uint64_t min_future_calls, double cost_us, std::uint64_t backoff);

}  // namespace kiln::jit
