// The LLVM ORC tier: one LLJIT per process (created lazily), one ResourceTracker per
// compiled kernel, the optimisation pipeline built with the host's TargetMachine, dumps.
//
// Threads: IR generation and optimisation use a per-call LLVMContext and a per-thread
// TargetMachine, so they run in parallel; adding the module to the JIT and looking the
// symbol up (which runs machine code generation on the calling thread) is serialised by
// one mutex, because LLJIT's single-threaded compiler shares one TargetMachine.
#include "tiers/llvm/llvm_tier.h"

#include "tiers/llvm/codegen.h"
#include "tiers/test_hook.h"

#include "src/cpu/gemm.h"
#include "src/support/hash.h"
#include "src/support/log.h"

#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectTransformLayer.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Transforms/InstCombine/InstCombine.h>
#include <llvm/Transforms/Scalar/EarlyCSE.h>
#include <llvm/Transforms/Scalar/LICM.h>
#include <llvm/Transforms/Scalar/LoopPassManager.h>
#include <llvm/Transforms/Scalar/LoopRotation.h>
#include <llvm/Transforms/Scalar/SROA.h>
#include <llvm/Transforms/Scalar/SimplifyCFG.h>
#include <llvm/Transforms/Vectorize/LoopVectorize.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::tiers {
namespace {

namespace orc = llvm::orc;

std::atomic<int> g_fail_next{0};
std::atomic<std::uint64_t> g_kernel_counter{0};

std::string to_string(llvm::Error err) {
    std::string s;
    llvm::handleAllErrors(std::move(err), [&](const llvm::ErrorInfoBase& e) {
        if (!s.empty()) s += "; ";
        s += e.message();
    });
    return s;
}

// Size of the allocated sections (code and read-only data) of an object file.
std::size_t object_code_bytes(llvm::MemoryBufferRef obj) {
    auto file = llvm::object::ObjectFile::createObjectFile(obj);
    if (!file) {
        llvm::consumeError(file.takeError());
        return obj.getBufferSize();
    }
    std::size_t n = 0;
    for (const auto& s : (*file)->sections())
        if (s.isText() || s.isData() || s.isBSS()) n += s.getSize();
    return n;
}

// What compile() wants to know of the object file materialised on this thread: its code
// size, and a copy of it (the tier returns it so that the engine can persist it).
struct ObjectSink {
    std::size_t bytes = 0;
    std::string object;
};
thread_local ObjectSink* t_object_sink = nullptr;

// The process-wide JIT. Created once, never destroyed (kernels may outlive static objects).
struct Jit {
    std::unique_ptr<orc::LLJIT> lljit;
    std::optional<orc::JITTargetMachineBuilder> jtmb;
    llvm_tier::CodegenTarget target;
    std::string error;  // non-empty: the JIT could not be created
    std::mutex mu;      // add + lookup (code generation)
};

// LLVM takes these code generation settings only as its process-wide command-line options,
// set here once, each unless the process set it itself (README, "Tiers"):
// - `-disable-lsr`: no Loop Strength Reduction. On the conv and GEMM kernels it took about
//   40% of code generation time (median tier-2 compile of resnet18's groups 47 -> 35 ms on an
//   AMD EPYC Zen 4) and their speed did not change: their loops already step pointers by
//   constants.
// - `-post-RA-scheduler=false`: no instruction scheduling after register allocation. The
//   kernels' IR is emitted in the order their loads and FMAs should issue, and out-of-order
//   cores reorder the rest: without it and the machine scheduler, the passes of code
//   generation took 10-17% less time (resnet18 and bert-base, 256 bits) and resnet18,
//   mobilenet_v2, efficientnet_b0, the MLP and a stack of 768 x 768 linears ran at the same
//   speed within noise at 256 and 512 bits.
//   The machine scheduler (before register allocation) stays on: without it the 256-bit
//   GEMM tile's depth loop, unrolled by 4 (gemm.cpp, micro()), kept the next step's B
//   vectors beside the 12 accumulators, as instruction selection clusters neighbouring loads,
//   and spilled an accumulator to the stack on every step. With it, 1 thread, AMD EPYC Zen 3,
//   median of 4 interleaved runs: 1000 x 512 weights by a 512 x 676 input 13.2 -> 9.8 ms
//   (ONNX Runtime 9.7); squeezenet1_1's 38 tier-2 compiles 522-532 -> 515-534 ms in all.
void set_codegen_options() {
    struct Setting {
        const char *name, *value;
    };
    auto& opts = llvm::cl::getRegisteredOptions();
    for (const Setting& s : {Setting{"disable-lsr", "true"}, Setting{"post-RA-scheduler", "false"}}) {
        auto it = opts.find(s.name);
        if (it == opts.end() || it->second->getNumOccurrences() > 0) continue;
        // Position 1, as if from a command line: the post-RA scheduler reads a position of 0
        // as "not given" and asks the subtarget.
        (void)it->second->addOccurrence(1, s.name, s.value);
    }
}

Jit& jit() {
    static Jit* j = [] {
        auto* p = new Jit;
        llvm::InitializeNativeTarget();
        llvm::InitializeNativeTargetAsmPrinter();
        auto jtmb = orc::JITTargetMachineBuilder::detectHost();
        if (!jtmb) {
            p->error = to_string(jtmb.takeError());
            return p;
        }
        jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
        // The small code model (a JIT's default on x86-64 is the large one): constants are
        // read RIP-relative instead of through a 64-bit address in a register each, which
        // took the registers a long epilogue's loop needs (SiLU's constants were broadcast
        // anew in every iteration at 256 bits). The linker puts an object's code and
        // constants in one allocation and reaches Kiln's runtime functions through stubs.
        // efficientnet_b0's stem with SiLU, 1 thread, AMD EPYC Zen 4: -4% at 256 and 512 bits.
        jtmb->setCodeModel(llvm::CodeModel::Small);
        set_codegen_options();
        // KILN_CPU_ISA=avx2 on an AVX-512 host: the code keeps to AVX2 (every 512-bit
        // extension off, over what the CPU name implies).
        if (cpu::kernel_cpu_isa() != cpu::CpuIsa::avx512) {
            for (const auto& f : llvm::sys::getHostCPUFeatures()) {
                const llvm::StringRef name = f.first();
                if (f.second && (name.starts_with("avx512") || name.starts_with("avx10") || name.starts_with("amx") ||
                                 name == "evex512"))
                    jtmb->getFeatures().AddFeature(name, false);
            }
        }
        p->target.cpu = jtmb->getCPU();
        p->target.features = jtmb->getFeatures().getString();
        // (The features string keeps the host's "+avx512f" before a cap's "-avx512f".)
        p->target.prefer_512 = cpu::kernel_cpu_isa() == cpu::CpuIsa::avx512 &&
                               p->target.features.find("+avx512f") != std::string::npos;
        p->jtmb = *jtmb;
        auto lljit = orc::LLJITBuilder().setJITTargetMachineBuilder(*jtmb).create();
        if (!lljit) {
            p->error = to_string(lljit.takeError());
            return p;
        }
        p->lljit = std::move(*lljit);
        p->lljit->getObjTransformLayer().setTransform(
            [](std::unique_ptr<llvm::MemoryBuffer> obj) -> llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> {
                if (t_object_sink) {
                    t_object_sink->bytes = object_code_bytes(obj->getMemBufferRef());
                    t_object_sink->object.assign(obj->getBufferStart(), obj->getBufferSize());
                }
                return obj;
            });
        return p;
    }();
    return *j;
}

// LLVM's diagnostics (a forced-vectorisation hint it could not honour on a loop of one
// iteration, say) go to Kiln's log, warnings at debug level, remarks nowhere: LLVM's default
// handler prints them to stderr, which a service embedding Kiln does not expect.
void log_diagnostic(const llvm::DiagnosticInfo* di, void*) {
    const bool error = di->getSeverity() == llvm::DS_Error;
    // Remarks (instruction counts and the like) reach a custom handler unfiltered: dropped.
    if (di->getSeverity() == llvm::DS_Remark || (!error && !support::log().should_log(spdlog::level::debug))) return;
    std::string text;
    llvm::raw_string_ostream os(text);
    llvm::DiagnosticPrinterRawOStream printer(os);
    di->print(printer);
    os.flush();
    if (error) support::log().error("LLVM: {}", text);
    else support::log().debug("LLVM: {}", text);
}

// The optimisation TargetMachine of this thread (TargetMachines are not thread-safe).
llvm::TargetMachine* thread_target_machine(Jit& j, std::string& err) {
    thread_local std::unique_ptr<llvm::TargetMachine> tm;
    if (!tm) {
        auto made = orc::JITTargetMachineBuilder(*j.jtmb).createTargetMachine();
        if (!made) {
            err = to_string(made.takeError());
            return nullptr;
        }
        tm = std::move(*made);
    }
    return tm.get();
}

std::size_t instruction_count(const llvm::Module& m) {
    std::size_t n = 0;
    for (const llvm::Function& f : m) n += f.getInstructionCount();
    return n;
}

// A short pipeline: the module holds one function and nothing to inline, so most of the O2
// module pipeline is no-ops. Measured on the test kernels: this one 11.9 ms median compile,
// buildPerModuleDefaultPipeline(O2) 15.6 ms, with the same vectorised (zmm) loops.
//
// The loop vectoriser only where the kernel needs it (codegen.h's EmitResult): the blocked
// GEMM and conv code is emitted in vectors, epilogues included, and the vectoriser's
// analysis of its loops, which it left as they were, took a third of their compile
// (squeezenet1_1's kernels under KILN_CPU_ISA=avx2, AMD EPYC Zen 4).
void optimise(llvm::Module& m, llvm::TargetMachine* tm, bool loop_vectoriser) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = true;
    pto.SLPVectorization = true;
    pto.LoopUnrolling = true;
    llvm::PassBuilder pb(tm, pto);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::FunctionPassManager fpm;
    fpm.addPass(llvm::SROAPass(llvm::SROAOptions::ModifyCFG));
    fpm.addPass(llvm::EarlyCSEPass(/*UseMemorySSA=*/true));
    fpm.addPass(llvm::InstCombinePass());
    fpm.addPass(llvm::SimplifyCFGPass());
    {
        llvm::LoopPassManager lpm;
        lpm.addPass(llvm::LoopRotatePass());
        lpm.addPass(llvm::LICMPass(llvm::LICMOptions()));
        fpm.addPass(llvm::createFunctionToLoopPassAdaptor(std::move(lpm), /*UseMemorySSA=*/true));
    }
    if (loop_vectoriser) fpm.addPass(llvm::LoopVectorizePass());
    fpm.addPass(llvm::EarlyCSEPass());
    fpm.addPass(llvm::InstCombinePass());
    fpm.addPass(llvm::SimplifyCFGPass(llvm::SimplifyCFGOptions().convertSwitchRangeToICmp(true)));
    llvm::ModulePassManager mpm;
    mpm.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(fpm)));
    mpm.run(m, mam);
}

