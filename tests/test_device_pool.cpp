// The device pool's contract (src/core/device_pool.h), clause by clause, against a fake device
// over host memory that counts raw allocations, frees and synchronisations per stream, can run
// out of memory at a given capacity, and checks that no block is handed out twice at once.
// The last case runs several threads through one pool; its name contains "threads", so the
// ThreadSanitizer run of the suite covers it.
#include <doctest/doctest.h>
#include <kiln/error.h>

#include "src/core/device_pool.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

using namespace kiln::core;

namespace {

constexpr std::size_t KiB = 1024, MiB = 1024 * 1024;

// What the fake device saw. Outlives the pool (which owns the FakeDevice that points here).
struct Device {
    std::mutex mu;
    std::size_t capacity = 0;  // 0: unbounded
    std::size_t used = 0, max_used = 0;
    std::map<void*, std::size_t> live;    // raw allocations not yet freed
    std::set<void*> leased;               // blocks a test holds from the pool
    int allocs = 0, failed_allocs = 0, frees = 0, bad_frees = 0, double_leases = 0;
    std::map<void*, int> syncs;           // synchronize calls per stream

    int syncs_of(void* stream) {
        std::lock_guard<std::mutex> lock(mu);
        return syncs[stream];
    }
    int total_syncs() {
        std::lock_guard<std::mutex> lock(mu);
        int n = 0;
        for (auto& [s, k] : syncs) n += k;
        return n;
    }
    // A test takes a block from the pool / gives it back: a block held twice at once is a bug.
    void lease(void* p) {
        std::lock_guard<std::mutex> lock(mu);
        if (!leased.insert(p).second) double_leases++;
    }
    void unlease(void* p) {
        std::lock_guard<std::mutex> lock(mu);
        leased.erase(p);
    }
    ~Device() {
        for (auto& [p, n] : live) std::free(p);  // blocks the pool leaked at its destruction
    }
};

class FakeDevice final : public DeviceMemoryBackend {
public:
    explicit FakeDevice(Device& d) : d_(d) {}
    void* raw_alloc(std::size_t bytes) override {
        std::lock_guard<std::mutex> lock(d_.mu);
        if (d_.capacity > 0 && d_.used + bytes > d_.capacity) {
            d_.failed_allocs++;
            return nullptr;
        }
        void* p = std::malloc(bytes);
        d_.live[p] = bytes;
        d_.used += bytes;
        d_.max_used = std::max(d_.max_used, d_.used);
        d_.allocs++;
        return p;
    }
    void raw_free(void* p) override {
        std::lock_guard<std::mutex> lock(d_.mu);
        auto it = d_.live.find(p);
        if (it == d_.live.end() || d_.leased.count(p)) {  // not from here, or still in use
            d_.bad_frees++;
            return;
        }
        d_.used -= it->second;
        d_.live.erase(it);
        d_.frees++;
        std::free(p);
    }
    void synchronize(void* stream) override {
        std::lock_guard<std::mutex> lock(d_.mu);
        d_.syncs[stream]++;
    }

private:
    Device& d_;
};

// Two distinct stream tags.
int stream_a_tag, stream_b_tag;
void* const kStreamA = &stream_a_tag;
void* const kStreamB = &stream_b_tag;

// A pool over `d` and the blocks it hands out, leased in `d` while held.
struct Fixture {
    Device& d;
    DevicePool pool;
    Fixture(Device& dev, std::size_t limit = 0) : d(dev), pool(std::make_unique<FakeDevice>(dev), limit) {}

    struct Held {
        void* p;
        std::size_t bytes;
    };
    Held get(std::size_t bytes, void* stream = kStreamA) {
        Held h{nullptr, 123};
        h.p = pool.allocate(bytes, stream, &h.bytes);
        if (h.p) d.lease(h.p);
        return h;
    }
    void put(Held h, void* stream = kStreamA) {
        d.unlease(h.p);
        pool.release(h.p, h.bytes, stream);
    }
};

}  // namespace

