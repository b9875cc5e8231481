#pragma once
// Runs one call whose inputs are on a GPU (computation follows the data): the same plan of
// fusion groups as run_plan.h, each group either on device code whose guard passes (the GPU
// tier: tiers/gpu/gpu_tier.h) or, as its tier 0, on the interpreter over host copies of its
// inputs, its outputs copied back to the device. Values stay on the device between groups;
// constants are uploaded once per function and device. Kernels are queued on the calling
// thread's stream and the call returns when its outputs are ready (one synchronisation per
// call, plus the copies of tier-0 groups).
//
// Failures: a launch the driver refuses (or an injected one) runs that group on tier 0
// instead (the kernel wrote nothing), is counted, and after repeated failures the group is
// blacklisted from device code. An error the stream reports at the end of the call throws
// kiln::Error (never a wrong answer).
#include "jit/exec/code_cache.h"
#include "jit/exec/guard.h"
#include "jit/exec/pipeline.h"
#include "jit/exec/shape_plan.h"
#include "profiling/chrome_trace.h"
#include "tiers/tier.h"

#include <kiln/tensor.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace kiln::jit {

struct DeviceVersion {
    Guard guard;  // the params the code binds
    std::shared_ptr<const tiers::CompiledKernel> code;
    std::shared_ptr<CodeEntry> entry;  // its place in the device's code cache (jit/exec/code_cache.h)
    int tier = 1;  // 1: generic (no param bound), 2: specialised
};

// Published code of one group on one device: specialisations first, the generic version last.
struct DeviceCodeSet {
    std::vector<DeviceVersion> versions;
};

struct DeviceGroupCode final : CodeUser {
    std::atomic<std::shared_ptr<const DeviceCodeSet>> code{std::make_shared<const DeviceCodeSet>()};
    std::atomic<std::uint64_t> calls{0}, compiled_calls{0}, launch_failures{0}, guard_failures{0}, deopts{0};
    std::atomic<std::uint64_t> evictions{0};  // versions the device's code cache took out
    std::atomic<bool> blacklisted{false};
    // `code` is replaced under this lock: by the function's compiles, and by any compile on
    // the device whose code evicts this group's (jit/tiering/device_tiering.h).
    std::mutex publish_mu;
    // What the code cache took out since the tier-up policy last looked (publish_mu): the
    // generic version, the signatures of specialisations. The policy requests them again
    // after another threshold of calls.
    std::atomic<bool> has_evicted{false};
    bool generic_evicted = false;
    std::vector<std::vector<std::int64_t>> evicted_signatures;
};

// A function's state on one device.
struct DeviceState {
    explicit DeviceState(Device d, std::size_t groups);
    const Device device;
    std::vector<std::shared_ptr<DeviceGroupCode>> groups;  // per group of the partition
    std::atomic<std::uint64_t> launches{0};
    std::mutex constants_mu;
    std::vector<Tensor> constants;  // per value id: the constant uploaded (undefined: not yet)
};

// What the executor tells the device tier-up policy after each group that has kernel IR
// (launch failures it counts itself, in DeviceGroupCode::launch_failures).
class DeviceObserver {
public:
    virtual ~DeviceObserver() = default;
    virtual void group_ran(std::size_t group, const std::vector<std::int64_t>& params, int tier) = 0;
};

// Launch failures of one group after which it runs tier 0 only on that device.
inline constexpr std::uint64_t kMaxLaunchFailures = 3;

// `trace` (may be null): KILN_TRACE; each group's run (tier, device), guard failures and
// launch failures are recorded there.
std::vector<Tensor> run_groups_on_device(const Executable& exe, const ShapePlan& sp, DeviceState& state,
                                         DeviceObserver* observer, std::span<const Tensor> inputs, int* max_tier,
                                         profiling::ChromeTrace* trace = nullptr);

}  // namespace kiln::jit
