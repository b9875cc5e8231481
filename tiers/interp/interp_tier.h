#pragma once
// Tier 0 behind the tier interface (tiers/tier.h): the interpreter's "code" for a fusion group
// runs the group's graph nodes, one reference kernel each (interp.h), reading and defining the
// call's values through LaunchArgs::env. It takes every group (with or without kernel IR),
// never fails to "compile", and its code holds no machine code (code_bytes() == 0).
#include "tiers/tier.h"

#include <memory>

namespace kiln::interp {

// The process's interpreter tier (stateless, shared).
std::shared_ptr<tiers::Tier> interp_tier();

}  // namespace kiln::interp
