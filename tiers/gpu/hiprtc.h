#pragma once
// HIPRTC, loaded at run time (libhiprtc.so.6, or libamdhip64.so.5, which holds it in ROCm 5):
// HIP source to a code object for one AMD architecture (e.g. "gfx90a"). Never throws: a
// missing library, an architecture that the installed compiler does not know (HIPRTC would
// abort the process on it: it is checked first against comgr's list) or a failed compile is a
// result with the reason (and HIPRTC's log).
#include "tiers/gpu/rtc_output.h"

#include <string>
#include <vector>

namespace kiln::tiers::gpu {

struct HiprtcStatus {
    bool available = false;
    std::string why;      // when !available
    std::string library;  // the file that loaded
    int major = 0, minor = 0;
    std::vector<std::string> archs;  // from comgr's ISA names: "gfx90a", "gfx1030", ... (each once)
};
// Loads HIPRTC and comgr once per process (thread-safe) and reports what it found.
const HiprtcStatus& hiprtc_status();

using HiprtcOutput = RtcOutput;
// Compiles `source` (named `name` in messages) for --offload-arch=<arch>; FMA contraction
// on, fast math off. Thread-safe; compiles run one at a time (concurrent ones crash HIPRTC
// of ROCm 5.2).
HiprtcOutput hiprtc_compile(const std::string& source, const std::string& name, const std::string& arch);

}  // namespace kiln::tiers::gpu
