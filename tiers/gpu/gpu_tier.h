#pragma once
// The GPU tier on NVIDIA devices: a group's kernel IR printed as CUDA C (gpu_source.h),
// compiled by NVRTC (nvrtc.h) to a cubin for the device's sm_XY (PTX for the newest
// architecture NVRTC knows when it does not know the device's), loaded with the driver
// (src/core/cuda/driver.h) and launched on the calling thread's stream. Generic code (no
// param bound) is the device's tier 1; code specialised on bound params its tier 2.
//
// launch() queues the kernel and returns without waiting (the executor synchronises the
// stream once per call); it throws LaunchError when the driver refuses the launch, so the
// executor can run the group elsewhere (the kernel then wrote nothing).
#include "tiers/tier.h"

#include <memory>
#include <stdexcept>
#include <string>

namespace kiln::tiers::gpu {

class LaunchError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Test hook: the next `n` launches of GPU code fail with LaunchError before reaching the
// driver (an injected launch failure).
void fail_next_launches_for_testing(int n) noexcept;

// Whether the tier can run on device cuda:`ordinal` (driver, device and NVRTC present);
// *why says what is missing.
bool gpu_tier_available(int ordinal, std::string* why);

// The tier for device cuda:`ordinal`; null (with *why) when gpu_tier_available is false.
std::shared_ptr<Tier> make_gpu_tier(int ordinal, std::string* why);

// Loads code that the GPU tier's compile() returned as `object` (a cubin, or PTX) for the same
// kernel and specialisation, e.g. from KILN_CACHE_DIR in another process: the launch
// configuration comes from printing the kernel again (cheap, deterministic), the code from
// `object`. Bailout::unavailable when `tier` is not a GPU tier; never throws.
// `symbol`: the entry's name as compile() returned it (two groups with the same normalised
// kernel IR share one cubin, whose entry is named after the group that compiled it).
CompileResult load_gpu_code(Tier& tier, const kir::Kernel& kernel, const kir::Specialization& spec,
                            const std::string& object, const std::string& symbol);

// The stream a GPU kernel is launched on is LaunchArgs::queue (a CUstream).
}  // namespace kiln::tiers::gpu
