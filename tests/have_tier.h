#pragma once
// Whether this build and host have a compiling tier at `level` (1: asmjit, 2: LLVM): decided
// from the build and the host, never from whether calls reached it (a broken tier must fail
// the tests that use it, not skip them).
#if defined(KILN_HAVE_ASMJIT)
#include "tiers/asmjit/asmjit_tier.h"
#endif

#include "skip.h"

#include <source_location>

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

// Why tier `level` is missing from this build or host (for skip messages).
inline const char* missing_tier_reason(int level) {
    if (level == 1) {
#if defined(KILN_HAVE_ASMJIT)
        return "this host has no tier 1 (asmjit needs x86-64 with AVX2 and FMA)";
#else
        return "this build has no tier 1 (configure with -DKILN_WITH_ASMJIT=ON and libasmjit-dev installed)";
#endif
    }
    return "this build has no tier 2 (configure with -DKILN_WITH_LLVM=ON and llvm-19-dev installed)";
}

// True, after skip() with the reason, when this build or host lacks tier `level`:
// `if (test::lacks_tier(2)) return;` (or `continue;` to skip one part of a case).
inline bool lacks_tier(int level, std::source_location where = std::source_location::current()) {
    if (have_tier(level)) return false;
    skip(missing_tier_reason(level), where);
    return true;
}

}  // namespace kiln::test
