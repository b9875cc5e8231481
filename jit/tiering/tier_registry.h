#pragma once
// Creates the compiling tiers this build and these options provide.
#include "tiers/tier.h"

#include <kiln/options.h>

#include <memory>

namespace kiln::jit {

// The baseline CPU tier (asmjit, tier 1: generic kernels compiled in microseconds), or null
// when built without asmjit, when options.jit is false, or when the host cannot run its
// code (it needs x86-64 with AVX2 and FMA).
std::shared_ptr<tiers::Tier> make_tier1(const Options& options);

// The optimising CPU tier (LLVM ORC), or null when built without LLVM or when options.jit
// is false.
std::shared_ptr<tiers::Tier> make_tier2(const Options& options);

}  // namespace kiln::jit
