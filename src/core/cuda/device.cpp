// core/device.h for every device kind: CUDA through src/core/cuda/driver.h; HIP reports
// what is missing.
#include "src/core/device.h"

#include "src/core/cuda/driver.h"
#include "src/support/check.h"
#include "src/support/dynlib.h"

namespace kiln::core {
namespace {

std::string hip_missing() {
    static const std::string why = [] {
        support::DynamicLibrary lib;
        std::string err;
        if (!lib.open({"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"}, &err))
            return "the HIP runtime (libamdhip64.so) is not installed: " + err;
        return std::string("HIP devices are not supported by this version of Kiln (HIP source is generated and "
                           "compile-checked, but not run)");
    }();
    return why;
}

}  // namespace

bool device_available(Device d, std::string* why) {
    switch (d.kind) {
    case Device::Kind::cpu: return true;
    case Device::Kind::cuda: {
        const auto& st = cuda::driver_status();
        if (!st.available) {
            if (why) *why = st.why;
            return false;
        }
        if (d.index < 0 || d.index >= st.device_count) {
            if (why) *why = "no such device (this machine has " + std::to_string(st.device_count) + " CUDA device(s))";
            return false;
        }
        return true;
    }
    case Device::Kind::hip:
        if (why) *why = hip_missing();
        return false;
    }
    return false;
}

void require_device(Device d, const char* what) {
    std::string why;
    KILN_USER_CHECK(device_available(d, &why), what << ": device " << d.to_string() << " is not available: " << why);
}

void* device_allocate(Device d, std::size_t bytes, std::size_t* capacity) {
    require_device(d, "device memory");
    return cuda::allocate(d.index, bytes, capacity);
}
void device_release(Device d, void* p, std::size_t capacity) {
    if (d.kind == Device::Kind::cuda) cuda::release(d.index, p, capacity);
}
void copy_host_to_device(Device d, void* dst, const void* src, std::size_t bytes) {
    require_device(d, "copy to device");
    cuda::copy_to_device(d.index, dst, src, bytes);
}
void copy_device_to_host(Device d, void* dst, const void* src, std::size_t bytes) {
    require_device(d, "copy from device");
    cuda::copy_to_host(d.index, dst, src, bytes);
}
void copy_device_to_device(Device d, void* dst, const void* src, std::size_t bytes) {
    require_device(d, "copy on device");
    cuda::copy_on_device(d.index, dst, src, bytes);
}
void device_fill_bytes(Device d, void* dst, unsigned char value, std::size_t bytes) {
    require_device(d, "fill on device");
    cuda::fill_bytes(d.index, dst, value, bytes);
}

}  // namespace kiln::core