TEST_CASE("device pool: requests under 1 MiB round up to 512 bytes, larger ones to 2 MiB") {
    CHECK(device_block_size(1) == 512);
    CHECK(device_block_size(512) == 512);
    CHECK(device_block_size(513) == 1024);
    CHECK(device_block_size(MiB - 1) == MiB);
    CHECK(device_block_size(MiB) == 2 * MiB);
    CHECK(device_block_size(2 * MiB) == 2 * MiB);
    CHECK(device_block_size(2 * MiB + 1) == 4 * MiB);
    CHECK(device_block_size(5 * MiB) == 6 * MiB);
    CHECK_THROWS_AS(device_block_size(~std::size_t{0} - 5), kiln::Error);

    Device d;
    Fixture f(d);
    auto h = f.get(100);
    REQUIRE(h.p);
    CHECK(h.bytes == 512);
    CHECK(d.live.at(h.p) == 512);
    auto g = f.get(3 * MiB);
    REQUIRE(g.p);
    CHECK(g.bytes == 4 * MiB);
    CHECK(d.live.at(g.p) == 4 * MiB);
    f.put(h);
    f.put(g);
}

TEST_CASE("device pool: a released block serves the next fitting request on its stream from the cache") {
    Device d;
    Fixture f(d);
    auto h = f.get(1000);  // 1024
    void* p = h.p;
    f.put(h);
    CHECK(f.pool.stats().bytes_cached == 1024);
    h = f.get(900);  // rounds to 1024 too
    CHECK(h.p == p);
    CHECK(h.bytes == 1024);
    CHECK(d.allocs == 1);
    CHECK(d.total_syncs() == 0);  // the same stream orders the work: no wait
    CHECK(f.pool.stats().bytes_cached == 0);
    // A request the cached block is too small for goes to the device.
    f.put(h);
    auto big = f.get(2048);
    CHECK(big.p != p);
    CHECK(d.allocs == 2);
    CHECK(f.pool.stats().bytes_cached == 1024);
    f.put(big);
    CHECK(d.double_leases == 0);
}

TEST_CASE("device pool: the smallest fitting cached block serves a request") {
    Device d;
    Fixture f(d);
    auto a = f.get(2048), b = f.get(2500), c = f.get(3000);  // 2048, 2560, 3072
    f.put(c);
    f.put(b);
    f.put(a);
    CHECK(f.get(2000).p == a.p);
    CHECK(f.get(2000).p == b.p);  // 2560 for 2048: within a quarter
    auto e = f.get(2000);         // 3072 would waste half: a new block
    CHECK(e.p != c.p);
    CHECK(d.allocs == 4);
    CHECK(f.get(2900).p == c.p);
    CHECK(d.double_leases == 0);
}

TEST_CASE("device pool: small and large blocks are cached apart; a much larger block does not serve a request") {
    Device d;
    Fixture f(d);
    auto large = f.get(4 * MiB), mid = f.get(512 * KiB), huge = f.get(64 * MiB);
    f.put(large);
    f.put(mid);
    f.put(huge);
    CHECK(f.pool.stats().bytes_cached == 68 * MiB + 512 * KiB);
    auto tiny = f.get(100);
    CHECK((tiny.p != large.p && tiny.p != mid.p && tiny.p != huge.p));
    auto two = f.get(2 * MiB);
    CHECK((two.p != large.p && two.p != huge.p));
    auto eight = f.get(8 * MiB);
    CHECK(eight.p != huge.p);
    CHECK(d.allocs == 6);
    CHECK(f.get(4 * MiB).p == large.p);
    CHECK(f.get(60 * MiB).p == huge.p);
    CHECK(f.get(450 * KiB).p == mid.p);
    CHECK(d.allocs == 6);
    CHECK(d.double_leases == 0);
}

TEST_CASE("device pool: another stream reuses a block after one synchronize of the releasing stream") {
    Device d;
    Fixture f(d);
    auto h = f.get(4 * MiB, kStreamA);
    void* p = h.p;
    f.put(h, kStreamA);
    h = f.get(4 * MiB, kStreamB);
    CHECK(h.p == p);
    CHECK(d.allocs == 1);
    CHECK(d.syncs_of(kStreamA) == 1);
    CHECK(d.syncs_of(kStreamB) == 0);
    f.put(h, kStreamB);  // now B's: B reuses it without waiting
    h = f.get(4 * MiB, kStreamB);
    CHECK(h.p == p);
    CHECK(d.total_syncs() == 1);
    f.put(h, kStreamB);
}

