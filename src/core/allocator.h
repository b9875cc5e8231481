#pragma once
// Host memory for tensors. Small blocks come from the C++ allocator. Large blocks (>= 128 KiB,
// the size from which glibc's malloc may map fresh pages for a block and unmap them when it
// is freed) are 64-byte aligned and, when freed, kept in a small bounded cache for reuse: a
// large buffer that is allocated and freed on every call (an output, an intermediate) then
// keeps its pages mapped instead of paying page faults on each call (gpt2_tiny's logits of
// 8 x 32 x 1000 f32, 1000 KB, took page faults on every call in some processes: its matmul
// 0.36 -> 0.87 ms). The cache holds at most kMaxCachedBytes in kMaxCachedBlocks; it is
// process-wide and thread-safe.
#include <cstddef>
#include <cstdint>

namespace kiln::core {

inline constexpr std::size_t kLargeBlock = std::size_t{128} << 10;
inline constexpr std::size_t kMaxCachedBytes = std::size_t{512} << 20;
inline constexpr std::size_t kMaxCachedBlocks = 64;

// Returns a block of at least `bytes` (64-byte aligned when bytes >= 1 KiB); kiln::Error when
// `bytes` is past the largest int64, std::bad_alloc when memory runs out. `*capacity`
// receives the size to pass back to release().
void* host_alloc(std::size_t bytes, std::size_t* capacity);
void host_free(void* p, std::size_t capacity);
// Drops every cached block (tests; memory pressure).
void host_trim();
std::size_t host_cached_bytes();
// How many blocks host_alloc() has handed out since the process started (tests count the
// allocations of a call with it).
std::uint64_t host_alloc_count();

}  // namespace kiln::core
