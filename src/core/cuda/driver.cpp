#include "src/core/cuda/driver.h"

#include "src/support/check.h"
#include "src/support/dynlib.h"
#include "src/support/log.h"

#include <memory>
#include <mutex>
#include <vector>

namespace kiln::core::cuda {
namespace {

struct Driver {
    DriverStatus status;
    DriverApi api;
    support::DynamicLibrary lib;
    std::vector<DeviceInfo> devices;
    std::vector<CUcontext> contexts;  // primary contexts, retained once
};

bool load_api(Driver& d) {
    std::string why;
    if (!d.lib.open({"libcuda.so.1", "libcuda.so"}, &why)) {
        d.status.why = "the CUDA driver (libcuda.so.1) is not installed: " + why;
        return false;
    }
    d.status.library = d.lib.path();
    std::string missing;
#define KILN_API_FN(name, ret, params) d.lib.resolve(#name, &d.api.name, &missing);
#include "src/core/cuda/cuda_api.def"
    if (!missing.empty()) {
        d.status.why = "the CUDA driver " + d.lib.path() + " lacks " + missing;
        return false;
    }
    return true;
}

Driver& driver() {
    static Driver* d = [] {
        auto* dr = new Driver();  // never destroyed: streams and memory may outlive static destruction
        if (!load_api(*dr)) {
            support::log().info("CUDA unavailable: {}", dr->status.why);
            return dr;
        }
        const DriverApi& a = dr->api;
        if (CUresult r = a.cuInit(0); r != kSuccess) {
            dr->status.why = "cuInit failed: " + error_text(r);
            support::log().info("CUDA unavailable: {}", dr->status.why);
            return dr;
        }
        a.cuDriverGetVersion(&dr->status.driver_version);
        int n = 0;
        if (CUresult r = a.cuDeviceGetCount(&n); r != kSuccess || n <= 0) {
            dr->status.why = n <= 0 && r == kSuccess ? "the CUDA driver sees no device" : "cuDeviceGetCount failed: " + error_text(r);
            support::log().info("CUDA unavailable: {}", dr->status.why);
            return dr;
        }
        for (int i = 0; i < n; ++i) {
            DeviceInfo info;
            info.ordinal = i;
            CUdevice dev = 0;
            a.cuDeviceGet(&dev, i);
            char name[256] = {};
            a.cuDeviceGetName(name, sizeof name, dev);
            info.name = name;
            auto attr = [&](int which) {
                int v = 0;
                a.cuDeviceGetAttribute(&v, static_cast<CUdevice_attribute>(which), dev);
                return v;
            };
            info.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
            info.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
            info.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
            info.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
            a.cuDeviceTotalMem_v2(&info.total_memory, dev);
            CUcontext ctx = nullptr;
            if (CUresult r = a.cuDevicePrimaryCtxRetain(&ctx, dev); r != kSuccess) {
                dr->status.why = "cuDevicePrimaryCtxRetain failed: " + error_text(r);
                return dr;
            }
            dr->devices.push_back(info);
            dr->contexts.push_back(ctx);
        }
        dr->status.device_count = n;
        dr->status.available = true;
        support::log().info("CUDA: driver {} with {} device(s), {} (sm_{}{})", dr->status.driver_version, n,
                            dr->devices[0].name, dr->devices[0].cc_major, dr->devices[0].cc_minor);
        return dr;
    }();
    return *d;
}

Driver& available_driver() {
    Driver& d = driver();
    KILN_USER_CHECK(d.status.available, "device cuda: not available: " << d.status.why);
    return d;
}

Driver& driver_for(int ordinal) {
    Driver& d = available_driver();
    KILN_USER_CHECK(ordinal >= 0 && ordinal < d.status.device_count,
                    "device cuda:" << ordinal << ": no such device (this machine has " << d.status.device_count
                                   << " CUDA device(s))");
    return d;
}

// Streams of threads that ended, per device, for the next threads to take. A stream is never
// destroyed: the caching allocator may still hold blocks released on it (and another thread
// may be synchronising it to reuse one), so it stays valid for the life of the process; the
// number of streams is that of the threads that used the device at once.
struct SpareStreams {
    std::mutex mu;
    std::vector<std::vector<CUstream>> by_device;
};
SpareStreams& spare_streams() {
    static SpareStreams* s = new SpareStreams();  // never destroyed, like the driver
    return *s;
}

// Set when the calling thread's streams went back to the spares (the thread is ending): a
// tensor freed after that is released on the stream it last had (kept here, trivially
// destructible, so reading it then is safe).
constexpr std::size_t kExitStreams = 16;
thread_local bool t_exiting = false;
thread_local CUstream t_exit_streams[kExitStreams] = {};

// The calling thread's streams, one per device; given back to the spares when the thread ends.
struct ThreadStreams {
    std::vector<CUstream> streams;
    ~ThreadStreams() {
        t_exiting = true;
        for (std::size_t i = 0; i < streams.size() && i < kExitStreams; ++i) t_exit_streams[i] = streams[i];
        SpareStreams& sp = spare_streams();
        std::lock_guard<std::mutex> lock(sp.mu);
        if (sp.by_device.size() < streams.size()) sp.by_device.resize(streams.size());
        for (std::size_t i = 0; i < streams.size(); ++i)
            if (streams[i]) sp.by_device[i].push_back(streams[i]);
    }
};
thread_local ThreadStreams t_streams;
thread_local int t_bound = -1;

class CudaMemory final : public DeviceMemoryBackend {
public:
    explicit CudaMemory(int ordinal) : ordinal_(ordinal) {}
    void* raw_alloc(std::size_t bytes) override {
        bind(ordinal_);
        CUdeviceptr p = 0;
        CUresult r = api().cuMemAlloc_v2(&p, bytes);
        if (r != kSuccess) {
            support::log().debug("cuda:{}: cuMemAlloc of {} bytes failed: {}", ordinal_, bytes, error_text(r));
            return nullptr;
        }
        return reinterpret_cast<void*>(p);
    }
    void raw_free(void* p) override {
        bind(ordinal_);
        api().cuMemFree_v2(reinterpret_cast<CUdeviceptr>(p));
    }
    void synchronize(void* stream) override { cuda::synchronize(ordinal_, static_cast<CUstream>(stream)); }

private:
    int ordinal_;
};

struct Pools {
    std::mutex mu;
    std::vector<std::unique_ptr<DevicePool>> pools;
    std::size_t limit = 0;
};
Pools& pools() {
    static Pools* p = new Pools();  // never destroyed, like the driver
    return *p;
}
DevicePool& pool(int ordinal) {
    Driver& d = driver_for(ordinal);
    Pools& ps = pools();
    std::lock_guard<std::mutex> lock(ps.mu);
    if (ps.pools.empty()) ps.pools.resize(static_cast<std::size_t>(d.status.device_count));
    auto& slot = ps.pools[static_cast<std::size_t>(ordinal)];
    if (!slot) slot = std::make_unique<DevicePool>(std::make_unique<CudaMemory>(ordinal), ps.limit);
    return *slot;
}

}  // namespace

const DriverStatus& driver_status() { return driver().status; }

const DriverApi& api() { return available_driver().api; }

const DeviceInfo& device_info(int ordinal) { return driver_for(ordinal).devices[static_cast<std::size_t>(ordinal)]; }

std::string error_text(CUresult r) {
    const DriverApi& a = driver().api;
    const char* name = nullptr;
    const char* msg = nullptr;
    if (a.cuGetErrorName) a.cuGetErrorName(r, &name);
    if (a.cuGetErrorString) a.cuGetErrorString(r, &msg);
    return std::string(name ? name : "CUDA error " + std::to_string(r)) + (msg ? std::string(": ") + msg : "");
}

void check(CUresult r, const char* call) {
    if (r != kSuccess) KILN_USER_ERROR(call << " failed: " << error_text(r));
}

void bind(int ordinal) {
    if (t_bound == ordinal) return;
    Driver& d = driver_for(ordinal);
    check(d.api.cuCtxSetCurrent(d.contexts[static_cast<std::size_t>(ordinal)]), "cuCtxSetCurrent");
    t_bound = ordinal;
}

CUstream thread_stream(int ordinal) {
    bind(ordinal);
    auto& v = t_streams.streams;
    if (v.size() <= static_cast<std::size_t>(ordinal)) v.resize(static_cast<std::size_t>(ordinal) + 1, nullptr);
    CUstream& s = v[static_cast<std::size_t>(ordinal)];
    if (s) return s;
    {
        SpareStreams& sp = spare_streams();
        std::lock_guard<std::mutex> lock(sp.mu);
        if (static_cast<std::size_t>(ordinal) < sp.by_device.size() && !sp.by_device[static_cast<std::size_t>(ordinal)].empty()) {
            s = sp.by_device[static_cast<std::size_t>(ordinal)].back();
            sp.by_device[static_cast<std::size_t>(ordinal)].pop_back();
            return s;
        }
    }
    check(api().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    return s;
}

void synchronize(int ordinal, CUstream s) {
    bind(ordinal);
    check(api().cuStreamSynchronize(s), "cuStreamSynchronize");
}

void* allocate(int ordinal, std::size_t bytes, std::size_t* block_bytes) {
    void* p = pool(ordinal).allocate(bytes > 0 ? bytes : 1, thread_stream(ordinal), block_bytes);
    if (!p) throw std::bad_alloc();
    return p;
}

void release(int ordinal, void* p, std::size_t block_bytes) {
    const auto i = static_cast<std::size_t>(ordinal);
    CUstream s = t_exiting ? (i < kExitStreams ? t_exit_streams[i] : nullptr) : thread_stream(ordinal);
    pool(ordinal).release(p, block_bytes, s);
}

DevicePoolStats pool_stats(int ordinal) { return pool(ordinal).stats(); }

void set_memory_limit(std::size_t bytes) {
    Pools& ps = pools();
    std::lock_guard<std::mutex> lock(ps.mu);
    ps.limit = bytes;
    for (auto& p : ps.pools)
        if (p) p->set_limit(bytes);
}

void trim_pools() {
    Pools& ps = pools();
    std::lock_guard<std::mutex> lock(ps.mu);
    for (auto& p : ps.pools)
        if (p) p->trim();
}

void copy_to_device(int ordinal, void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    CUstream s = thread_stream(ordinal);
    check(api().cuMemcpyHtoDAsync_v2(reinterpret_cast<CUdeviceptr>(dst), src, bytes, s), "cuMemcpyHtoDAsync");
    synchronize(ordinal, s);
}

void copy_to_host(int ordinal, void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    CUstream s = thread_stream(ordinal);
    check(api().cuMemcpyDtoHAsync_v2(dst, reinterpret_cast<CUdeviceptr>(src), bytes, s), "cuMemcpyDtoHAsync");
    synchronize(ordinal, s);
}

void copy_on_device(int ordinal, void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    CUstream s = thread_stream(ordinal);
    check(api().cuMemcpyDtoDAsync_v2(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes, s),
          "cuMemcpyDtoDAsync");
    synchronize(ordinal, s);
}

void fill_bytes(int ordinal, void* dst, unsigned char value, std::size_t bytes) {
    if (bytes == 0) return;
    CUstream s = thread_stream(ordinal);
    check(api().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(dst), value, bytes, s), "cuMemsetD8Async");
    synchronize(ordinal, s);
}

}  // namespace kiln::core::cuda
