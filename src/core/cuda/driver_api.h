#pragma once
// The CUDA driver API as Kiln calls it: the types of cuda.h declared without the SDK (opaque
// handles, the enum values used) and a table of function pointers filled by dlsym from
// libcuda.so.1 (cuda_api.def). Only src/core/cuda/driver.cpp includes it.
#include <cstddef>

namespace kiln::core::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
enum CUdevice_attribute : int {};

// The enumerators of cuda_api.def (CUDA_SUCCESS, CU_STREAM_NON_BLOCKING, ...).
#define KILN_API_CONST(name, value) inline constexpr int name = value;
#include "src/core/cuda/cuda_api.def"
inline constexpr CUresult kSuccess = CUDA_SUCCESS;

struct DriverApi {
#define KILN_API_FN(name, ret, params) ret(*name) params = nullptr;
#include "src/core/cuda/cuda_api.def"
};

}  // namespace kiln::core::cuda
