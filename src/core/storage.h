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
    std::function<void(void*)> deleter;  // empty: borrowed, nothing to free
    Storage() = default;
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    ~Storage() {
        if (deleter) deleter(ptr);
    }
};

// A new owned, 64-byte aligned CPU allocation (uninitialised).
std::shared_ptr<Storage> allocate(std::size_t bytes, Device device);

}  // namespace kiln::detail
