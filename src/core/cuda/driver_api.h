#pragma once
// The CUDA driver API as Kiln calls it: the types of cuda.h declared without the SDK (opaque
// handles, the enum values used) and a table of function pointers filled by dlsym from
// libcuda.so.1 (cuda_api.def). Only src/core/cuda/ and the GPU tier (tiers/gpu/) include it.
#include <cstddef>

namespace kiln::core::cuda {

#ifndef KILN_CUDA_API_TYPES_FROM_SDK
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
enum CUdevice_attribute : int {};
#endif

inline constexpr CUresult kSuccess = 0;
inline constexpr CUresult kErrorOutOfMemory = 2;
inline constexpr CUresult kErrorNotInitialized = 3;
inline constexpr unsigned kStreamNonBlocking = 1;
// CUdevice_attribute values.
inline constexpr int kAttrMaxThreadsPerBlock = 1;
inline constexpr int kAttrMultiprocessorCount = 16;
inline constexpr int kAttrComputeCapabilityMajor = 75;
inline constexpr int kAttrComputeCapabilityMinor = 76;

struct DriverApi {
#define KILN_CUDA_FN(name, args) CUresult(*name) args = nullptr;
#include "src/core/cuda/cuda_api.def"
#undef KILN_CUDA_FN
};

}  // namespace kiln::core::cuda