std::string file_stem(const std::string& name) {
    std::string s = name.empty() ? "kernel" : name;
    for (char& c : s)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) c = '_';
    return s;
}

// Writes <dir>/<kernel>.<hash>.ll and/or .s; failures to write are ignored (dumps are a
// debugging aid, never a reason to fail a compile).
void dump(const LlvmTierOptions& opt, const std::string& kernel_name, llvm::Module& m, llvm::TargetMachine* tm) {
    std::string ir;
    llvm::raw_string_ostream os(ir);
    m.print(os, nullptr);
    os.flush();
    const std::string base = opt.dump_dir + "/" + file_stem(kernel_name) + "." + support::hex64(support::Hasher().str(ir).digest());
    if (opt.dump_llvm) std::ofstream(base + ".ll") << ir;
    if (opt.dump_asm) {
        auto clone = llvm::CloneModule(m);  // code generation changes the module
        llvm::SmallString<0> text;
        llvm::raw_svector_ostream as(text);
        llvm::legacy::PassManager pm;
        if (!tm->addPassesToEmitFile(pm, as, nullptr, llvm::CodeGenFileType::AssemblyFile)) {
            pm.run(*clone);
            std::ofstream(base + ".s") << text.str().str();
        }
    }
}

// Each kernel lives in a JITDylib of its own (linked against the process's symbols, for
// libm and malloc), so kernels never clash by symbol name: an object file loaded from the
// persistent cache keeps the name it was compiled with, and the same kernel may be loaded
// again while an evicted copy is still running. Removing the JITDylib frees the code.
class LlvmKernel final : public HostKernel {
public:
    LlvmKernel(orc::JITDylib* jd, KernelFn fn, std::size_t bytes, bool reads_derived)
        : jd_(jd), fn_(fn), bytes_(bytes), reads_derived_(reads_derived) {}
    ~LlvmKernel() override { remove_dylib(jd_); }
    KernelFn entry() const override { return fn_; }
    std::size_t code_bytes() const override { return bytes_; }
    bool reads_derived() const override { return reads_derived_; }

