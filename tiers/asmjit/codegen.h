#pragma once
// Internal to tiers/asmjit: KIR -> x86-64 machine code with asmjit's x86::Compiler, and the
// process-wide runtime that holds the code (codegen.cpp; the generator itself is the class
// of gen_p.h). No asmjit type appears here.
//
// Requires: a kernel that analyze() accepted, and its Analysis.
// Ensures: generate() returns callable code with the KernelFn signature that runs the body
// for each outer index in [begin, end) with the interpreter's semantics (asmjit_tier.h
// lists what is vectorised and how each type is computed), or throws Unsupported
// (backend_error) when asmjit reports an error; nothing is left in the runtime then.
#include "tiers/asmjit/analyze.h"

#include <cstddef>
#include <cstdint>

namespace kiln::tiers::asmjit_tier {

struct HostIsa {
    bool usable = false;  // x86-64 with AVX2 and FMA (what every generated kernel needs)
    bool avx512 = false;  // AVX-512F, and KILN_CPU_ISA allows it: zmm vector loops with mask registers
};
HostIsa host_isa();

struct JitCode {
    KernelFn fn = nullptr;
    std::size_t bytes = 0;
};

// `vector_bytes`: 64 (zmm), 32 (ymm) or 0 (no vector loops; the Analysis must agree).
JitCode generate(const kir::Kernel& k, const Analysis& a, int vector_bytes);

// Code with the KernelFn signature that calls target(ctx, buffers, params, begin, end): the
// entry of a kernel whose work is done by code compiled ahead of time (tier 1's matmul
// driver, matmul.h), with its plan as ctx. A tail jump: no frame of its own.
using ForwardTarget = void (*)(const void* ctx, void* const* buffers, const std::int64_t* params, std::int64_t begin,
                               std::int64_t end);
JitCode generate_forwarder(const void* ctx, ForwardTarget target);

// Frees code returned by generate() or generate_forwarder().
void release(const JitCode& code);

// Kernels and code bytes held by the runtime.
std::int64_t live_kernels();
std::size_t live_code_bytes();

}  // namespace kiln::tiers::asmjit_tier
