#include "jit/tiering/tier_registry.h"

#if defined(KILN_HAVE_ASMJIT)
#include "tiers/asmjit/asmjit_tier.h"
#endif
#if defined(KILN_HAVE_LLVM)
#include "tiers/llvm/llvm_tier.h"
#endif

namespace kiln::jit {

std::shared_ptr<tiers::Tier> make_tier1(const EngineSettings& settings) {
    if (!settings.jit) return nullptr;
#if defined(KILN_HAVE_ASMJIT)
    if (!tiers::asmjit_available()) return nullptr;
    return tiers::make_asmjit_tier();
#else
    return nullptr;
#endif
}

std::shared_ptr<tiers::Tier> make_tier2(const EngineSettings& settings) {
    if (!settings.jit) return nullptr;
#if defined(KILN_HAVE_LLVM)
    tiers::LlvmTierOptions lo;
    lo.dump_llvm = settings.dump_llvm;
    lo.dump_asm = settings.dump_asm;
    lo.dump_perf = settings.dump_perf;
    lo.dump_dir = settings.dump_dir;
    return tiers::make_llvm_tier(lo);
#else
    return nullptr;
#endif
}

}  // namespace kiln::jit