TEST_CASE("device pool: a block released on the request's stream is preferred to another stream's") {
    Device d;
    Fixture f(d);
    auto a = f.get(2 * MiB), b = f.get(2 * MiB);
    f.put(a, kStreamA);
    f.put(b, kStreamB);
    CHECK(f.get(2 * MiB, kStreamB).p == b.p);
    CHECK(f.get(2 * MiB, kStreamA).p == a.p);
    CHECK(d.total_syncs() == 0);
}

TEST_CASE("device pool: with a limit the bytes held never exceed it; cached blocks are freed to make room") {
    Device d;
    Fixture f(d, 9 * MiB);
    CHECK(f.pool.limit() == 9 * MiB);
    auto a = f.get(4 * MiB), b = f.get(2 * MiB), c = f.get(100);
    f.put(b);
    f.put(c);
    auto e = f.get(4 * MiB);  // 4 + 2.0005 cached + 4 > 9: the largest cached block goes first
    REQUIRE(e.p);
    CHECK(d.frees == 1);
    CHECK(f.pool.stats().bytes_cached == 512);  // the small block still fits
    CHECK(d.max_used <= 9 * MiB);
    // 8 MiB in use: 2 more do not fit, even with the whole cache freed.
    int allocs = d.allocs;
    auto g = f.get(2 * MiB);
    CHECK(g.p == nullptr);
    CHECK(g.bytes == 0);
    CHECK(d.allocs == allocs);  // the device was not asked past the limit
    CHECK(d.failed_allocs == 0);
    CHECK(f.pool.stats().oom_retries == 1);
    CHECK(f.pool.stats().bytes_cached == 0);
    // Lowering the limit frees cache; a block released over it goes back to the device.
    f.put(e);
    CHECK(f.pool.stats().bytes_cached == 4 * MiB);
    f.pool.set_limit(6 * MiB);
    CHECK(f.pool.limit() == 6 * MiB);
    CHECK(f.pool.stats().bytes_cached == 0);
    f.pool.set_limit(2 * MiB);
    f.put(a);
    CHECK(d.live.empty());
    CHECK(f.pool.stats().bytes_cached == 0);
    CHECK(d.bad_frees == 0);
}

TEST_CASE("device pool: on out-of-memory the cache is flushed and the request retried once") {
    Device d;
    d.capacity = 8 * MiB;
    Fixture f(d);
    auto a = f.get(4 * MiB), b = f.get(2 * MiB);
    f.put(a);
    f.put(b);
    auto c = f.get(6 * MiB);  // 6 cached + 6 > 8: the device fails, the flush makes room
    REQUIRE(c.p);
    CHECK(d.failed_allocs == 1);
    CHECK(d.allocs == 3);
    CHECK(d.frees == 2);
    DevicePoolStats s = f.pool.stats();
    CHECK(s.oom_retries == 1);
    CHECK(s.device_allocs == 3);
    CHECK(s.bytes_cached == 0);
    CHECK(s.allocations == 3);
    // Still no room after the flush: null, after exactly one retry.
    auto e = f.get(4 * MiB);
    CHECK(e.p == nullptr);
    CHECK(d.failed_allocs == 3);
    s = f.pool.stats();
    CHECK(s.oom_retries == 2);
    CHECK(s.allocations == 3);
    CHECK(s.device_allocs == 3);
    CHECK(s.bytes_in_use == 6 * MiB);
    f.put(c);
}

TEST_CASE("device pool: trim frees every cached block and keeps the blocks in use") {
    Device d;
    Fixture f(d);
    auto a = f.get(100), b = f.get(3 * MiB), c = f.get(5000);
    f.put(a);
    f.put(b);
    f.pool.trim();
    CHECK(d.frees == 2);
    CHECK(d.live.size() == 1);
    CHECK(d.live.count(c.p) == 1);
    DevicePoolStats s = f.pool.stats();
    CHECK(s.bytes_cached == 0);
    CHECK(s.bytes_in_use == 5120);
    f.put(c);
    CHECK(d.bad_frees == 0);
}

