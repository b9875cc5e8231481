#pragma once
// The settings an engine works with, made once from kiln::Options (jit/api/options.cpp):
// the JIT's tunables (jit/tiering/tunables.def) and what the engine builds from the rest.
#include "jit/exec/pipeline.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::jit {

struct Tunables {
#define KILN_TUNABLE(type, name, value, doc) type name = value;
#include "jit/tiering/tunables.def"
};

struct EngineSettings {
    bool jit = true;                   // false: no compiling tier (KILN_JIT=0)
    Tunables tunables;
    std::size_t compile_threads = 1;   // the compile queue's workers
    std::size_t code_cache_bytes = 0;  // the code cache's bound (0: none)
    std::string cache_dir;             // the persistent cache (empty: none)
    PipelineSettings pipeline;         // graph, groups and kir dumps at load
    bool dump_llvm = false, dump_asm = false;  // tier 2's optimised IR and assembly
    bool dump_perf = false;            // tier 2's kernels listed in the perf map
    std::string dump_dir = ".";
    std::string trace_file;            // KILN_TRACE (empty: none)
};

}  // namespace kiln::jit
