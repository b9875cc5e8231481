#pragma once
// Where the HIP runtime writes a device's architecture name ("gfx90a:sramecc+:xnack-") in
// the device-properties struct, by the symbol that fills it. No attribute query gives the
// name, and the struct's layout changed in ROCm 6, whose header maps hipGetDeviceProperties
// to a new symbol: ROCm 6 and later export hipGetDevicePropertiesR0600 (the new layout),
// ROCm 5 only hipGetDeviceProperties (the old one). Kiln resolves the versioned symbol when
// it is there and reads the name at that layout's offset, into a buffer larger than either
// struct. tests/hip_layout_check.cpp checks the offsets of the installed header's layout.
#include <cstddef>

namespace kiln::core::hip {

inline constexpr std::size_t kPropsBufferBytes = 4096;  // ROCm 5's struct: 792 bytes; ROCm 6's: 1472
inline constexpr std::size_t kArchNameBytes = 256;
inline constexpr std::size_t kArchNameOffsetR0000 = 396;   // hipGetDeviceProperties (ROCm 5)
inline constexpr std::size_t kArchNameOffsetR0600 = 1160;  // hipGetDevicePropertiesR0600 (ROCm 6+)

}  // namespace kiln::core::hip
