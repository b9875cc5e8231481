// Built only where hip/hip_runtime_api.h is installed (tests/CMakeLists.txt): checks that
// src/core/hip/hip_layout.h reads the architecture's name where the installed header's
// device-properties struct holds it, for the symbol that this header's
// hipGetDeviceProperties calls (ROCm 6 and later: hipGetDevicePropertiesR0600).
#include "src/core/hip/hip_layout.h"

#include <hip/hip_runtime_api.h>

#include <cstddef>

namespace hip = kiln::core::hip;

#if HIP_VERSION_MAJOR >= 6
static_assert(offsetof(hipDeviceProp_tR0600, gcnArchName) == hip::kArchNameOffsetR0600, "hip_layout.h: the ROCm 6 offset");
static_assert(sizeof(hipDeviceProp_tR0600) <= hip::kPropsBufferBytes, "hip_layout.h: the buffer holds the struct");
#else
static_assert(offsetof(hipDeviceProp_t, gcnArchName) == hip::kArchNameOffsetR0000, "hip_layout.h: the ROCm 5 offset");
static_assert(sizeof(hipDeviceProp_t) <= hip::kPropsBufferBytes, "hip_layout.h: the buffer holds the struct");
#endif
static_assert(sizeof(hipDeviceProp_t::gcnArchName) == hip::kArchNameBytes, "hip_layout.h: the name's size");
