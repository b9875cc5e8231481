// KILN_CPU_ISA: the cap on the instruction set of every tier's CPU code. The value is read
// once per process, so a ctest entry (isa_avx2, tests/CMakeLists.txt) runs these cases and
// the kernel tests again in a process started with KILN_CPU_ISA=avx2.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "differential.h"
#include "src/cpu/gemm.h"
#include "skip.h"

#if defined(KILN_HAVE_ASMJIT)
#include "tiers/asmjit/codegen.h"
#endif
#if defined(KILN_HAVE_LLVM)
#include "tiers/llvm/llvm_tier.h"
#endif

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using kiln::cpu::CpuIsa;

TEST_CASE("cpu isa: KILN_CPU_ISA values") {
    CHECK(kiln::cpu::parse_cpu_isa_cap("") == CpuIsa::avx512);
    CHECK(kiln::cpu::parse_cpu_isa_cap("auto") == CpuIsa::avx512);
    CHECK(kiln::cpu::parse_cpu_isa_cap("avx512") == CpuIsa::avx512);
    CHECK(kiln::cpu::parse_cpu_isa_cap("avx2") == CpuIsa::avx2);
    for (const char* bad : {"AVX2", "sse4", "avx", "avx2 ", "portable"}) {
        INFO(bad);
        CHECK_FALSE(kiln::cpu::parse_cpu_isa_cap(bad).has_value());
    }
}

TEST_CASE("cpu isa: a malformed KILN_CPU_ISA is an error naming it") {
    const char* old = std::getenv("KILN_CPU_ISA");
    const std::string saved = old ? old : "";
    ::setenv("KILN_CPU_ISA", "avx3", 1);
    std::string msg;
    try {
        (void)kiln::Options::from_env();
    } catch (const kiln::Error& e) {
        msg = e.what();
    }
    if (old) ::setenv("KILN_CPU_ISA", saved.c_str(), 1);
    else ::unsetenv("KILN_CPU_ISA");
    CHECK(msg.find("KILN_CPU_ISA='avx3'") != std::string::npos);
    CHECK(msg.find("auto, avx2 or avx512") != std::string::npos);
}

TEST_CASE("cpu isa: every tier follows the cap this process started with") {
    const char* env = std::getenv("KILN_CPU_ISA");
    const CpuIsa cap = kiln::cpu::parse_cpu_isa_cap(env ? env : "").value_or(CpuIsa::avx512);
    const CpuIsa want = kiln::cpu::cap_cpu_isa(cap);
    INFO("KILN_CPU_ISA=", env ? env : "(unset)", ", host ", kiln::cpu::cpu_isa_name(kiln::cpu::host_cpu_isa()));
    CHECK(kiln::cpu::kernel_cpu_isa() == want);
    CHECK(std::string(kiln::cpu_isa()) == kiln::cpu::cpu_isa_name(want));
#if defined(KILN_HAVE_ASMJIT)
    CHECK(kiln::tiers::asmjit_tier::host_isa().avx512 == (want == CpuIsa::avx512));
#endif
#if defined(KILN_HAVE_LLVM)
    const std::string host = kiln::tiers::llvm_host_description();
    INFO(host);
    CHECK(host.ends_with(std::string(";isa=") + kiln::cpu::cpu_isa_name(want)));
#endif
    if (cap == CpuIsa::avx512 && kiln::cpu::host_cpu_isa() == CpuIsa::avx512)
        MESSAGE("this process runs the AVX-512 kernels; the isa_avx2 test entry runs the AVX2 ones");
    if (cap == CpuIsa::avx2 && kiln::cpu::host_cpu_isa() != CpuIsa::avx512)
        kiln::test::skip("KILN_CPU_ISA=avx2 caps nothing on this host (it has no AVX-512)");
}

#if defined(KILN_HAVE_LLVM)
TEST_CASE("cpu isa: tier 2's GEMM vectors are as wide as the cap allows") {
    // The width of the GEMM's vectors once followed the host's features string, which keeps
    // "+avx512f" beside a cap's "-avx512f": 512-bit tiles on 256-bit registers.
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("kiln_isa_dump_" + std::to_string(::getpid()));
    kiln::Options o = kiln::test::diff::forced_tier_options(2);
    o.dump = {"llvm"};
    o.dump_dir = dir.string();
    const kiln::Tensor w = kiln::Tensor::randn({64, 64}, 1);
    const kiln::Graph g = kiln::trace("isa_mm", {kiln::arg("x", kiln::DType::f32, {16, 64})},
                                      [&](const std::vector<kiln::Var>& in) { return kiln::matmul(in[0], w); });
    kiln::Function f = kiln::Engine(o).load(g);
    f.warmup({{kiln::Shape{16, 64}}});
    REQUIRE(f.stats().groups.front().tier == 2);
    std::string ir;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".ll") {
            std::ifstream in(e.path());
            ir += std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        }
    fs::remove_all(dir);
    REQUIRE_FALSE(ir.empty());
    const bool wide = ir.find("<16 x float>") != std::string::npos;
    INFO("kernel isa ", kiln::cpu::cpu_isa_name(kiln::cpu::kernel_cpu_isa()));
    CHECK(wide == (kiln::cpu::kernel_cpu_isa() == CpuIsa::avx512));
}
#endif
