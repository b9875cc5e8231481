#pragma once
// The interface between the engine (jit/) and its tiers. A tier turns a fusion group (its
// kernel IR, for a given specialisation) into code, or declines with an enumerated reason:
// tier 0, the interpreter (tiers/interp/interp_tier.h), takes every group and runs its graph
// nodes on tensors; tiers 1 and 2 compile the kernel IR. All code runs through
// CompiledKernel::launch, which fits host code (a function called over index ranges on the
// host's threads: HostKernel), device code (launched on a queue with a launch configuration
// of its own) and the interpreter (which reads and defines the call's values through a
// ValueEnv).
#include "src/ir/ir.h"
#include "src/kir/kir.h"
#include "src/passes/fuse.h"

#include <kiln/tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace kiln::tiers {

// Why a tier did not produce code: normal, counted events (never a crash, never a wrong
// answer). The group stays on a lower tier.
#define KILN_BAILOUTS(X)                                                     \
    X(none, "compiled")                                                      \
    X(unsupported_op, "an op the tier does not generate code for")           \
    X(unsupported_dtype, "a dtype the tier does not generate code for")      \
    X(unsupported_shape, "a shape pattern the tier does not handle")         \
    X(backend_error, "the backend reported an error while compiling")        \
    X(injected_failure, "a failure injected by a test hook")                 \
    X(timeout, "the compile took longer than its budget")                    \
    X(unavailable, "the backend is not available in this build or process")

enum class Bailout : std::uint8_t {
#define X(id, text) id,
    KILN_BAILOUTS(X)
#undef X
};
inline constexpr std::size_t kNumBailouts = 0
#define X(id, text) +1
    KILN_BAILOUTS(X)
#undef X
    ;
std::string_view bailout_name(Bailout b);
std::string_view bailout_text(Bailout b);

// Where a kernel's code runs and its buffers must live: the host, or a GPU (the GPU tier,
// tiers/gpu/gpu_tier.h; the device, CUDA or HIP, is the kernel's own).
enum class Place : std::uint8_t { host, device };

// Host code: runs outer iterations [begin, end) of the kernel over these buffers (inputs,
// then outputs) and params.
using KernelFn = void (*)(void* const* buffers, const std::int64_t* params, std::int64_t begin, std::int64_t end);

// The values of one call, for code that runs on tensors (tier 0) rather than on buffers.
class ValueEnv {
public:
    virtual const ir::Node& node(ir::ValueId v) = 0;  // the node, its attributes concrete at this call's shapes
    virtual const Shape& shape(ir::ValueId v) = 0;    // the value's shape at this call
    // The operands of node `v` (inputs, constants or values computed before), in a vector the
    // env owns and reuses; valid until define().
    virtual const std::vector<Tensor>& operands(ir::ValueId v) = 0;
    // The value node `v` computed. The call then frees what `v` read for the last time.
    virtual void define(ir::ValueId v, Tensor t) = 0;

protected:
    ~ValueEnv() = default;
};

// One run of a kernel: the outer iterations [0, extent) over these buffers and params, or,
// for code that runs on tensors, the call's values.
struct LaunchArgs {
    void* const* buffers = nullptr;      // inputs, then outputs, in the kernel's order, at its place
    const std::int64_t* params = nullptr;
    std::int64_t extent = 0;             // outer iterations
    // Host code: the first outer iteration, so that the launch runs [begin, begin + extent)
    // (one image of a batch: jit/exec/sample_runs.h). Device code and tier 0 take 0 only.
    std::int64_t begin = 0;
    std::int64_t work_per_outer = 1;     // element operations in one (host code splits the range by it)
    bool may_fail = false;               // it takes kernel scratch (a GEMM): check kernel_failed()
    void* queue = nullptr;               // the device queue (stream) for device code; null on the host
    ValueEnv* env = nullptr;             // the call's values, for code that runs on tensors (tier 0)
};