    static void remove_dylib(orc::JITDylib* jd) {
        if (llvm::Error err = jit().lljit->getExecutionSession().removeJITDylib(*jd)) llvm::consumeError(std::move(err));
    }

private:
    orc::JITDylib* jd_;
    KernelFn fn_;
    std::size_t bytes_;
    bool reads_derived_;
};

// A fresh JITDylib for one kernel ("kiln.<n>"), with the run-time support of tier.h bound.
llvm::Expected<orc::JITDylib&> new_dylib(Jit& j) {
    auto jd = j.lljit->createJITDylib("kiln." + std::to_string(++g_kernel_counter));
    if (!jd) return jd;
    const auto flags = llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable;
    orc::SymbolMap runtime;
    runtime[j.lljit->mangleAndIntern(kScratchSymbol)] = {orc::ExecutorAddr::fromPtr(&kernel_scratch), flags};
    runtime[j.lljit->mangleAndIntern(kFailedSymbol)] = {orc::ExecutorAddr::fromPtr(&kernel_failed), flags};
    runtime[j.lljit->mangleAndIntern(llvm_tier::kRowsF32Symbol)] = {orc::ExecutorAddr::fromPtr(&llvm_tier::gemm_rows_f32), flags};
    runtime[j.lljit->mangleAndIntern(llvm_tier::kRowsF64Symbol)] = {orc::ExecutorAddr::fromPtr(&llvm_tier::gemm_rows_f64), flags};
    runtime[j.lljit->mangleAndIntern(llvm_tier::kDepthwiseF32Symbol)] = {orc::ExecutorAddr::fromPtr(&llvm_tier::depthwise_f32), flags};
    runtime[j.lljit->mangleAndIntern(llvm_tier::kDepthwiseF64Symbol)] = {orc::ExecutorAddr::fromPtr(&llvm_tier::depthwise_f64), flags};
    runtime[j.lljit->mangleAndIntern(llvm_tier::kConvNchwcF32Symbol)] = {orc::ExecutorAddr::fromPtr(&llvm_tier::conv_nchwc_f32), flags};
    runtime[j.lljit->mangleAndIntern(llvm_tier::kWinogradF32Symbol)] = {orc::ExecutorAddr::fromPtr(&llvm_tier::winograd_f32), flags};
    if (llvm::Error err = jd->define(orc::absoluteSymbols(std::move(runtime)))) {
        LlvmKernel::remove_dylib(&*jd);
        return err;
    }
    return jd;
}

