#pragma once
// The pipeline of one function, graph -> executable plan, in one function (lower_function):
//
//   verify     the graph IR holds its invariants (src/ir/verifier.h)
//   nchwc      chains of convolutions in the blocked channel layout, as KILN_NCHWC says
//              (src/passes/nchwc.h; the graph is verified again)
//   partition  fusion groups (src/passes/fuse.h)
//   lower      each group to kernel IR, and verify it (src/kir/lower.h); a group that does not
//              lower keeps the reason and runs on the interpreter; and tier 0's code for each
//              group (the interpreter behind the tier interface: tiers/interp/interp_tier.h)
//   schedule   the nodes the outputs need, execution steps, each value's last use
//   place      where each value lives during a call
//   dump       KILN_DUMP's graph, groups, kir, cuda and hip files
//
// Engine::load, the benchmarks and the tests get groups and kernels from here; nothing else
// wires partition and lowering. Every step is timed (Executable::steps) and logged at debug
// level. The executable is immutable once made, except what the groups publish and count
// while calls run (jit/exec/group_runtime.h).
#include "jit/exec/group_runtime.h"
#include "jit/exec/memory_plan.h"
#include "src/ir/ir.h"
#include "src/passes/fuse.h"
#include "src/passes/nchwc.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::jit {

// Where a value lives during a call (tiers/tier.h). Only the host exists today; the GPU tier
// adds devices, and the executor copies a value where a group's code and its inputs' places differ.
using Place = tiers::Place;

// What lower_function writes besides the executable (KILN_DUMP, KILN_DUMP_DIR).
struct PipelineSettings {
    // KILN_NCHWC: the blocked channel layout pass (src/passes/nchwc.h). Off by default here
    // (tests and benchmarks get the graph as built); Engine passes KILN_NCHWC's choice.
    passes::NchwcMode nchwc = passes::NchwcMode::off;
    // KILN_SAMPLE_RUNS: runs of blocked-layout conv groups image by image at batch > 1
    // (jit/exec/sample_runs.h), of groups whose largest activation is at least
    // image_run_min_bytes an image (0: every such group: KILN_SAMPLE_RUNS=1).
    bool sample_runs = true;
    std::int64_t image_run_min_bytes = limits::image_run_min_bytes;
    bool dump_graph = false;   // <name>.graph.txt: the graph IR
    bool dump_groups = false;  // <name>.groups.txt: the partition
    bool dump_kir = false;     // <name>.kir.txt: each group's kernel IR, or why it has none
    bool dump_cuda = false;    // <name>.<group>.cu: each group's CUDA C (tiers/gpu/gpu_source.h), GPU or not
    bool dump_hip = false;     // <name>.<group>.hip: the same in HIP
    std::string dump_dir = ".";
};

struct PipelineStep {
    std::string name;  // "verify", "partition", ...
    double ms = 0.0;
};

struct Executable {
    std::shared_ptr<const ir::Graph> graph;
    passes::Partition partition;
    // One per partition group, in execution order: its kernel IR (or why it has none) and the
    // code published for it.
    std::vector<std::shared_ptr<GroupRuntime>> groups;
    std::vector<std::size_t> order;       // the nodes the outputs depend on, in graph order
    std::vector<std::int32_t> arg_index;  // per node: its argument position for Op::input, else -1
    // Execution order: the step of each node (groups in order, nodes in group order; -1: not
    // in a group), and per value the last step that reads it (-1: none; INT32_MAX: a graph output).
    std::vector<std::int32_t> step_of;
    std::vector<std::int32_t> last_use;
    std::vector<Place> place;  // per value
    std::vector<PipelineStep> steps;
    bool sample_runs = true;  // PipelineSettings::sample_runs and image_run_min_bytes
    std::int64_t image_run_min_bytes = limits::image_run_min_bytes;
    // Arena blocks of the calls' intermediates (jit/exec/memory_plan.h), shared by concurrent calls.
    std::shared_ptr<ArenaPool> arenas = std::make_shared<ArenaPool>();
};

// Runs the pipeline above. Throws kiln::Error when the graph breaks an invariant (a graph
// from the tracer, the parser or the ONNX importer never does).
std::shared_ptr<const Executable> lower_function(std::shared_ptr<const ir::Graph> graph,
                                                 const PipelineSettings& settings = {});

}  // namespace kiln::jit
