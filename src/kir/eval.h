#pragma once
// A straightforward interpreter of KIR kernels: the test oracle of the lowering and the
// reference of every code generator (not a tier: it is slow, scalar and single-threaded).
//
// Requires: `k` passes kir::verify; `buffers` holds one pointer per k.buffers entry, to
// dense arrays of that buffer's dtype large enough for every index the kernel touches;
// `params` holds one value per k.params entry (the dims or symbol values named by k.param_sources).
// Ensures: runs k.body for each outer index in [begin, end), in order, with exactly the
// interpreter's op semantics (tiers/interp): f16/bf16 elements are loaded as f32 and
// stored from f32 (kiln::Half / kiln::BFloat16 rounding), integer arithmetic wraps,
// integer division by zero gives 0, max/min propagate NaN, casts follow core::convert.
// Tests: tests/test_kir.cpp.
#include "src/kir/kir.h"

#include <cstdint>

namespace kiln::kir {

void evaluate(const Kernel& k, void* const* buffers, const std::int64_t* params, std::int64_t begin, std::int64_t end);

}  // namespace kiln::kir