// KILN_DUMP=perf: one line "<start> <size> <symbol>" (hex) per kernel, appended to
// /tmp/perf-<pid>.map, where Linux perf looks for the names of JIT code, so that `perf report`
// names the kernels instead of listing bare addresses. The size is the object's code and
// constants (its kernel is its one function). Written under the JIT's lock; a failure to
// write is ignored.
void add_to_perf_map(const void* code, std::size_t bytes, const std::string& symbol) {
    const std::string path = "/tmp/perf-" + std::to_string(::getpid()) + ".map";
    if (std::FILE* f = std::fopen(path.c_str(), "a")) {
        std::fprintf(f, "%" PRIxPTR " %zx %s\n", reinterpret_cast<std::uintptr_t>(code), bytes, symbol.c_str());
        std::fclose(f);
    }
}

// Looks `symbol` up in `jd` (materialising what was added to it) and wraps the code.
CompileResult finish(Jit& j, orc::JITDylib& jd, const std::string& symbol, ObjectSink& sink, bool reads_derived,
                     bool perf_map) {
    t_object_sink = &sink;
    auto addr = j.lljit->lookup(jd, symbol);
    t_object_sink = nullptr;
    if (!addr) {
        std::string msg = to_string(addr.takeError());
        LlvmKernel::remove_dylib(&jd);
        return {nullptr, Bailout::backend_error, msg, 0.0};
    }
    if (perf_map) add_to_perf_map(addr->toPtr<const void*>(), sink.bytes, symbol);
    auto k = std::make_shared<LlvmKernel>(&jd, addr->toPtr<KernelFn>(), sink.bytes, reads_derived);
    return {std::move(k), Bailout::none, {}, 0.0};
}

