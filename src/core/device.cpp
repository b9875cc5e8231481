// core/device.h for every device kind: the GPU kinds through the vendor-neutral runtime
// (src/core/gpu/runtime.h).
#include "src/core/device.h"

#include "src/core/gpu/runtime.h"
#include "src/support/check.h"

namespace kiln::core {

bool device_available(Device d, std::string* why) {
    if (d.kind == Device::Kind::cpu) return true;
    return gpu::available(d, why);
}

void require_device(Device d, const char* what) {
    std::string why;
    KILN_USER_CHECK(device_available(d, &why), what << ": device " << d.to_string() << " is not available: " << why);
}

void* device_allocate(Device d, std::size_t bytes, std::size_t* capacity) {
    require_device(d, "device memory");
    return gpu::allocate(d, bytes, capacity);
}
void device_release(Device d, void* p, std::size_t capacity) {
    if (d.kind != Device::Kind::cpu) gpu::release(d, p, capacity);
}
void copy_host_to_device(Device d, void* dst, const void* src, std::size_t bytes) {
    require_device(d, "copy to device");
    gpu::copy(d, gpu::CopyKind::host_to_device, dst, src, bytes);
}
void copy_device_to_host(Device d, void* dst, const void* src, std::size_t bytes) {
    require_device(d, "copy from device");
    gpu::copy(d, gpu::CopyKind::device_to_host, dst, src, bytes);
}
void copy_device_to_device(Device d, void* dst, const void* src, std::size_t bytes) {
    require_device(d, "copy on device");
    gpu::copy(d, gpu::CopyKind::device_to_device, dst, src, bytes);
}
void device_fill_bytes(Device d, void* dst, unsigned char value, std::size_t bytes) {
    require_device(d, "fill on device");
    gpu::fill_bytes(d, dst, value, bytes);
}

}  // namespace kiln::core
