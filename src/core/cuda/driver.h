#pragma once
// NVIDIA devices through the CUDA driver API, loaded at run time (libcuda.so.1, dlopen): the
// driver's status, device properties, one stream per calling thread and device, the caching
// allocator of each device (src/core/device_pool.h), copies and launches. Nothing here needs
// the CUDA SDK at build time; a machine without the driver or a device reports why.
//
// Errors: a call on a machine without the backend, or for a device that does not exist,
// throws kiln::Error saying what is missing; a failing driver call throws kiln::Error with
// the driver's error name and message; allocation throws std::bad_alloc when the device has
// no memory even after the pool flushed its cache.
#include "src/core/cuda/driver_api.h"
#include "src/core/device_pool.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::core::cuda {

struct DriverStatus {
    bool available = false;
    std::string why;       // when !available: the library, symbol or driver error that stopped it
    std::string library;   // the file that loaded
    int driver_version = 0;  // e.g. 13000
    int device_count = 0;
};
// Loads the driver once per process (thread-safe; never throws).
const DriverStatus& driver_status();
// The function table; throws kiln::Error (with driver_status().why) when unavailable.
const DriverApi& api();

struct DeviceInfo {
    int ordinal = 0;
    std::string name;
    int cc_major = 0, cc_minor = 0;  // compute capability (9.0 for an H100)
    int sm_count = 0;
    int max_threads_per_block = 0;
    std::size_t total_memory = 0;
};
// Throws kiln::Error when the driver is unavailable or `ordinal` is not a device.
const DeviceInfo& device_info(int ordinal);

// Throws kiln::Error naming the call, the driver's error name and message, when r != success.
void check(CUresult r, const char* call);
// The driver's name and message of an error code ("CUDA_ERROR_OUT_OF_MEMORY: out of memory").
std::string error_text(CUresult r);

// Makes device `ordinal`'s primary context current on the calling thread.
void bind(int ordinal);
// The calling thread's stream on device `ordinal` (made on first use, or taken from the
// streams of threads that ended; binds the device). Streams are never destroyed (driver.cpp).
CUstream thread_stream(int ordinal);
void synchronize(int ordinal, CUstream s);

// Memory from the device's pool (see device_pool.h), released stream-ordered on the
// calling thread's stream.
void* allocate(int ordinal, std::size_t bytes, std::size_t* block_bytes);
void release(int ordinal, void* p, std::size_t block_bytes);
DevicePoolStats pool_stats(int ordinal);
// Bounds every device's pool (KILN_GPU_MEMORY_BYTES; 0: none). Process-wide.
void set_memory_limit(std::size_t bytes);
void trim_pools();

// Synchronous copies and fills on the calling thread's stream of `ordinal`.
void copy_to_device(int ordinal, void* dst, const void* src, std::size_t bytes);
void copy_to_host(int ordinal, void* dst, const void* src, std::size_t bytes);
void copy_on_device(int ordinal, void* dst, const void* src, std::size_t bytes);
void fill_bytes(int ordinal, void* dst, unsigned char value, std::size_t bytes);

}  // namespace kiln::core::cuda
