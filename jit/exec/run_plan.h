#pragma once
// Runs one call as a plan of fusion groups, each at the best tier it has: a compiled
// version whose guard passes, else the interpreter (a guard failure and a deopt are counted
// when compiled versions existed but none fit). Frees every intermediate after its last use.
// Compiled groups write intermediates into an arena block from the function's pool, laid
// out by jit/exec/memory_plan.h; the call's working vectors are per-thread scratch reused from
// call to call. So a steady-state call whose groups all run compiled allocates nothing but
// its outputs (run_groups) or nothing at all (run_groups_into with dense outputs).
//
// Timing is sampled, so that a steady-state call reads no clock: a group's first
// kTimingPeriod calls are timed, then one call in kTimingPeriod (by the group's call count),
// whose time is added kTimingPeriod times over. A group's time in the profile (the stats'
// total_ms and the compile queue's order) is thus an estimate, within kTimingPeriod - 1
// calls' worth of time. With a trace (KILN_TRACE), every call is timed.
#include "jit/exec/pipeline.h"
#include "jit/exec/shape_plan.h"
#include "profiling/profile.h"
#include "profiling/chrome_trace.h"
#include "src/support/limits.h"

#include <string_view>

namespace kiln::jit {

// What the executor tells the layer above it, the JIT's tier-up policy, about each call.
class CallObserver {
public:
    virtual ~CallObserver() = default;
    // Whether code can be compiled at all (without a compiling tier, groups go straight to
    // the interpreter and their params are not computed).
    virtual bool compiles() const = 0;
    // Group `gr` ran `ran` code with these params; `sig` is what its profile now holds for
    // them. Called for every call below tier 2 and for the timed calls of tier-2 code
    // (this header: timing is sampled).
    virtual void group_ran(GroupRuntime& gr, const std::vector<std::int64_t>& params, profiling::CodeKind ran,
                           const profiling::SignatureObservation& sig) = 0;
};

// What a call runs: the function's executable plan, the shape plan of its inputs, and the
// observers (each may be null).
struct CallPlan {
    const Executable& exe;
    const ShapePlan& shapes;
    profiling::FunctionProfile& profile;  // per group: calls, time, guard failures, deopts
    CallObserver* observer = nullptr;
    profiling::ChromeTrace* trace = nullptr;  // KILN_TRACE: calls, groups, guard failures
};

inline constexpr std::uint64_t kTimingPeriod = limits::timing_period;
// How many calls the time of a group's call number `index` (from 0) stands for: 0 when the
// call is not timed.
constexpr std::uint64_t timing_weight(std::uint64_t index) {
    return index < kTimingPeriod ? 1 : index % kTimingPeriod == 0 ? kTimingPeriod : 0;
}

// KILN_TRACE's events of a guard failure of `gr` at these params and its deopt to tier `to`:
// the first failing fact of `guard` (the group's best version's). `extra`: more JSON members
// of both events (e.g. the device), with a leading comma.
void trace_guard_failure(profiling::ChromeTrace& tr, const GroupRuntime& gr, const Guard& guard, const std::int64_t* params,
                         int to, std::string_view extra = {});

// Whether any buffer of the group is empty for this shape plan.
bool has_empty_buffer(const passes::Group& g, const ShapePlan& sp);
// The group kernel's param values for this shape plan: buffer dims from its shapes, symbol
// values (kir::ParamSource::symbol) from its bindings.
void group_params(const kir::Kernel& k, const passes::Group& g, const ShapePlan& sp, std::vector<std::int64_t>& out);

// `max_tier` receives the highest tier any group ran on. `caller_outputs` (may be empty):
// the caller's output tensors, already checked for shape and dtype; compiled groups write
// graph outputs straight into the contiguous ones (the returned tensor is then the caller's).
std::vector<Tensor> run_groups(const CallPlan& call, std::span<const Tensor> inputs, int* max_tier,
                               std::span<const Tensor> caller_outputs = {});
// The same, with every graph output written into the caller's `outputs` (checked for shape
// and dtype): in place by compiled groups where they are dense, else copied.
void run_groups_into(const CallPlan& call, std::span<const Tensor> inputs, int* max_tier,
                     std::span<const Tensor> outputs);

}  // namespace kiln::jit