// Run-time support that compiled code calls. A backend binds these functions to the
// symbols named here in the code it generates.
// kernel_scratch: a 64-byte-aligned buffer of at least `bytes` that belongs to the calling
// thread and is reused by its next kernel (a kernel never runs another, so one is enough);
// null when the memory cannot be had. A kernel that gets null calls kernel_failed() and
// returns without doing its work; the engine checks take_kernel_failure() on the same
// thread after every kernel call and raises std::bad_alloc (never a wrong answer).
inline constexpr const char* kScratchSymbol = "kiln_rt_kernel_scratch";
inline constexpr const char* kFailedSymbol = "kiln_rt_kernel_failed";
void* kernel_scratch(std::int64_t bytes) noexcept;
void kernel_failed() noexcept;
bool take_kernel_failure() noexcept;
// Test hook: kernel_scratch returns null for more than `bytes` (negative: no limit, the default).
void set_kernel_scratch_limit(std::int64_t bytes) noexcept;

// Compiled code. Kept alive (shared_ptr) by every plan and call that may run it; the
// backend frees the machine code when the last reference goes.
class CompiledKernel {
public:
    virtual ~CompiledKernel() = default;
    virtual Place place() const = 0;
    // Runs the kernel and returns when its outputs are written. Throws std::bad_alloc when
    // the kernel could not get its scratch memory (it then did no work: never a wrong answer).
    virtual void launch(const LaunchArgs& args) const = 0;
    virtual std::size_t code_bytes() const = 0;
    // Whether the code reads the kernel's derived buffers (kir::Derived, passed after its
    // outputs): the runtime makes them only for code that does.
    virtual bool reads_derived() const { return false; }
};

// Code for the host: one function called over index ranges; launch() splits [begin, begin +
// extent) by work_per_outer across the kernel threads (KILN_NUM_THREADS).
class HostKernel : public CompiledKernel {
public:
    virtual KernelFn entry() const = 0;
    Place place() const final { return Place::host; }
    void launch(const LaunchArgs& args) const final;
};

// The entry of host code; null for code that runs elsewhere.
KernelFn host_entry(const CompiledKernel& k);

struct CompileResult {
    std::shared_ptr<const CompiledKernel> kernel;  // null when bailout != none
    Bailout bailout = Bailout::none;
    std::string detail;                            // backend message, for logs
    double compile_ms = 0.0;
    // Tiers that can persist code (Tier::load) also return the relocatable object file of
    // the kernel and the symbol of its entry point; empty otherwise.
    std::string object;
    std::string symbol;
};

// What a tier makes code from: one fusion group of a graph and its kernel IR (null when the
// group has none: then only tier 0 takes it).
struct GroupSource {
    const ir::Graph& graph;
    const passes::Group& group;
    const kir::Kernel* kernel = nullptr;
};

class Tier {
public:
    virtual ~Tier() = default;
    virtual int level() const = 0;               // 0, 1 or 2
    virtual std::string_view name() const = 0;   // "interp", "asmjit", "llvm", ...
    // Thread-safe. Never throws for a kernel it cannot handle: returns a bailout.
    virtual CompileResult compile(const kir::Kernel& kernel, const kir::Specialization& spec) = 0;
    // Code for a group: by default compile() of its kernel IR (a group without kernel IR gets
    // unsupported_op); tier 0 takes every group. Thread-safe; never throws.
    virtual CompileResult compile_group(const GroupSource& source, const kir::Specialization& spec);
    // Everything besides the kernel and its specialisation that the code compile() returns
    // now depends on: backend version, target CPU and features, code generation settings.
    // Part of the key under which code is shared within a process and across processes.
    virtual std::string fingerprint() const = 0;
    // Whether compile() returns object files that load() accepts (then the engine persists
    // this tier's code in KILN_CACHE_DIR).
    virtual bool persists_code() const { return false; }
    // Loads code an earlier compile() returned as `object` (maybe in another process with
    // the same fingerprint). Tiers that cannot persist code return Bailout::unavailable.
    // Thread-safe; never throws.
    virtual CompileResult load(std::string_view object, const std::string& symbol) {
        (void)object;
        (void)symbol;
        CompileResult r;
        r.bailout = Bailout::unavailable;
        r.detail = "this tier does not load persisted code";
        return r;
    }
};

}  // namespace kiln::tiers
