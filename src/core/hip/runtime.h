#pragma once
// AMD devices through the HIP runtime, loaded at run time (libamdhip64.so, dlopen), as a GPU
// vendor (src/core/gpu/vendor.h): the vendor-neutral runtime (src/core/gpu/runtime.h) calls
// load() once per process. Nothing here needs ROCm at build time; a machine without the
// runtime or an AMD GPU gets a status that says why (hipErrorNoDevice on a machine with the
// runtime and no GPU).
#include "src/core/gpu/vendor.h"

namespace kiln::core::hip {

// Loads libamdhip64, initialises it and lists its devices with their architectures. Never
// throws: what is missing goes in the status.
gpu::Loaded load();

}  // namespace kiln::core::hip
