#pragma once
// The memory behind tensors: owned (64-byte aligned) or borrowed from the caller.
#include <kiln/dtype.h>

#include <cstddef>
#include <functional>
#include <memory>

namespace kiln::detail {

struct Storage {
    void* ptr = nullptr;
    std::size_t bytes = 0;
    Device device = Device::cpu();
    bool owned = false;                  // allocated by allocate(): freed with release_owned
    std::function<void(void*)> deleter;  // borrowed memory: the caller's deleter, if any
    Storage() = default;
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    ~Storage();
};

// Allocations of at least this many bytes are 64-byte aligned (cache lines, AVX-512 loads);
// smaller ones take the allocator's natural (16-byte) alignment, which is much cheaper.
inline constexpr std::size_t kAlignedThreshold = 1024;

// A new owned CPU allocation (uninitialised).
std::shared_ptr<Storage> allocate(std::size_t bytes, Device device);

}  // namespace kiln::detail
