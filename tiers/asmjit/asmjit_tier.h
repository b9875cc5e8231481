#pragma once
// Tier 1 on the CPU: KIR -> x86-64 machine code with asmjit's x86::Compiler, in
// microseconds. No asmjit type appears here; asmjit lives only in this directory's .cpp files
// and the private headers they share (gen_p.h, lanes_p.h).
//
// The code is generic: every param is read from the params array at run time (a
// Specialization is accepted and ignored), so one kernel serves every shape. What is
// generated (tiers/asmjit/analyze.h decides, the generator of gen_p.h emits):
// - every statement and expression of the kernel, with the interpreter's semantics, as
//   scalar code: f32, f64, i8, u8, i32, i64, bool, index; f16/bf16 buffers load and store
//   through bit-exact conversions; f64 transcendental functions call the interpreter's
//   formulas (tiers/asmjit/callouts.h); f32 ones are inline polynomial sequences
//   (tiers/asmjit/vmath.h);
// - an innermost loop (or the outer loop of a kernel whose body has no loop) whose body is
//   straight-line f32 arithmetic over unit-stride and loop-invariant loads, unit-stride
//   stores, per-iteration temps and add/max/min accumulators runs 16 lanes at a time on
//   hosts with AVX-512 (8 with AVX2), with one masked iteration for the tail;
// - matmul and conv kernels (kir::MatmulHint, f32 and f64 operands) as a driver compiled
//   ahead of time around the host's vectorised GEMM (src/cpu/gemm.h) and the group's
//   epilogue as generated code over each finished tile (tiers/asmjit/matmul.h);
// - on a host without AVX2 and FMA, or for what the code generator does not handle
//   (f16/bf16 matmul operands, ops the interpreter does not define on a type), compile()
//   returns a Bailout (tiers/tier.h) with a message, never throws.
#include "tiers/tier.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kiln::tiers {

// The asmjit tier: level 1, name "asmjit". Thread-safe (compiles run in parallel; adding
// code to the process-wide runtime is serialised).
std::shared_ptr<Tier> make_asmjit_tier();

// Is this host able to run tier-1 code (x86-64 with AVX2 and FMA)?
bool asmjit_available();

// Machine code held by the tier's runtime right now, over all compiled kernels alive in
// the process (a CompiledKernel releases its code when its last reference goes).
struct AsmjitCodeStats {
    std::int64_t kernels = 0;
    std::size_t code_bytes = 0;
};
AsmjitCodeStats asmjit_code_stats();

// Test hook: the next n compiles (of any asmjit tier in the process) return
// Bailout::injected_failure without compiling.
void set_asmjit_fail_next_compiles(int n);

// Test and benchmark hook: the widest vectors compiles may use, in bytes: 64 (AVX-512,
// when the host has it), 32 (AVX2), or 0 (no vector loops: every loop scalar). A negative
// value restores the default (the host's widest). Affects compiles that start afterwards.
void set_asmjit_vector_bytes(int bytes);

// Test and benchmark hook: how the tier would compile `kernel` now: the number of its loops
// (the loop over outer indices included) that become vector loops, and the reasons the
// others stay scalar ("" when every loop vectorises); for a matmul kernel, the loops of its
// epilogue. Throws nothing; a kernel the tier
// bails out on gives -1 and the bailout's message.
struct AsmjitLoopReport {
    int vector_loops = 0;
    int scalar_loops = 0;
    std::string why_scalar;
};
AsmjitLoopReport asmjit_loop_report(const kir::Kernel& kernel);

}  // namespace kiln::tiers
