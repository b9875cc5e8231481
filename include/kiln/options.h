#pragma once
// kiln::Options: every tunable of Kiln as a plain field named after its environment
// variable (README, "Environment variables"). A default-constructed Options holds the
// documented defaults; Options::from_env() overlays the environment once.
#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct Options {
    bool jit = true;                         // KILN_JIT: 0 = interpreter only
    std::int64_t tier1_threshold = 2;        // KILN_TIER1_THRESHOLD: the most interpreted calls of a group before tier 1
    std::int64_t tier2_threshold = 8;        // KILN_TIER2_THRESHOLD: the most calls of a group below tier 2 before tier 2
    // KILN_TIERUP: `time`: a group compiles when the time it is expected to save pays for
    // the compile, or at the thresholds above, whichever comes first; `count`: at the
    // thresholds only (deterministic: for tests and reproductions).
    std::string tierup = "time";
    std::int64_t max_specializations = 8;    // KILN_MAX_SPECIALIZATIONS: per function
    bool async_compile = true;               // KILN_ASYNC_COMPILE: 0 = compile on the calling thread
    std::int64_t compile_threads = 1;        // KILN_COMPILE_THREADS
    std::string device = "auto";             // KILN_DEVICE: auto, cpu, cuda, hip
    // KILN_NCHWC: chains of convolutions in the blocked channel layout (NCHWc, 16 channels a
    // block), converted at the chains' edges: `auto` where it pays (src/passes/nchwc.h), `1`
    // every chain, `0` never (as loaded: NCHW).
    std::string nchwc = "auto";
    // KILN_SAMPLE_RUNS: at batch > 1, runs of consecutive blocked-layout conv groups one image
    // at a time, each image's intermediates kept in cache (jit/exec/sample_runs.h): `auto`
    // where the batch's values would leave the cache, `1` every such run, `0` never.
    std::string sample_runs = "auto";
    std::int64_t num_threads = 0;            // KILN_NUM_THREADS: 0 = all cores
    std::string cache_dir;                   // KILN_CACHE_DIR: empty = no persistent cache
    std::int64_t code_cache_bytes = 256 << 20;  // KILN_CODE_CACHE_BYTES: LRU bound on compiled code; 0 = none
    // KILN_GPU_MEMORY_BYTES: bound on the device memory each GPU's caching allocator holds
    // (in use + cached); 0 = none. Process-wide: an engine made with a bound sets it.
    std::int64_t gpu_memory_bytes = 0;
    std::string log_level = "warn";          // KILN_LOG: off, error, warn, info, debug, trace
    std::vector<std::string> dump;           // KILN_DUMP: graph, groups, kir, llvm, asm, perf, cuda, hip
    std::string dump_dir = ".";              // KILN_DUMP_DIR
    std::string trace_file;                  // KILN_TRACE: Chrome-trace JSON path
    // KILN_CPU_ISA (auto, avx2, avx512) caps the instruction set of every CPU kernel: it is
    // process-wide, read once from the environment when the first kernel runs, so it is not
    // a field here (see cpu_isa()); from_env() rejects a malformed value.

    // Reads the KILN_* variables over the defaults; throws kiln::Error naming the variable,
    // the value and what is accepted when a value is malformed.
    static Options from_env();
    // Checks every field (the same rules as from_env); throws kiln::Error.
    void validate() const;
    bool dumps(const std::string& what) const;  // is `what` listed in dump?
    std::string to_string() const;              // "jit=1 tier1_threshold=2 ..."
};

// The instruction set the CPU kernels of every tier use in this process: "avx512", "avx2" or
// "portable" (the host's best, capped by KILN_CPU_ISA).
const char* cpu_isa();

}  // namespace kiln
