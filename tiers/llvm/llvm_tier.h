#pragma once
// Tier 2 on the CPU: KIR -> LLVM IR -> optimised with the host's TargetMachine -> JIT'd with
// ORC (LLJIT). No LLVM type appears here; LLVM lives only in this directory's .cpp files.
//
// Kernels are elementwise and row-reduction loop nests (tiers/llvm/codegen.h says what is
// generated and how each op keeps the interpreter's semantics). Each compiled kernel owns
// its own ORC ResourceTracker: its machine code is removed when the last reference to the
// CompiledKernel goes.
#include "tiers/tier.h"

#include <memory>
#include <string>

namespace kiln::tiers {

struct LlvmTierOptions {
    bool dump_llvm = false;     // write <dump_dir>/<kernel>.<hash>.ll (optimised IR)
    bool dump_asm = false;      // write <dump_dir>/<kernel>.<hash>.s
    bool dump_perf = false;     // list each kernel in /tmp/perf-<pid>.map (Linux perf's map of JIT code)
    std::string dump_dir = ".";
};

// The LLVM ORC tier: level 2, name "llvm". Thread-safe (compiles share one LLJIT; code
// generation is serialised, IR generation and optimisation run in parallel).
std::unique_ptr<Tier> make_llvm_tier(const LlvmTierOptions& options = {});

// "<cpu name>;<sorted feature string>" of the host, as LLVM sees it: part of the key under
// which compiled code may be cached across processes.
std::string llvm_host_description();

// Test hook: the next n compiles (of any LLVM tier in the process) return
// Bailout::injected_failure without compiling.
void set_llvm_fail_next_compiles(int n);

// Matmul kernels (with a kir::MatmulHint) compile to the blocked GEMM of tiers/llvm/gemm.cpp
// (default), or, switched off, to their naive KIR loop nest (for tests and benchmarks).
// Affects compiles that start afterwards.
void set_llvm_blocked_gemm(bool on);
// Test hook: the GEMM micro-kernel's vector width in bytes (16: 4x(2x128-bit), 32: 6x(2x256),
// 64: 8x(2x512)) instead of the host's widest; 0 restores the default.
void set_llvm_gemm_vector_bytes(int bytes);

}  // namespace kiln::tiers
