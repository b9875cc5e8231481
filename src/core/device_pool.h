#pragma once
// A caching allocator for one device's memory (CUDA or HIP), independent of the vendor API:
// the device's raw allocate / free / synchronise come through DeviceMemoryBackend, so the
// pool's logic is tested against a fake device (tests/test_device_pool.cpp).
//
// Contract:
// - Requests are rounded up (small ones to 512 bytes; large ones, >= 1 MiB, to 2 MiB) and
//   served from cached blocks of a fitting size before the device is asked.
// - Stream-ordered: each block is released with the stream (an opaque tag) whose queued
//   work may still use it. A later allocation on the same stream may reuse it at once (the
//   stream orders the work); one on another stream first waits for the releasing stream
//   (backend synchronize) before reusing it.
// - Bounded: with limit > 0 the bytes the pool holds from the device (in use + cached) never
//   exceed `limit`; a request that would go past it first frees cached blocks.
// - On out-of-memory (the backend returns null, or the limit) the pool frees its whole cache
//   and retries once (counted in oom_retries); if that fails too, allocate returns null.
// - Thread-safe.
#include <cstddef>
#include <cstdint>
#include <memory>

namespace kiln::core {

class DeviceMemoryBackend {
public:
    virtual ~DeviceMemoryBackend() = default;
    virtual void* raw_alloc(std::size_t bytes) = 0;  // null when the device has no memory for it
    // `p` may still be used by work queued on the stream it was released with: the free must
    // wait for that work first (cudaFree and hipFree wait for the device).
    virtual void raw_free(void* p) = 0;
    virtual void synchronize(void* stream) = 0;      // waits for the work queued on `stream`
};

struct DevicePoolStats {
    std::uint64_t bytes_in_use = 0;   // handed out and not yet released (block sizes)
    std::uint64_t bytes_cached = 0;   // held from the device but free
    std::uint64_t peak_bytes = 0;     // the largest bytes_in_use seen
    std::uint64_t allocations = 0;    // allocate() calls that succeeded
    std::uint64_t frees = 0;          // release() calls
    std::uint64_t oom_retries = 0;    // cache flushes after an out-of-memory
    std::uint64_t device_allocs = 0;  // raw_alloc calls that succeeded
};

class DevicePool {
public:
    DevicePool(std::unique_ptr<DeviceMemoryBackend> backend, std::size_t limit);
    ~DevicePool();  // frees the cache (blocks still in use leak: the device is going away)
    DevicePool(const DevicePool&) = delete;
    DevicePool& operator=(const DevicePool&) = delete;

    // A block of at least `bytes` (> 0) for use on `stream`; *block_bytes receives its size,
    // to pass back to release(). Null when the device (or the limit) has no room even after
    // the cache is flushed.
    void* allocate(std::size_t bytes, void* stream, std::size_t* block_bytes);
    // Gives a block back; queued work on `stream` may still use it (see above).
    void release(void* p, std::size_t block_bytes, void* stream);
    void trim();  // frees every cached block to the device
    void set_limit(std::size_t limit);
    std::size_t limit() const;
    DevicePoolStats stats() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The size a request of `bytes` is rounded up to; kiln::Error past the largest int64.
std::size_t device_block_size(std::size_t bytes);

}  // namespace kiln::core
