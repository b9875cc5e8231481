#pragma once
// GPU devices of every vendor, behind one set of calls: the vendor's library loaded at run
// time (CUDA: src/core/cuda/driver.h; HIP: src/core/hip/runtime.h), its devices, one stream
// per calling thread and device, the caching allocator of each device
// (src/core/device_pool.h), copies, code objects and launches. The device's kind picks the
// vendor. Nothing here needs a vendor SDK at build time.
//
// Errors: a call for a backend that is not available, or a device that does not exist,
// throws kiln::Error saying what is missing; a failing vendor call throws kiln::Error with
// the call's name and the vendor's error text; allocation throws std::bad_alloc when the
// device has no memory even after its pool flushed the cache.
#include "src/core/device_pool.h"
#include "src/core/gpu/vendor.h"

#include <kiln/dtype.h>

#include <cstddef>
#include <string>

namespace kiln::core::gpu {

// The backend of device kind `kind` (cuda or hip): loaded once per process (thread-safe;
// never throws).
const Status& status(Device::Kind kind);
// Whether `d` is a device of an available backend; *why says what is missing when not.
bool available(Device d, std::string* why);
// Throws kiln::Error when `d` is not available.
const DeviceInfo& device_info(Device d);

// The calling thread's stream on `d` (made on first use, or taken from the streams of
// threads that ended; binds the device). Streams are never destroyed (runtime.cpp).
Stream thread_stream(Device d);
void synchronize(Device d, Stream s);

// Memory from the device's pool, released stream-ordered on the calling thread's stream.
void* allocate(Device d, std::size_t bytes, std::size_t* block_bytes);
void release(Device d, void* p, std::size_t block_bytes);
// The pools of every device of every loaded backend, summed.
DevicePoolStats all_pool_stats();
// Bounds every device's pool (KILN_GPU_MEMORY_BYTES; 0: none). Process-wide.
void set_memory_limit(std::size_t bytes);

// Synchronous copies and fills on the calling thread's stream of `d`.
void copy(Device d, CopyKind kind, void* dst, const void* src, std::size_t bytes);
void fill_bytes(Device d, void* dst, unsigned char value, std::size_t bytes);

// Code objects on `d` (bound first); see Vendor. load_module loads `image` and finds its
// kernel `entry` (the module is unloaded again when the kernel is missing).
Module load_module(Device d, const std::string& image, const char* entry, Function* fn);
void unload_module(Device d, Module m) noexcept;
std::string launch(Device d, Function fn, unsigned grid, unsigned block, Stream s, void** params);

}  // namespace kiln::core::gpu
