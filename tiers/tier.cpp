#include "tiers/tier.h"

#include "src/core/strided.h"

#include "tiers/test_hook.h"

#include <atomic>
#include <new>
#include <cstdlib>
#include <memory>

namespace kiln::tiers {
namespace {
struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
};
struct Scratch {
    std::unique_ptr<void, FreeDeleter> p;
    std::int64_t bytes = 0;
};
thread_local Scratch t_scratch;
thread_local bool t_failed = false;
std::atomic<std::int64_t> g_scratch_limit{-1};
std::atomic<int> g_corrupt_op{-1};  // a kir::BinaryOp, or -1

struct Info {
    std::string_view name, text;
};
constexpr Info kBailouts[] = {
#define X(id, text) {#id, text},
    KILN_BAILOUTS(X)
#undef X
};
}  // namespace

std::string_view bailout_name(Bailout b) { return kBailouts[static_cast<int>(b)].name; }
std::string_view bailout_text(Bailout b) { return kBailouts[static_cast<int>(b)].text; }

void* kernel_scratch(std::int64_t bytes) noexcept {
    if (const std::int64_t limit = g_scratch_limit.load(std::memory_order_relaxed); limit >= 0 && bytes > limit) return nullptr;
    if (bytes <= t_scratch.bytes) return t_scratch.p.get();
    if (bytes < 0 || bytes > (std::int64_t{1} << 40)) return nullptr;
    const auto size = (static_cast<std::size_t>(bytes) + 63) / 64 * 64;  // aligned_alloc wants a multiple
    t_scratch.p.reset();  // the old contents need not survive
    t_scratch.bytes = 0;
    void* p = std::aligned_alloc(64, size);
    if (!p) return nullptr;
    t_scratch.p.reset(p);
    t_scratch.bytes = static_cast<std::int64_t>(size);
    return p;
}

void kernel_failed() noexcept { t_failed = true; }

void set_kernel_scratch_limit(std::int64_t bytes) noexcept { g_scratch_limit.store(bytes, std::memory_order_relaxed); }

void set_corrupt_op_for_testing(std::optional<kir::BinaryOp> op) noexcept {
    g_corrupt_op.store(op ? static_cast<int>(*op) : -1, std::memory_order_relaxed);
}

std::optional<kir::BinaryOp> corrupt_op_for_testing() noexcept {
    const int op = g_corrupt_op.load(std::memory_order_relaxed);
    if (op < 0) return std::nullopt;
    return static_cast<kir::BinaryOp>(op);
}

bool take_kernel_failure() noexcept {
    if (!t_failed) return false;
    t_failed = false;
    return true;
}

void HostKernel::launch(const LaunchArgs& a) const {
    if (a.extent <= 0) return;
    // The closure holds one pointer, so std::function keeps it inline (no allocation).
    struct Run {
        KernelFn fn;
        const LaunchArgs& a;
    } run{entry(), a};
    core::parallel_range(a.extent, a.work_per_outer, [&run](std::int64_t b, std::int64_t e) {
        run.fn(run.a.buffers, run.a.params, run.a.begin + b, run.a.begin + e);
        if (run.a.may_fail && take_kernel_failure()) throw std::bad_alloc();
    });
}

KernelFn host_entry(const CompiledKernel& k) {
    const auto* h = dynamic_cast<const HostKernel*>(&k);
    return h ? h->entry() : nullptr;
}

CompileResult Tier::compile_group(const GroupSource& source, const kir::Specialization& spec) {
    if (source.kernel) return compile(*source.kernel, spec);
    CompileResult r;
    r.bailout = Bailout::unsupported_op;
    r.detail = "the group has no kernel IR";
    return r;
}

}  // namespace kiln::tiers
