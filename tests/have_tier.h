#pragma once
// Whether this build and host have a compiling tier at `level` (1: asmjit, 2: LLVM): decided
// from the build and the host, never from whether calls reached it (a broken tier must fail
// the tests that use it, not skip them).
#if defined(KILN_HAVE_ASMJIT)
#include "tiers/asmjit/asmjit_tier.h"
#endif

namespace kiln::test {

inline bool have_tier(int level) {
#if defined(KILN_HAVE_ASMJIT)
    if (level == 1) return tiers::asmjit_available();
#endif
#if defined(KILN_HAVE_LLVM)
    if (level == 2) return true;
#endif
    (void)level;
    return false;
}

}  // namespace kiln::test
