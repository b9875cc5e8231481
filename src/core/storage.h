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
    bool owned = false;                  // allocated by allocate() (core/allocator.h)
    std::size_t capacity = 0;            // owned: the block's size, for core::host_free
    std::function<void(void*)> deleter;  // borrowed memory: the caller's deleter, if any
    Storage() = default;
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    ~Storage();
};

// A new owned CPU allocation (uninitialised).
std::shared_ptr<Storage> allocate(std::size_t bytes, Device device);

}  // namespace kiln::detail
