#pragma once
// Device memory for tensors whose device is not the CPU, whatever the backend: tensor.cpp
// calls these, and they dispatch to the vendor of the device's kind through the GPU runtime
// (src/core/gpu/runtime.h: the CUDA driver for cuda:N, the HIP runtime for hip:N).
// Copies and fills are synchronous. Errors: kiln::Error when the backend or the device is
// missing (saying what is missing), std::bad_alloc when the device is out of memory.
#include <kiln/dtype.h>

#include <cstddef>
#include <string>

namespace kiln::core {

// Whether tensors can live on `d` in this process; *why says what is missing when not.
bool device_available(Device d, std::string* why);
// Throws kiln::Error (naming `what` and the device) when device_available is false.
void require_device(Device d, const char* what);

void* device_allocate(Device d, std::size_t bytes, std::size_t* capacity);
void device_release(Device d, void* p, std::size_t capacity);
// dst and src: host or device addresses as the names say; `d` is the device side's device.
void copy_host_to_device(Device d, void* dst, const void* src, std::size_t bytes);
void copy_device_to_host(Device d, void* dst, const void* src, std::size_t bytes);
void copy_device_to_device(Device d, void* dst, const void* src, std::size_t bytes);
void device_fill_bytes(Device d, void* dst, unsigned char value, std::size_t bytes);

}  // namespace kiln::core
