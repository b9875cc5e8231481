#pragma once
// The GPU tier: a group's kernel IR printed as CUDA C or HIP (gpu_source.h), compiled for
// the device's architecture and loaded and launched through the vendor-neutral GPU runtime
// (src/core/gpu/runtime.h) on the calling thread's stream. NVIDIA devices (cuda:N): NVRTC
// (nvrtc.h) to a cubin for the device's sm_XY (PTX for the newest architecture NVRTC knows
// when it does not know the device's). AMD devices (hip:N): HIPRTC (hiprtc.h) to a code
// object for the device's gfx architecture. Generic code (no param bound) is the device's
// tier 1; code specialised on bound params its tier 2.
//
// launch() queues the kernel and returns without waiting (the executor synchronises the
// stream once per call); it throws LaunchError when the vendor refuses the launch, so the
// executor can run the group elsewhere (the kernel then wrote nothing).
#include "tiers/tier.h"

#include <kiln/dtype.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace kiln::tiers::gpu {

class LaunchError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Test hook: the next `n` launches of GPU code fail with LaunchError before reaching the
// vendor (an injected launch failure).
void fail_next_launches_for_testing(int n) noexcept;

// Whether the tier can run on device `d` (cuda:N or hip:N: the vendor's runtime, the device
// and its compiler present, the compiler knowing the device's architecture); *why says what
// is missing.
bool gpu_tier_available(Device d, std::string* why);

// The tier for device `d`; null (with *why) when gpu_tier_available is false.
std::shared_ptr<Tier> make_gpu_tier(Device d, std::string* why);

// Loads code that the GPU tier's compile() returned as `object` (a cubin, PTX or AMD code
// object) for the same kernel and specialisation, e.g. from KILN_CACHE_DIR in another
// process: the launch configuration comes from printing the kernel again (cheap,
// deterministic), the code from `object`. Bailout::unavailable when `tier` is not a GPU tier;
// never throws. `symbol`: the entry's name as compile() returned it (two groups with the
// same normalised kernel IR share one object, whose entry is named after the group that
// compiled it).
CompileResult load_gpu_code(Tier& tier, const kir::Kernel& kernel, const kir::Specialization& spec,
                            const std::string& object, const std::string& symbol);

// The stream a GPU kernel is launched on is LaunchArgs::queue (the runtime's gpu::Stream).
}  // namespace kiln::tiers::gpu