TEST_CASE("device pool: stats count bytes in use and cached, the peak, allocations, frees and device allocations") {
    Device d;
    Fixture f(d);
    auto a = f.get(100), b = f.get(2 * MiB);
    DevicePoolStats s = f.pool.stats();
    CHECK(s.bytes_in_use == 2 * MiB + 512);
    CHECK(s.peak_bytes == 2 * MiB + 512);
    CHECK(s.allocations == 2);
    CHECK(s.device_allocs == 2);
    f.put(b);
    s = f.pool.stats();
    CHECK(s.bytes_in_use == 512);
    CHECK(s.bytes_cached == 2 * MiB);
    CHECK(s.frees == 1);
    b = f.get(2 * MiB);  // from the cache
    auto c = f.get(1);
    s = f.pool.stats();
    CHECK(s.allocations == 4);
    CHECK(s.device_allocs == 3);
    CHECK(s.bytes_in_use == 2 * MiB + 1024);
    CHECK(s.peak_bytes == 2 * MiB + 1024);
    f.put(a);
    f.put(b);
    f.put(c);
    s = f.pool.stats();
    CHECK(s.bytes_in_use == 0);
    CHECK(s.bytes_cached == 2 * MiB + 1024);
    CHECK(s.peak_bytes == 2 * MiB + 1024);
    CHECK(s.frees == 4);
    CHECK(s.oom_retries == 0);
}

TEST_CASE("device pool: the destructor frees the cache; blocks still in use stay with the device") {
    Device d;
    void* kept = nullptr;
    {
        Fixture f(d);
        auto a = f.get(100), b = f.get(4 * MiB);
        f.put(a);
        kept = b.p;
    }
    CHECK(d.frees == 1);
    CHECK(d.live.size() == 1);
    CHECK(d.live.count(kept) == 1);  // freed by ~Device
}

TEST_CASE("device pool threads: threads allocate and release through one pool; no block is held twice") {
    constexpr int kThreads = 6, kIters = 3000;
    constexpr std::size_t kLimit = 24 * MiB;
    Device d;
    Fixture f(d, kLimit);  // tight: requests meet the limit and its out-of-memory path often
    const std::size_t sizes[] = {1, 600, 4000, 100 * KiB, 900 * KiB, MiB, 2 * MiB, 3 * MiB, 6 * MiB};
    std::vector<int> streams(kThreads + 1);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            std::mt19937 rng(t);
            std::vector<std::pair<Fixture::Held, void*>> held;
            for (int i = 0; i < kIters; ++i) {
                if (held.size() < 4 && rng() % 3 != 0) {
                    void* stream = rng() % 4 == 0 ? &streams[kThreads] : &streams[t];  // one shared
                    auto h = f.get(sizes[rng() % std::size(sizes)], stream);
                    if (!h.p) continue;
                    std::memset(h.p, t, 64);  // the block is ours: write its ends
                    static_cast<unsigned char*>(h.p)[h.bytes - 1] = static_cast<unsigned char>(t);
                    held.push_back({h, stream});
                } else if (!held.empty()) {
                    std::size_t k = rng() % held.size();
                    auto [h, stream] = held[k];
                    const auto* bytes = static_cast<const unsigned char*>(h.p);
                    if (bytes[0] != t || bytes[63] != t || bytes[h.bytes - 1] != t) std::abort();  // shared with another thread
                    held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
                    f.put(h, rng() % 2 ? stream : &streams[t]);
                }
                if (i % 500 == 0) f.pool.stats();
                if (t == 0 && i % 1000 == 999) f.pool.trim();
            }
            for (auto& [h, stream] : held) f.put(h, stream);
        });
    for (auto& th : threads) th.join();

    DevicePoolStats s = f.pool.stats();
    CHECK(d.double_leases == 0);
    CHECK(d.bad_frees == 0);
    CHECK(s.bytes_in_use == 0);
    CHECK(s.allocations == s.frees);
    CHECK(s.allocations > 1000);
    CHECK(s.device_allocs == static_cast<std::uint64_t>(d.allocs));
    CHECK(s.bytes_cached == d.used);
    CHECK(d.live.size() == static_cast<std::size_t>(d.allocs - d.frees));
    CHECK(d.max_used <= kLimit);
    CHECK(s.peak_bytes <= kLimit);
    MESSAGE("allocations " << s.allocations << ", device allocations " << s.device_allocs << ", out-of-memory retries "
                           << s.oom_retries << ", synchronize calls " << d.total_syncs());
}
