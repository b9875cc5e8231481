#pragma once
// NVIDIA devices through the CUDA driver API, loaded at run time (libcuda.so.1, dlopen), as a
// GPU vendor (src/core/gpu/vendor.h): the vendor-neutral runtime (src/core/gpu/runtime.h)
// calls load() once per process. Nothing here needs the CUDA SDK at build time; a machine
// without the driver or a device gets a status that says why.
#include "src/core/gpu/vendor.h"

namespace kiln::core::cuda {

// Loads libcuda, initialises it and lists its devices (their primary contexts retained).
// Never throws: what is missing goes in the status.
gpu::Loaded load();

}  // namespace kiln::core::cuda
