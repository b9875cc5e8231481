#pragma once
// Creates the compiling tiers this build and these settings provide.
#include "jit/tiering/settings.h"
#include "tiers/tier.h"

#include <memory>

namespace kiln::jit {

// The baseline CPU tier (asmjit, tier 1: generic kernels compiled in microseconds), or null
// when built without asmjit, when settings.jit is false, or when the host cannot run its
// code (it needs x86-64 with AVX2 and FMA).
std::shared_ptr<tiers::Tier> make_tier1(const EngineSettings& settings);

// The optimising CPU tier (LLVM ORC), or null when built without LLVM or when settings.jit
// is false.
std::shared_ptr<tiers::Tier> make_tier2(const EngineSettings& settings);

}  // namespace kiln::jit
