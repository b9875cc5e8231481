#pragma once
// What one compile by a runtime compiler (NVRTC: nvrtc.h; HIPRTC: hiprtc.h) gives back.
#include <string>

namespace kiln::tiers::gpu {

struct RtcOutput {
    bool ok = false;
    std::string binary;  // NVRTC: the cubin (or PTX text when PTX was asked); HIPRTC: the code object
    std::string log;     // the compiler's log (warnings too)
    std::string error;   // when !ok: the reason and the log
    double ms = 0.0;
};

}  // namespace kiln::tiers::gpu
