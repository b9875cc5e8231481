#pragma once
// Creates the compiling tiers this build and these options provide.
#include "tiers/tier.h"

#include <kiln/options.h>

#include <memory>

namespace kiln::jit {

// The optimising CPU tier (LLVM ORC), or null when built without LLVM or when options.jit
// is false.
std::shared_ptr<tiers::Tier> make_tier2(const Options& options);

}  // namespace kiln::jit
