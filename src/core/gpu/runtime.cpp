#include "src/core/gpu/runtime.h"

#include "src/core/cuda/driver.h"
#include "src/core/hip/runtime.h"
#include "src/support/check.h"
#include "src/support/log.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

namespace kiln::core::gpu {
namespace {

// Backends by slot: 0 CUDA, 1 HIP.
constexpr std::size_t kBackends = 2;

std::size_t slot(Device::Kind k) {
    KILN_CHECK(k == Device::Kind::cuda || k == Device::Kind::hip, "gpu runtime: not a GPU device kind");
    return k == Device::Kind::cuda ? 0 : 1;
}
const char* kind_name(std::size_t i) { return i == 0 ? "cuda" : "hip"; }
const char* vendor_name(std::size_t i) { return i == 0 ? "CUDA" : "HIP"; }

// One vendor's library and what Kiln keeps of it. Never destroyed: streams and memory may
// outlive static destruction.
struct Backend {
    Loaded loaded;
    std::mutex pools_mu;
    std::vector<std::unique_ptr<DevicePool>> pools;  // per device, made on first use
    // Streams of threads that ended, per device, for the next threads to take. A stream is
    // never destroyed: the caching allocator may still hold blocks released on it (and
    // another thread may be synchronising it to reuse one), so it stays valid for the life
    // of the process; the number of streams is that of the threads that used the device at once.
    std::mutex spare_mu;
    std::vector<std::vector<Stream>> spare;
};

std::atomic<Backend*> g_backends[kBackends] = {};
std::mutex g_limit_mu;
std::size_t g_limit = 0;  // KILN_GPU_MEMORY_BYTES, for pools made later too (g_limit_mu)

Backend& backend(std::size_t i) {
    static std::once_flag once[kBackends];
    std::call_once(once[i], [i] {
        auto* b = new Backend();
        b->loaded = i == 0 ? cuda::load() : hip::load();
        const Status& st = b->loaded.status;
        if (!st.available)
            support::log().info("{} unavailable: {}", vendor_name(i), st.why);
        else
            support::log().info("{}: {} (version {}) with {} device(s), {} ({})", vendor_name(i), st.library, st.driver_version,
                                st.device_count, b->loaded.devices[0].name, b->loaded.devices[0].arch);
        g_backends[i].store(b, std::memory_order_release);
    });
    return *g_backends[i].load(std::memory_order_acquire);
}

// The backend of `d`, checked: available, and `d` one of its devices.
Backend& backend_for(Device d) {
    const std::size_t i = slot(d.kind);
    Backend& b = backend(i);
    const Status& st = b.loaded.status;
    KILN_USER_CHECK(st.available, "device " << kind_name(i) << ": not available: " << st.why);
    KILN_USER_CHECK(d.index >= 0 && d.index < st.device_count,
                    "device " << d.to_string() << ": no such device (this machine has " << st.device_count << " "
                              << vendor_name(i) << " device(s))");
    return b;
}

// Set when the calling thread's streams went back to the spares (the thread is ending): a
// tensor freed after that is released on the stream it last had (kept here, trivially
// destructible, so reading it then is safe).
constexpr std::size_t kExitStreams = 16;
thread_local bool t_exiting = false;
thread_local Stream t_exit_streams[kBackends][kExitStreams] = {};

// The calling thread's streams, per backend and device; given back to the spares when the
// thread ends.
struct ThreadStreams {
    std::vector<Stream> streams[kBackends];
    ~ThreadStreams() {
        t_exiting = true;
        for (std::size_t i = 0; i < kBackends; ++i) {
            const auto& v = streams[i];
            if (v.empty()) continue;
            for (std::size_t d = 0; d < v.size() && d < kExitStreams; ++d) t_exit_streams[i][d] = v[d];
            Backend& b = *g_backends[i].load(std::memory_order_acquire);  // loaded: it made these streams
            std::lock_guard<std::mutex> lock(b.spare_mu);
            if (b.spare.size() < v.size()) b.spare.resize(v.size());
            for (std::size_t d = 0; d < v.size(); ++d)
                if (v[d]) b.spare[d].push_back(v[d]);
        }
    }
};
thread_local ThreadStreams t_streams;
thread_local int t_bound[kBackends] = {-1, -1};

void bind(Device d) {
    const std::size_t i = slot(d.kind);
    if (t_bound[i] == d.index) return;
    backend_for(d).loaded.vendor->bind(d.index);
    t_bound[i] = d.index;
}

class PoolMemory final : public DeviceMemoryBackend {
public:
    explicit PoolMemory(Device d) : d_(d) {}
    void* raw_alloc(std::size_t bytes) override {
        bind(d_);
        return backend_for(d_).loaded.vendor->try_malloc(bytes);
    }
    void raw_free(void* p) override {
        bind(d_);
        backend_for(d_).loaded.vendor->free(p);
    }
    void synchronize(void* stream) override { gpu::synchronize(d_, stream); }

private:
    Device d_;
};

DevicePool& pool(Device d) {
    Backend& b = backend_for(d);
    std::lock_guard<std::mutex> lock(b.pools_mu);
    if (b.pools.empty()) b.pools.resize(static_cast<std::size_t>(b.loaded.status.device_count));
    auto& p = b.pools[static_cast<std::size_t>(d.index)];
    if (!p) {
        std::lock_guard<std::mutex> limit_lock(g_limit_mu);
        p = std::make_unique<DevicePool>(std::make_unique<PoolMemory>(d), g_limit);
    }
    return *p;
}

// Runs `f` on every pool made so far, of every loaded backend.
template <class F>
void each_pool(F&& f) {
    for (auto& slot_ptr : g_backends) {
        Backend* b = slot_ptr.load(std::memory_order_acquire);
        if (!b) continue;
        std::lock_guard<std::mutex> lock(b->pools_mu);
        for (auto& p : b->pools)
            if (p) f(*p);
    }
}

}  // namespace

const Status& status(Device::Kind kind) { return backend(slot(kind)).loaded.status; }

bool available(Device d, std::string* why) {
    const std::size_t i = slot(d.kind);
    const Status& st = backend(i).loaded.status;
    if (!st.available) {
        if (why) *why = st.why;
        return false;
    }
    if (d.index < 0 || d.index >= st.device_count) {
        if (why) *why = "no such device (this machine has " + std::to_string(st.device_count) + " " + vendor_name(i) + " device(s))";
        return false;
    }
    return true;
}

const DeviceInfo& device_info(Device d) { return backend_for(d).loaded.devices[static_cast<std::size_t>(d.index)]; }

Stream thread_stream(Device d) {
    bind(d);
    const std::size_t i = slot(d.kind), at = static_cast<std::size_t>(d.index);
    auto& v = t_streams.streams[i];
    if (v.size() <= at) v.resize(at + 1, nullptr);
    Stream& s = v[at];
    if (s) return s;
    Backend& b = backend_for(d);
    {
        std::lock_guard<std::mutex> lock(b.spare_mu);
        if (at < b.spare.size() && !b.spare[at].empty()) {
            s = b.spare[at].back();
            b.spare[at].pop_back();
            return s;
        }
    }
    s = b.loaded.vendor->create_stream();
    return s;
}

void synchronize(Device d, Stream s) {
    bind(d);
    backend_for(d).loaded.vendor->synchronize(s);
}

void* allocate(Device d, std::size_t bytes, std::size_t* block_bytes) {
    void* p = pool(d).allocate(bytes > 0 ? bytes : 1, thread_stream(d), block_bytes);
    if (!p) throw std::bad_alloc();
    return p;
}

void release(Device d, void* p, std::size_t block_bytes) {
    const std::size_t i = slot(d.kind), at = static_cast<std::size_t>(d.index);
    Stream s = t_exiting ? (at < kExitStreams ? t_exit_streams[i][at] : nullptr) : thread_stream(d);
    pool(d).release(p, block_bytes, s);
}

DevicePoolStats all_pool_stats() {
    DevicePoolStats sum;
    each_pool([&](DevicePool& p) {
        const DevicePoolStats s = p.stats();
        sum.bytes_in_use += s.bytes_in_use;
        sum.bytes_cached += s.bytes_cached;
        sum.peak_bytes += s.peak_bytes;
        sum.allocations += s.allocations;
        sum.frees += s.frees;
        sum.oom_retries += s.oom_retries;
        sum.device_allocs += s.device_allocs;
    });
    return sum;
}

void set_memory_limit(std::size_t bytes) {
    {
        std::lock_guard<std::mutex> lock(g_limit_mu);
        g_limit = bytes;
    }
    each_pool([&](DevicePool& p) { p.set_limit(bytes); });
}

void copy(Device d, CopyKind kind, void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    Stream s = thread_stream(d);
    backend_for(d).loaded.vendor->copy(kind, dst, src, bytes, s);
    synchronize(d, s);
}

void fill_bytes(Device d, void* dst, unsigned char value, std::size_t bytes) {
    if (bytes == 0) return;
    Stream s = thread_stream(d);
    backend_for(d).loaded.vendor->fill(dst, value, bytes, s);
    synchronize(d, s);
}

Module load_module(Device d, const std::string& image, const char* entry, Function* fn) {
    bind(d);
    Vendor& v = *backend_for(d).loaded.vendor;
    Module m = v.load_module(image);
    try {
        *fn = v.get_function(m, entry);
    } catch (...) {
        v.unload_module(m);
        throw;
    }
    return m;
}

void unload_module(Device d, Module m) noexcept {
    try {
        bind(d);
        backend_for(d).loaded.vendor->unload_module(m);
    } catch (...) {  // the vendor library is going away with the process
    }
}

std::string launch(Device d, Function fn, unsigned grid, unsigned block, Stream s, void** params) {
    bind(d);
    return backend_for(d).loaded.vendor->launch(fn, grid, block, s, params);
}

}  // namespace kiln::core::gpu
