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
};

class Tier {
public:
    virtual ~Tier() = default;
    virtual int level() const = 0;               // 1 or 2
    virtual std::string_view name() const = 0;   // "llvm", "asmjit", ...
    // Thread-safe. Never throws for a kernel it cannot handle: returns a bailout.
    virtual CompileResult compile(const kir::Kernel& kernel, const kir::Specialization& spec) = 0;
};

}  // namespace kiln::tiers
