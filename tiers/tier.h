#pragma once
// The interface between the engine (jit/) and a compiling tier. A tier turns a KIR kernel
// (for a given specialisation) into callable code, or declines with an enumerated reason.
#include "src/kir/kir.h"

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

using KernelFn = void (*)(void* const* buffers, const std::int64_t* params, std::int64_t begin, std::int64_t end);

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
    virtual KernelFn entry() const = 0;
    virtual std::size_t code_bytes() const = 0;
};

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

class Tier {
public:
    virtual ~Tier() = default;
    virtual int level() const = 0;               // 1 or 2
    virtual std::string_view name() const = 0;   // "llvm", "asmjit", ...
    // Thread-safe. Never throws for a kernel it cannot handle: returns a bailout.
    virtual CompileResult compile(const kir::Kernel& kernel, const kir::Specialization& spec) = 0;
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
