#include "src/core/device_pool.h"

#include "src/support/check.h"
#include "src/support/checked.h"

#include <algorithm>
#include <iterator>
#include <mutex>
#include <set>
#include <tuple>

// Design (the contract is in the header):
// - Every block is one raw allocation of its rounded size; blocks are never split or merged,
//   so giving one back to the device is always possible and the pool keeps no segment lists.
// - Two caches: small blocks (those of requests under 1 MiB) and large ones. A request looks
//   only in its own cache, and takes the smallest cached block that fits and is at most a
//   quarter larger than the request: a 4 MiB request does not take a 64 MiB block, a 512-byte
//   one not a 900 KiB one. (Large blocks come in steps of 2 MiB, so up to 8 MiB a request
//   takes only its own size.) Among the fitting blocks, the smallest one released on the
//   request's stream wins; only when none is on that stream does the smallest one from
//   another stream serve it, after the releasing stream is synchronised (outside the lock:
//   other threads go on meanwhile, and several may be in synchronize at once).
// - One mutex guards the caches and the counters; the backend's raw_alloc and raw_free run
//   under it.
// - raw_free may be given a block whose releasing stream has queued work on it: the vendors'
//   free (cudaFree, hipFree) waits for the device first.

namespace kiln::core {
namespace {

constexpr std::size_t kSmallRound = 512;
constexpr std::size_t kLargeMin = std::size_t{1} << 20;
constexpr std::size_t kLargeRound = std::size_t{2} << 20;

struct Block {
    std::size_t bytes;
    void* p;
    void* stream;  // the stream it was released with
    bool operator<(const Block& o) const { return std::tie(bytes, p) < std::tie(o.bytes, o.p); }
};

using Cache = std::set<Block>;

}  // namespace

std::size_t device_block_size(std::size_t bytes) {
    if (bytes < kLargeMin) return std::max(kSmallRound, (bytes + kSmallRound - 1) / kSmallRound * kSmallRound);
    return support::checked_round_up(bytes, kLargeRound, "device_block_size");
}

struct DevicePool::Impl {
    std::unique_ptr<DeviceMemoryBackend> backend;
    mutable std::mutex mu;
    std::size_t limit;
    Cache small, large;
    DevicePoolStats stats;

    // Small blocks are those of requests under 1 MiB: rounded to 512 bytes, at most 1 MiB.
    Cache& cache_for(std::size_t bytes) { return bytes <= kLargeMin ? small : large; }
    std::uint64_t held() const { return stats.bytes_in_use + stats.bytes_cached; }

    void free_cached(Cache& cache, Cache::iterator it) {
        backend->raw_free(it->p);
        stats.bytes_cached -= it->bytes;
        cache.erase(it);
    }
    void free_all_cached() {
        for (Cache* c : {&small, &large})
            while (!c->empty()) free_cached(*c, c->begin());
    }
    // Frees cached blocks, largest first, until `bytes` more fit under the limit (or there is
    // no limit); false when the cache runs out first.
    bool make_room(std::size_t bytes) {
        while (limit > 0 && held() + bytes > limit) {
            Cache& c = !large.empty() ? large : small;
            if (c.empty()) return false;
            free_cached(c, std::prev(c.end()));
        }
        return true;
    }

    // The cached block to serve `bytes` on `stream` (see the design above), or end().
    Cache::iterator find_cached(Cache& cache, std::size_t bytes, void* stream) {
        auto best = cache.end();
        for (auto it = cache.lower_bound(Block{bytes, nullptr, nullptr}); it != cache.end() && it->bytes <= bytes + bytes / 4; ++it) {
            if (it->stream == stream) return it;
            if (best == cache.end()) best = it;
        }
        return best;
    }

    void* raw_alloc(std::size_t bytes) {
        if (!make_room(bytes)) return nullptr;
        void* p = backend->raw_alloc(bytes);
        if (p) stats.device_allocs++;
        return p;
    }

    void hand_out(std::size_t bytes) {
        stats.bytes_in_use += bytes;
        stats.peak_bytes = std::max(stats.peak_bytes, stats.bytes_in_use);
        stats.allocations++;
    }
};

DevicePool::DevicePool(std::unique_ptr<DeviceMemoryBackend> backend, std::size_t limit)
    : impl_(std::make_unique<Impl>()) {
    KILN_CHECK(backend, "DevicePool needs a backend");
    impl_->backend = std::move(backend);
    impl_->limit = limit;
}

DevicePool::~DevicePool() { impl_->free_all_cached(); }

void* DevicePool::allocate(std::size_t bytes, void* stream, std::size_t* block_bytes) {
    KILN_CHECK(bytes > 0, "DevicePool::allocate of 0 bytes");
    const std::size_t size = device_block_size(bytes);
    Impl& m = *impl_;
    void* wait_for = nullptr;  // the stream to synchronise before a cross-stream reuse
    void* p = nullptr;
    {
        std::lock_guard<std::mutex> lock(m.mu);
        Cache& cache = m.cache_for(size);
        if (auto it = m.find_cached(cache, size, stream); it != cache.end()) {
            p = it->p;
            *block_bytes = it->bytes;
            if (it->stream != stream) wait_for = it->stream;
            m.stats.bytes_cached -= it->bytes;
            cache.erase(it);
        } else {
            p = m.raw_alloc(size);
            if (!p) {
                m.stats.oom_retries++;
                m.free_all_cached();
                p = m.raw_alloc(size);
                if (!p) {
                    *block_bytes = 0;
                    return nullptr;
                }
            }
            *block_bytes = size;
        }
        m.hand_out(*block_bytes);
    }
    if (wait_for) m.backend->synchronize(wait_for);
    return p;
}

void DevicePool::release(void* p, std::size_t block_bytes, void* stream) {
    if (!p) return;
    Impl& m = *impl_;
    std::lock_guard<std::mutex> lock(m.mu);
    KILN_CHECK(block_bytes <= m.stats.bytes_in_use, "DevicePool::release of a block it did not hand out");
    m.stats.bytes_in_use -= block_bytes;
    m.stats.frees++;
    if (m.limit > 0 && m.held() + block_bytes > m.limit) {  // the limit was lowered under it
        m.backend->raw_free(p);
        return;
    }
    m.cache_for(block_bytes).insert(Block{block_bytes, p, stream});
    m.stats.bytes_cached += block_bytes;
}

void DevicePool::trim() {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->free_all_cached();
}

void DevicePool::set_limit(std::size_t limit) {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->limit = limit;
    impl_->make_room(0);
}

std::size_t DevicePool::limit() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->limit;
}

DevicePoolStats DevicePool::stats() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->stats;
}

}  // namespace kiln::core