class LlvmTier final : public Tier {
public:
    explicit LlvmTier(LlvmTierOptions opt) : opt_(std::move(opt)) {}
    int level() const override { return 2; }
    std::string_view name() const override { return "llvm"; }

    std::string fingerprint() const override {
        std::string fp = "llvm " LLVM_VERSION_STRING ";" + llvm_host_description() + ";" + llvm_tier::gemm_settings() +
                         ";calls " + std::to_string(llvm_tier::kRuntimeCallsVersion);
        if (const auto op = corrupt_op_for_testing()) fp += ";corrupt " + std::string(kir::op_name(*op));  // tiers/test_hook.h
        return fp;
    }

    bool persists_code() const override { return true; }

    CompileResult load(std::string_view object, const std::string& symbol) override {
        const auto t0 = std::chrono::steady_clock::now();
        CompileResult r;
        try {
            r = load_impl(object, symbol);
        } catch (const std::exception& e) {
            r = CompileResult{nullptr, Bailout::backend_error, e.what(), 0.0};
        }
        r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        return r;
    }

    CompileResult compile(const kir::Kernel& kernel, const kir::Specialization& spec) override {
        const auto t0 = std::chrono::steady_clock::now();
        CompileResult r;
        try {
            r = compile_impl(kernel, spec);
        } catch (const llvm_tier::CodegenError& e) {
            r = CompileResult{nullptr, e.bailout, e.message, 0.0};
        } catch (const std::exception& e) {
            r = CompileResult{nullptr, Bailout::backend_error, e.what(), 0.0};
        }
        r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        return r;
    }

private:
    CompileResult compile_impl(const kir::Kernel& kernel, const kir::Specialization& spec) {
        for (int n = g_fail_next.load(); n > 0;)
            if (g_fail_next.compare_exchange_weak(n, n - 1))
                return {nullptr, Bailout::injected_failure, "set_llvm_fail_next_compiles", 0.0};
        Jit& j = jit();
        if (!j.lljit) return {nullptr, Bailout::unavailable, "LLVM JIT: " + j.error, 0.0};
        std::string err;
        llvm::TargetMachine* tm = thread_target_machine(j, err);
        if (!tm) return {nullptr, Bailout::unavailable, "LLVM target machine: " + err, 0.0};

        const std::string fn_name = "kiln_" + file_stem(kernel.name);
        auto ctx = std::make_unique<llvm::LLVMContext>();
        ctx->setDiagnosticHandlerCallBack(log_diagnostic, nullptr);
        auto mod = std::make_unique<llvm::Module>(fn_name, *ctx);
        mod->setDataLayout(tm->createDataLayout());
        mod->setTargetTriple(tm->getTargetTriple().str());
        using Clock = std::chrono::steady_clock;
        const auto ms_since = [](Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); };
        auto t = Clock::now();
        const llvm_tier::EmitResult emitted = llvm_tier::emit_kernel(kernel, spec, j.target, fn_name, *mod);  // throws CodegenError

