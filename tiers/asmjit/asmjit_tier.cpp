// The asmjit tier: analysis (analyze.cpp), code generation into the process-wide runtime
// (codegen.cpp), and the Tier interface around them: timing, bailouts, code lifetime.
#include "tiers/asmjit/asmjit_tier.h"

#include "tiers/asmjit/analyze.h"
#include "tiers/asmjit/codegen.h"
#include "tiers/asmjit/matmul.h"

#include <atomic>
#include <chrono>
#include <exception>
#include <new>
#include <string>

namespace kiln::tiers {
namespace {

std::atomic<int> g_fail_next{0};
std::atomic<int> g_vector_bytes{-1};

class AsmjitKernel final : public HostKernel {
public:
    explicit AsmjitKernel(asmjit_tier::JitCode code) : code_(code) {}
    ~AsmjitKernel() override { asmjit_tier::release(code_); }
    AsmjitKernel(const AsmjitKernel&) = delete;
    AsmjitKernel& operator=(const AsmjitKernel&) = delete;
    KernelFn entry() const override { return code_.fn; }
    std::size_t code_bytes() const override { return code_.bytes; }

private:
    asmjit_tier::JitCode code_;
};

// A matmul or conv kernel (matmul.h): the forwarder that is its entry, the epilogue's code
// and the plan that ties them to the GEMM driver.
class AsmjitMatmulKernel final : public HostKernel {
public:
    AsmjitMatmulKernel(asmjit_tier::JitCode epilogue, asmjit_tier::MatmulPlanPtr plan, asmjit_tier::JitCode entry)
        : epilogue_(epilogue), plan_(std::move(plan)), entry_(entry) {}
    ~AsmjitMatmulKernel() override {
        asmjit_tier::release(entry_);
        asmjit_tier::release(epilogue_);
    }
    AsmjitMatmulKernel(const AsmjitMatmulKernel&) = delete;
    AsmjitMatmulKernel& operator=(const AsmjitMatmulKernel&) = delete;
    KernelFn entry() const override { return entry_.fn; }
    std::size_t code_bytes() const override { return entry_.bytes + epilogue_.bytes; }

private:
    asmjit_tier::JitCode epilogue_;
    asmjit_tier::MatmulPlanPtr plan_;
    asmjit_tier::JitCode entry_;
};

// Releases generated code unless handed over.
struct CodeGuard {
    asmjit_tier::JitCode code;
    ~CodeGuard() { asmjit_tier::release(code); }
    asmjit_tier::JitCode take() {
        asmjit_tier::JitCode c = code;
        code = {};
        return c;
    }
};

// The vector width compiles use now: the host's widest unless a hook narrowed it.
int vector_bytes() {
    const asmjit_tier::HostIsa isa = asmjit_tier::host_isa();
    const int host = isa.avx512 ? 64 : 32;
    const int forced = g_vector_bytes.load();
    if (forced < 0) return host;
    if (forced == 0) return 0;
    return forced >= 64 ? host : 32;
}

class AsmjitTier final : public Tier {
public:
    int level() const override { return 1; }
    std::string_view name() const override { return "asmjit"; }
    // In-process only (the tier does not persist code): what the generated code depends on
    // besides the kernel is the vector width in use.
    std::string fingerprint() const override { return "asmjit;vector_bytes=" + std::to_string(vector_bytes()); }

