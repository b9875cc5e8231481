#include "src/core/allocator.h"

#include "src/support/checked.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <vector>

namespace kiln::core {
namespace {

constexpr std::size_t kAligned = 1024;  // blocks from here on are 64-byte aligned

struct Block {
    void* p;
    std::size_t capacity;
};

struct Cache {
    std::mutex mu;
    std::vector<Block> blocks;
    std::size_t bytes = 0;
};
Cache& cache() {
    static Cache* c = new Cache();  // never destroyed: frees during static destruction stay safe
    return *c;
}

std::atomic<std::uint64_t> g_alloc_count{0};

void raw_free(void* p, std::size_t capacity) {
    if (capacity >= kAligned) ::operator delete(p, std::align_val_t(64));
    else ::operator delete(p);
}

// Large sizes are rounded up (to 4 KiB under 1 MiB, to 64 KiB from there) so that nearby
// sizes share blocks. A size past the largest int64 is a kiln::Error (never rounded around
// to a small block).
std::size_t round_capacity(std::size_t bytes) {
    if (bytes < kAligned) return std::max<std::size_t>(bytes, 1);
    if (bytes < kLargeBlock) return (bytes + 63) / 64 * 64;
    if (bytes < (std::size_t{1} << 20)) return (bytes + 4095) / 4096 * 4096;
    return support::checked_round_up(bytes, std::size_t{64} << 10, "host_alloc");
}

}  // namespace

void* host_alloc(std::size_t bytes, std::size_t* capacity) {
    std::size_t cap = round_capacity(bytes);
    g_alloc_count.fetch_add(1, std::memory_order_relaxed);
    if (cap >= kLargeBlock) {
        Cache& c = cache();
        std::lock_guard<std::mutex> lock(c.mu);
        // The smallest cached block that fits and wastes at most a quarter.
        auto best = c.blocks.end();
        for (auto it = c.blocks.begin(); it != c.blocks.end(); ++it)
            if (it->capacity >= cap && it->capacity <= cap + cap / 4 && (best == c.blocks.end() || it->capacity < best->capacity))
                best = it;
        if (best != c.blocks.end()) {
            Block b = *best;
            c.blocks.erase(best);
            c.bytes -= b.capacity;
            *capacity = b.capacity;
            return b.p;
        }
    }
    *capacity = cap;
    if (cap >= kAligned) return ::operator new(cap, std::align_val_t(64));
    return ::operator new(cap);
}

void host_free(void* p, std::size_t capacity) {
    if (capacity >= kLargeBlock) {
        Cache& c = cache();
        std::unique_lock<std::mutex> lock(c.mu);
        if (c.blocks.size() < kMaxCachedBlocks && c.bytes + capacity <= kMaxCachedBytes) {
            c.blocks.push_back({p, capacity});
            c.bytes += capacity;
            return;
        }
        lock.unlock();
    }
    raw_free(p, capacity);
}

void host_trim() {
    Cache& c = cache();
    std::vector<Block> blocks;
    {
        std::lock_guard<std::mutex> lock(c.mu);
        blocks.swap(c.blocks);
        c.bytes = 0;
    }
    for (const Block& b : blocks) raw_free(b.p, b.capacity);
}

std::uint64_t host_alloc_count() { return g_alloc_count.load(std::memory_order_relaxed); }

std::size_t host_cached_bytes() {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    return c.bytes;
}

}  // namespace kiln::core
