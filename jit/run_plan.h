#pragma once
// Runs one call as a plan of fusion groups, each at the best tier it has: a compiled
// version whose guard passes, else the interpreter (a guard failure and a deopt are counted
// when compiled versions existed but none fit). Frees every intermediate after its last use.
#include "jit/executor.h"
#include "jit/tier_manager.h"

namespace kiln::jit {

// Compiles, for every lowerable group, a version that covers this shape plan (Function::warmup).
void warmup_groups(TierManager& tm, const ShapePlan& sp);
// Whether any buffer of the group is empty for this shape plan.
bool has_empty_buffer(const passes::Group& g, const ShapePlan& sp);
// The group kernel's param values for this shape plan.
void group_params(const kir::Kernel& k, const passes::Group& g, const ShapePlan& sp, std::vector<std::int64_t>& out);

// `max_tier` receives the highest tier any group ran on. `caller_outputs` (may be empty):
// the caller's output tensors, already checked for shape and dtype; compiled groups write
// graph outputs straight into the contiguous ones (the returned tensor is then the caller's).
std::vector<Tensor> run_groups(const Plan& plan, TierManager& tm, const ShapePlan& sp, std::span<const Tensor> inputs,
                               profiling::FunctionProfile* profile, int* max_tier,
                               std::span<const Tensor> caller_outputs = {});

}  // namespace kiln::jit