        std::string verr;
        llvm::raw_string_ostream vos(verr);
        if (llvm::verifyModule(*mod, &vos)) return {nullptr, Bailout::backend_error, "invalid IR: " + vos.str(), 0.0};
        const double emit_ms = ms_since(t);
        const bool log_phases = support::log().should_log(spdlog::level::debug);  // (the sizes: only for the log)
        const std::size_t ir_before = log_phases ? instruction_count(*mod) : 0;
        t = Clock::now();
        optimise(*mod, tm, emitted.loop_vectoriser);
        const double opt_ms = ms_since(t);
        const std::size_t ir_after = log_phases ? instruction_count(*mod) : 0;
        if (opt_.dump_llvm || opt_.dump_asm) dump(opt_, kernel.name, *mod, tm);
        t = Clock::now();

        std::lock_guard<std::mutex> lock(j.mu);
        auto jd = new_dylib(j);
        if (!jd) return {nullptr, Bailout::backend_error, to_string(jd.takeError()), 0.0};
        if (llvm::Error e = j.lljit->addIRModule(*jd, orc::ThreadSafeModule(std::move(mod), std::move(ctx)))) {
            LlvmKernel::remove_dylib(&*jd);
            return {nullptr, Bailout::backend_error, to_string(std::move(e)), 0.0};
        }
        ObjectSink sink;
        CompileResult r = finish(j, *jd, fn_name, sink, emitted.reads_derived, opt_.dump_perf);
        if (r.kernel) {
            r.object = std::move(sink.object);
            r.symbol = fn_name;
        }
        // Where the compile went (KILN_LOG=debug): code generation (instruction selection,
        // register allocation, linking) is most of it.
        support::log().debug("llvm: {}: emit {:.2f} ms ({} IR instructions), optimise {:.2f} ms ({} left), code {:.2f} ms ({} bytes)",
                             kernel.name, emit_ms, ir_before, opt_ms, ir_after, ms_since(t), sink.bytes);
        return r;
    }

    CompileResult load_impl(std::string_view object, const std::string& symbol) {
        Jit& j = jit();
        if (!j.lljit) return {nullptr, Bailout::unavailable, "LLVM JIT: " + j.error, 0.0};
        // Parse before handing it to the linker: a malformed object is a normal failure here.
        auto buf = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(object.data(), object.size()), symbol);
        auto parsed = llvm::object::ObjectFile::createObjectFile(buf->getMemBufferRef());
        if (!parsed) return {nullptr, Bailout::backend_error, "not an object file: " + to_string(parsed.takeError()), 0.0};
        std::lock_guard<std::mutex> lock(j.mu);
        auto jd = new_dylib(j);
        if (!jd) return {nullptr, Bailout::backend_error, to_string(jd.takeError()), 0.0};
        if (llvm::Error e = j.lljit->addObjectFile(*jd, std::move(buf))) {
            LlvmKernel::remove_dylib(&*jd);
            return {nullptr, Bailout::backend_error, to_string(std::move(e)), 0.0};
        }
        ObjectSink sink;
        // Whether a persisted object reads derived buffers is not recorded: assume it does.
        return finish(j, *jd, symbol, sink, true, opt_.dump_perf);
    }

    LlvmTierOptions opt_;
};

}  // namespace

std::unique_ptr<Tier> make_llvm_tier(const LlvmTierOptions& options) { return std::make_unique<LlvmTier>(options); }

std::string llvm_host_description() {
    static const std::string text = [] {
        Jit& j = jit();
        std::string cpu = j.target.cpu.empty() ? llvm::sys::getHostCPUName().str() : j.target.cpu;
        std::vector<std::string> feats;
        for (const auto& f : llvm::sys::getHostCPUFeatures()) feats.push_back((f.second ? "+" : "-") + f.first().str());
        std::sort(feats.begin(), feats.end());
        std::string out = cpu + ";";
        for (std::size_t i = 0; i < feats.size(); ++i) out += (i ? "," : "") + feats[i];
        return out + ";isa=" + cpu::cpu_isa_name(cpu::kernel_cpu_isa());
    }();
    return text;
}

void set_llvm_fail_next_compiles(int n) { g_fail_next.store(n < 0 ? 0 : n); }

void set_llvm_blocked_gemm(bool on) { llvm_tier::set_blocked_gemm(on); }
void set_llvm_gemm_vector_bytes(int bytes) { llvm_tier::set_gemm_vector_bytes(bytes); }

}  // namespace kiln::tiers
