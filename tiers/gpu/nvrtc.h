#pragma once
// NVRTC, loaded at run time (libnvrtc.so.13, then .12): CUDA C source to a cubin for one
// architecture, or to PTX. Never throws: a missing library or a failed compile is a result
// with the reason (and NVRTC's log).
#include "tiers/gpu/rtc_output.h"

#include <string>
#include <vector>

namespace kiln::tiers::gpu {

struct NvrtcStatus {
    bool available = false;
    std::string why;       // when !available
    std::string library;   // the file that loaded
    int major = 0, minor = 0;
    std::vector<int> archs;  // nvrtcGetSupportedArchs: 80, 86, 90, ...
};
// Loads NVRTC once per process (thread-safe) and reports what it found.
const NvrtcStatus& nvrtc_status();

using NvrtcOutput = RtcOutput;
// Compiles `source` (named `name` in messages) for sm_<arch> (e.g. 90). ptx: emit PTX for
// compute_<arch> instead of a cubin. Options: FMA contraction on, fast math off, -default-device.
NvrtcOutput nvrtc_compile(const std::string& source, const std::string& name, int arch, bool ptx = false);

}  // namespace kiln::tiers::gpu
