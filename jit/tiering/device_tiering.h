#pragma once
// The tier-up policy of one function on one GPU. Count-based, like the CPU policy's bounds
// (the time model of tier_manager.h is CPU-only for now):
//   - tier 1: after tier1_threshold calls of a group on the device, one generic kernel (no
//     param bound) is compiled in the background;
//   - tier 2: after tier2_threshold calls at one param signature, a kernel specialised on
//     that signature (every param bound), up to max_specializations per group; signatures
//     past that run the generic kernel (no recompile storm);
//   - a kernel whose params are all static is specialised from the start (its one version is tier 2);
//   - a group the printer cannot express, or with max_failures failed compiles or
//     kMaxLaunchFailures refused launches, stays on tier 0 (blacklisted).
// Compiles run on the engine's compile queue (or on the calling thread when async_compile
// is off); calls keep running the code already published. Device code lives in the
// device's code cache (jit/exec/code_cache.h; one per device, bounded like the CPU tiers'
// by KILN_CODE_CACHE_BYTES, least recently run first out): a group whose kernel IR and
// bound params another group of the engine already compiled on the device shares that code;
// code evicted leaves every group that published it, which runs other versions or tier 0
// and requests it again after another threshold of calls. With KILN_CACHE_DIR, a kernel's
// cubin (or AMD code object) is looked up there first (keyed like the CPU tiers' code: the GPU
// tier's fingerprint, with the compiler's (NVRTC's, HIPRTC's) version and build banner, the
// architecture, the driver and the printer's revision; the normalised kernel IR; the bound
// params; Kiln's version) and stored there after a compile.
#include "jit/exec/code_cache.h"
#include "jit/exec/run_device.h"
#include "jit/tiering/compile_queue.h"
#include "jit/tiering/disk_cache.h"
#include "profiling/chrome_trace.h"
#include "jit/tiering/settings.h"
#include "tiers/tier.h"

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace kiln::jit {

// The engine's GPU tiers, one per device (cuda:N and hip:N), made on first use
// (tiers/gpu/gpu_tier.h). With the JIT off, or where the device's compiler (NVRTC, HIPRTC)
// is missing, there is none and device calls run on tier 0.
class GpuTiers {
public:
    // `code_cache_bytes`: the bound of each device's code cache (0: none).
    GpuTiers(bool jit, std::size_t code_cache_bytes) : jit_(jit), cache_bytes_(code_cache_bytes) {}
    std::shared_ptr<tiers::Tier> get(Device d);
    // The code cache of device `d` (made on first use).
    std::shared_ptr<CodeCache> cache(Device d);
    // Every device cache's counters, summed (bytes, entries, hits, misses, evictions).
    CodeCacheStats cache_stats() const;

private:
    const bool jit_;
    const std::size_t cache_bytes_;
    mutable std::mutex mu_;
    std::vector<std::shared_ptr<tiers::Tier>> tiers_;
    std::vector<bool> tried_;
    std::vector<std::shared_ptr<CodeCache>> caches_;
};

// Publishes version `v` of a group (specialisations first, more bound params first, the
// generic version last), unless the code cache evicted its entry meanwhile (then false).
bool publish_device_version(DeviceGroupCode& code, DeviceVersion v);
// Takes evicted device code out of the groups that published it and records what went
// (DeviceGroupCode::evicted_signatures) for their tier-up policy. Call it holding no
// policy lock.
void drop_device_code(std::vector<Evicted>& evicted);

struct DeviceTierCounters {
    std::atomic<std::uint64_t> compiles{0}, compile_failures{0}, compile_us{0};
    std::atomic<std::uint64_t> disk_hits{0};  // code loaded from KILN_CACHE_DIR instead of compiled
    std::array<std::atomic<std::uint64_t>, tiers::kNumBailouts> bailouts{};
};

class DeviceTierManager final : public DeviceObserver {
public:
    // `tier`: the device's GPU tier; null runs every group on tier 0 (no JIT, or no compiler for the device).
    // `disk` (may be null): KILN_CACHE_DIR, where device code persists across processes.
    DeviceTierManager(std::shared_ptr<const Executable> exe, Device device, std::shared_ptr<tiers::Tier> tier,
                      const Tunables& tunables, std::shared_ptr<CompileQueue> queue,
                      std::shared_ptr<DiskCache> disk = nullptr, std::shared_ptr<profiling::ChromeTrace> trace = nullptr,
                      std::shared_ptr<CodeCache> cache = nullptr);
    ~DeviceTierManager() override;
    DeviceTierManager(const DeviceTierManager&) = delete;
    DeviceTierManager& operator=(const DeviceTierManager&) = delete;

    DeviceState& state() { return state_; }
    const DeviceState& state() const { return state_; }
    const DeviceTierCounters& counters() const { return counters_; }
    // Each successful compile's time, in ms (for the benchmarks' median and largest).
    std::vector<double> compile_times() const;
    void wait_for_compiles();
    void cancel_compiles();

    void group_ran(std::size_t group, const std::vector<std::int64_t>& params, int tier) override;

private:
    struct GroupPolicy {
        bool generic_requested = false;
        std::uint64_t calls_base = 0;  // the group's calls when the generic version was last evicted
        std::map<std::vector<std::int64_t>, std::uint64_t> signature_calls;
        int specializations = 0;  // requested
        int failures = 0;
    };
    void request(std::size_t group, kir::Specialization spec, int tier);
    // Applies the code cache's evictions of `code` to its policy (mu_ held).
    void take_evictions(DeviceGroupCode& code, GroupPolicy& p);
    void compile(std::size_t group, const kir::Specialization& spec, int tier);

    std::shared_ptr<const Executable> exe_;
    std::shared_ptr<tiers::Tier> tier_;
    Tunables tunables_;
    std::shared_ptr<CompileQueue> queue_;
    std::shared_ptr<CompileQueue::Ticket> ticket_;
    std::shared_ptr<DiskCache> disk_;
    std::shared_ptr<profiling::ChromeTrace> trace_;  // KILN_TRACE: compiles are recorded there
    std::shared_ptr<CodeCache> cache_;               // the device's code cache
    DeviceState state_;
    DeviceTierCounters counters_;
    mutable std::mutex mu_;  // policies_, times_
    std::vector<GroupPolicy> policies_;
    std::vector<double> times_;
};

}  // namespace kiln::jit
