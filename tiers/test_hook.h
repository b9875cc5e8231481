#pragma once
// A test-only hook that makes tier 2 (LLVM) miscompile one kernel-IR binary op: while it names
// an op, the LLVM code generator adds 1 to the first operand of that op on floating types. It
// exists so that a test can prove the differential tests catch a wrong kernel
// (tests/test_differential_hook.cpp). Off (nullopt) by default. While it is set it is part of
// the LLVM tier's fingerprint, so miscompiled code never shares a cache key with good code.
#include "src/kir/kir.h"

#include <optional>

namespace kiln::tiers {

void set_corrupt_op_for_testing(std::optional<kir::BinaryOp> op) noexcept;
std::optional<kir::BinaryOp> corrupt_op_for_testing() noexcept;

}  // namespace kiln::tiers
