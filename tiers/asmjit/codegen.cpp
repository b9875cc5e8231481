// The entry points of codegen.h: the process-wide asmjit runtime that holds generated code,
// generate() (one kernel through Gen, gen_p.h), release() and the host's ISA. The generator
// itself is split by concern: gen_p.h lists its files.
#include "tiers/asmjit/codegen.h"

#include "tiers/asmjit/gen_p.h"

#include "src/cpu/gemm.h"

#include <asmjit/x86.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace kiln::tiers::asmjit_tier {
namespace {

// Records the first error asmjit reports (emitters return errors; this also sees the ones
// of calls whose result is not checked one by one).
class ErrorSink final : public aj::ErrorHandler {
public:
    void handleError(aj::Error err, const char* message, aj::BaseEmitter*) override {
        if (error == aj::kErrorOk) {
            error = err;
            text = message ? message : aj::DebugUtils::errorAsString(err);
        }
    }
    aj::Error error = aj::kErrorOk;
    std::string text;
};

struct Runtime {
    aj::JitRuntime rt;
    std::mutex mu;  // add / release
    std::atomic<std::int64_t> kernels{0};
    std::atomic<std::size_t> bytes{0};
};

Runtime& runtime() {
    static Runtime* r = new Runtime;  // never destroyed: kernels may outlive static objects
    return *r;
}

}  // namespace

HostIsa host_isa() {
    static const HostIsa isa = [] {
        HostIsa h;
#if defined(__x86_64__) || defined(_M_X64)
        const auto& f = aj::CpuInfo::host().features().x86();
        h.usable = f.hasAVX2() && f.hasFMA();
        // KILN_CPU_ISA=avx2 keeps the code at 256 bits on an AVX-512 host.
        h.avx512 = h.usable && f.hasAVX512_F() && cpu::kernel_cpu_isa() == cpu::CpuIsa::avx512;
#endif
        return h;
    }();
    return isa;
}

namespace {

// Code emitted by `emit(code)` into a fresh CodeHolder, added to the runtime; asmjit's
// errors (reported to the holder's handler or returned) are backend errors.
template <class Emit> JitCode make_code(Emit&& emit) {
    Runtime& R = runtime();
    aj::CodeHolder code;
    ErrorSink sink;
    if (aj::Error e = code.init(R.rt.environment())) backend(std::string("asmjit: ") + aj::DebugUtils::errorAsString(e));
    code.setErrorHandler(&sink);
    emit(code, sink);
    if (sink.error) backend("asmjit: " + sink.text);
    JitCode out;
    out.bytes = code.codeSize();
    {
        std::lock_guard<std::mutex> lock(R.mu);
        if (aj::Error e = R.rt.add(&out.fn, &code)) backend(std::string("asmjit runtime: ") + aj::DebugUtils::errorAsString(e));
    }
    R.kernels.fetch_add(1);
    R.bytes.fetch_add(out.bytes);
    return out;
}

}  // namespace

JitCode generate_forwarder(const void* ctx, ForwardTarget target) {
    return make_code([&](aj::CodeHolder& code, ErrorSink&) {
        x86::Assembler a(&code);
        // System V: (buffers, params, begin, end) arrive in rdi, rsi, rdx, rcx and leave one
        // register to the right, with ctx in rdi.
        a.mov(x86::r8, x86::rcx);
        a.mov(x86::rcx, x86::rdx);
        a.mov(x86::rdx, x86::rsi);
        a.mov(x86::rsi, x86::rdi);
        a.mov(x86::rdi, aj::imm(reinterpret_cast<std::uintptr_t>(ctx)));
        a.mov(x86::rax, aj::imm(reinterpret_cast<std::uintptr_t>(target)));
        a.jmp(x86::rax);
    });
}

JitCode generate(const kir::Kernel& k, const Analysis& a, int vector_bytes) {
    return make_code([&](aj::CodeHolder& code, ErrorSink& sink) {
        x86::Compiler cc(&code);
        Gen(cc, k, a, vector_bytes).run();
        if (sink.error) backend("asmjit: " + sink.text);
        if (aj::Error e = cc.finalize()) backend(std::string("asmjit finalize: ") + aj::DebugUtils::errorAsString(e));
    });
}

void release(const JitCode& code) {
    if (!code.fn) return;
    Runtime& R = runtime();
    {
        std::lock_guard<std::mutex> lock(R.mu);
        R.rt.release(code.fn);
    }
    R.kernels.fetch_sub(1);
    R.bytes.fetch_sub(code.bytes);
}

std::int64_t live_kernels() { return runtime().kernels.load(); }
std::size_t live_code_bytes() { return runtime().bytes.load(); }

}  // namespace kiln::tiers::asmjit_tier