    CompileResult compile(const kir::Kernel& kernel, const kir::Specialization&) override {
        const auto t0 = std::chrono::steady_clock::now();
        CompileResult r;
        try {
            r = compile_impl(kernel);
        } catch (const asmjit_tier::Unsupported& u) {
            r = CompileResult{nullptr, u.bailout, u.message, 0.0};
        } catch (const std::bad_alloc&) {
            r = CompileResult{nullptr, Bailout::backend_error, "out of memory", 0.0};
        } catch (const std::exception& e) {
            r = CompileResult{nullptr, Bailout::backend_error, e.what(), 0.0};
        }
        r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        return r;
    }

private:
    static CompileResult compile_impl(const kir::Kernel& kernel) {
        for (int n = g_fail_next.load(); n > 0;)
            if (g_fail_next.compare_exchange_weak(n, n - 1))
                return {nullptr, Bailout::injected_failure, "set_asmjit_fail_next_compiles", 0.0};
        if (!asmjit_tier::host_isa().usable)
            return {nullptr, Bailout::unavailable, "tier 1 needs an x86-64 host with AVX2 and FMA", 0.0};
        // A blocked-layout convolution with its hint runs src/cpu's kernel on the interpreter
        // (tiers/interp/conv_nchwc.cpp) and in tier 2; its plain loop nest here would be slower.
        if (kernel.nchwc)
            return {nullptr, Bailout::unsupported_op, "conv2d_nchwc runs src/cpu's blocked-layout kernel (interpreter, tier 2)", 0.0};
        const int vb = vector_bytes();
        if (kernel.matmul) return compile_matmul(kernel, vb);
        const asmjit_tier::Analysis a = asmjit_tier::analyze(kernel, vb > 0);  // throws Unsupported
        auto k = std::make_shared<AsmjitKernel>(asmjit_tier::generate(kernel, a, vb));
        return {std::move(k), Bailout::none, {}, 0.0};
    }

    static CompileResult compile_matmul(const kir::Kernel& kernel, int vb) {
        if (std::string why = asmjit_tier::matmul_unsupported(kernel); !why.empty())
            return {nullptr, Bailout::unsupported_dtype, why, 0.0};
        const kir::Kernel epi = asmjit_tier::epilogue_kernel(kernel);
        const asmjit_tier::Analysis a = asmjit_tier::analyze(epi, vb > 0);  // throws Unsupported
        CodeGuard epilogue{asmjit_tier::generate(epi, a, vb)};
        asmjit_tier::MatmulPlanPtr plan = asmjit_tier::make_matmul_plan(kernel, epilogue.code.fn, vb);
        auto target = [](const void* ctx, void* const* buffers, const std::int64_t* params, std::int64_t begin,
                         std::int64_t end) {
            asmjit_tier::run_matmul(static_cast<const asmjit_tier::MatmulPlan*>(ctx), buffers, params, begin, end);
        };
        CodeGuard entry{asmjit_tier::generate_forwarder(plan.get(), target)};
        auto k = std::make_shared<AsmjitMatmulKernel>(epilogue.take(), std::move(plan), entry.take());
        return {std::move(k), Bailout::none, {}, 0.0};
    }
};

}  // namespace

std::shared_ptr<Tier> make_asmjit_tier() { return std::make_shared<AsmjitTier>(); }

bool asmjit_available() { return asmjit_tier::host_isa().usable; }

AsmjitCodeStats asmjit_code_stats() { return {asmjit_tier::live_kernels(), asmjit_tier::live_code_bytes()}; }

void set_asmjit_fail_next_compiles(int n) { g_fail_next.store(n < 0 ? 0 : n); }

void set_asmjit_vector_bytes(int bytes) { g_vector_bytes.store(bytes); }

AsmjitLoopReport asmjit_loop_report(const kir::Kernel& kernel) {
    AsmjitLoopReport r;
    try {
        // A matmul kernel's loops are those of its epilogue (matmul.h).
        const asmjit_tier::Analysis a = kernel.matmul && asmjit_tier::matmul_unsupported(kernel).empty()
                                            ? asmjit_tier::analyze(asmjit_tier::epilogue_kernel(kernel), vector_bytes() > 0)
                                            : asmjit_tier::analyze(kernel, vector_bytes() > 0);
        auto add = [&](const asmjit_tier::LoopPlan& p) {
            (p.vector ? r.vector_loops : r.scalar_loops) += 1;
            if (!p.vector && p.why_scalar != "not an innermost loop" && p.why_scalar != "the body has loops") {
                if (!r.why_scalar.empty()) r.why_scalar += "; ";
                r.why_scalar += p.why_scalar;
            }
        };
        add(a.outer);
        for (const auto& [stmt, plan] : a.loops) add(plan);
    } catch (const asmjit_tier::Unsupported& u) {
        r.vector_loops = -1;
        r.why_scalar = u.message;
    } catch (const std::exception& e) {
        r.vector_loops = -1;
        r.why_scalar = e.what();
    }
    return r;
}

}  // namespace kiln::tiers
