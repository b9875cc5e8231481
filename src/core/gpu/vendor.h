#pragma once
// What one GPU vendor's library does for Kiln, behind one interface: the CUDA driver API
// (src/core/cuda/driver.cpp) and the HIP runtime (src/core/hip/runtime.cpp) implement it;
// the vendor-neutral runtime (src/core/gpu/runtime.h) builds the per-thread streams, the
// caching allocators, copies and launches on it. Handles are opaque pointers.
//
// Errors: the calls that fail only when something is wrong throw kiln::Error naming the
// vendor's call and its error name and message; those whose failure is a normal event
// return it instead (try_malloc: null; launch: the error text).
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace kiln::core::gpu {

using Stream = void*;
using Module = void*;
using Function = void*;

struct Status {
    bool available = false;
    std::string why;         // when !available: the library, symbol or driver error that stopped it
    std::string library;     // the file that loaded
    int driver_version = 0;  // as the vendor reports it (CUDA: 13000; HIP: its runtime version)
    int device_count = 0;
};

struct DeviceInfo {
    int ordinal = 0;
    std::string name;
    std::string arch;                // the compilers' name for it: "sm_90", "gfx90a"
    int cc_major = 0, cc_minor = 0;  // NVIDIA's compute capability (9.0 for an H100); 0 on AMD
    int sm_count = 0;                // multiprocessors (NVIDIA) or compute units (AMD)
    int max_threads_per_block = 0;
    std::size_t total_memory = 0;
};

enum class CopyKind { host_to_device, device_to_host, device_to_device };

class Vendor {
public:
    virtual ~Vendor() = default;
    // Makes device `ordinal` current on the calling thread.
    virtual void bind(int ordinal) = 0;
    virtual Stream create_stream() = 0;  // a stream that does not wait for the default stream
    virtual void synchronize(Stream s) = 0;
    virtual void* try_malloc(std::size_t bytes) = 0;  // null when the device has no room
    virtual void free(void* p) = 0;                   // waits for the device, as the vendors' frees do
    virtual void copy(CopyKind kind, void* dst, const void* src, std::size_t bytes, Stream s) = 0;
    virtual void fill(void* dst, unsigned char value, std::size_t bytes, Stream s) = 0;
    // Loads a code object (cubin, PTX, AMD code object); finds a kernel of a loaded module.
    virtual Module load_module(const std::string& image) = 0;
    virtual Function get_function(Module m, const char* entry) = 0;
    virtual void unload_module(Module m) noexcept = 0;
    // Queues a 1-D launch; "" when queued, else the vendor's error text.
    virtual std::string launch(Function fn, unsigned grid, unsigned block, Stream s, void** params) = 0;
};

// What a vendor's loader returns: the status, the devices, and (when available) the calls.
struct Loaded {
    Status status;
    std::vector<DeviceInfo> devices;
    std::unique_ptr<Vendor> vendor;
};

}  // namespace kiln::core::gpu
