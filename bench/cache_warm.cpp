// cache_warm: what the persistent code cache (KILN_CACHE_DIR) saves a restarted process
// (issue 4). Each measurement runs in a fresh child process (this program re-executed), so
// nothing of the JIT is warm in memory:
//   none:  no cache directory;
//   cold:  an empty cache directory (the compiles also write it);
//   warm:  the directory the cold run filled.
// For each: (1) the time Function::warmup takes to bring every group of the model to tier 2
// for one shape; (2) on a second engine (its own cache subdirectory, so the cold run is cold
// for both), traffic with background compilation and KILN_TIER2_THRESHOLD=1: the latency of
// the first call and the time from the first call to the end of the first call that ran
// every compilable group on tier 2, with the compiles and cache loads it took.
//
//   usage: cache_warm      (prints one RESULT line per mode)
#include "bench_util.h"

#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace {

using kiln::Tensor;
using kiln::Var;
using kiln_bench::Clock;
using kiln_bench::ms_since;

// Uniform in [-scale, scale].
Tensor weight(const kiln::Shape& shape, std::uint64_t seed, double scale) {
    return Tensor::rand(shape, seed, kiln::DType::f32, -scale, scale);
}

// An MLP 784-1024-1024-10 with a layer_norm and a softmax: a handful of groups to compile
// (matmul epilogues, rows).
kiln::Graph model() {
    Tensor w1 = weight({784, 1024}, 1, 1.0 / 28), b1 = weight({1024}, 2, 0.02);
    Tensor w2 = weight({1024, 1024}, 3, 1.0 / 32), b2 = weight({1024}, 4, 0.02);
    Tensor w3 = weight({1024, 10}, 5, 1.0 / 32), b3 = weight({10}, 6, 0.02);
    Tensor g = Tensor::rand({1024}, 7, kiln::DType::f32, 0.5, 1.5), be = weight({1024}, 8, 0.1);
    return kiln::trace("mlp_cached", {kiln::arg("x", kiln::DType::f32, {kiln::dyn("batch"), 784})},
                       [&](const std::vector<Var>& in) {
                           Var h = kiln::gelu(kiln::matmul(in[0], w1) + b1, true);
                           h = kiln::layer_norm(h, g, be);
                           h = kiln::relu(kiln::matmul(h, w2) + b2);
                           return std::vector<Var>{kiln::softmax(kiln::matmul(h, w3) + b3, -1)};
                       });
}

bool all_tier2(const kiln::FunctionStats& s) {
    for (const auto& g : s.groups)
        if (g.note.empty() && g.tier < 2) return false;
    return true;
}

// One measurement in this process; prints one RESULT line.
int child(const std::string& mode, const std::string& dir) {
    kiln::Options o;
    o.cache_dir = dir.empty() ? dir : dir + "/warmup";
    const std::vector<Tensor> in{Tensor::randn({8, 784}, 9)};
    // 1. warmup(): compiles (or loads) every group for batch 8 and returns when done.
    double warmup_ms = 0;
    std::uint64_t compiles = 0, loads = 0;
    {
        kiln::Engine e(o);
        kiln::Function f = e.load(model());
        const auto t0 = Clock::now();
        f.warmup({{{8, 784}}});
        warmup_ms = ms_since(t0);
        compiles = f.stats().compiles;
        loads = f.stats().persistent_cache_hits;
        (void)f(in);
        if (f.stats().calls_by_tier[2] != 1) {
            std::fprintf(stderr, "cache_warm: the call after warmup did not run on tier 2\n");
            return 1;
        }
    }
    // 2. Traffic on a fresh engine: background compiles, tier 2 after one call per signature.
    o.tier2_threshold = 1;
    o.cache_dir = dir.empty() ? dir : dir + "/traffic";
    kiln::Engine e(o);
    kiln::Function f = e.load(model());
    const auto t0 = Clock::now();
    double first_ms = 0, to_tier2_ms = -1;
    int calls = 0;
    bool ready = false;
    while (ms_since(t0) < 30000) {
        const auto c0 = Clock::now();
        (void)f(in);
        ++calls;
        if (calls == 1) first_ms = ms_since(c0);
        if (ready) {  // every group had tier-2 code before this call began
            to_tier2_ms = ms_since(t0);
            break;
        }
        ready = all_tier2(f.stats());
    }
    const kiln::FunctionStats s = f.stats();
    std::printf("RESULT bench=cache_warm mode=%s warmup_ms=%.2f warmup_compiles=%llu warmup_loads=%llu first_call_ms=%.2f "
                "to_tier2_ms=%.2f calls=%d compiles=%llu loads=%llu compile_ms=%.2f\n",
                mode.c_str(), warmup_ms, static_cast<unsigned long long>(compiles), static_cast<unsigned long long>(loads),
                first_ms, to_tier2_ms, calls, static_cast<unsigned long long>(s.compiles),
                static_cast<unsigned long long>(s.persistent_cache_hits), s.compile_ms);
    return to_tier2_ms < 0 ? 1 : 0;
}

int spawn_child(const std::string& self, const std::string& mode, const std::string& dir) {
    std::vector<std::string> args = {self, "--child", mode, dir.empty() ? "-" : dir};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (::posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), environ) != 0) return 1;
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 4 && std::strcmp(argv[1], "--child") == 0)
        return child(argv[2], std::strcmp(argv[3], "-") == 0 ? std::string() : std::string(argv[3]));
    if (std::getenv("KILN_CACHE_DIR")) {
        std::fprintf(stderr, "cache_warm: unset KILN_CACHE_DIR; the benchmark makes its own directories\n");
        return 2;
    }
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("kiln-cache-warm-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::printf("# cache_warm: each line from a fresh process; model: MLP 784-1024-1024-10 + layer_norm + softmax, batch 8\n");
    std::fflush(stdout);
    int rc = 0;
    rc |= spawn_child(self, "none", "");
    rc |= spawn_child(self, "cold", dir.string());
    rc |= spawn_child(self, "warm", dir.string());
    std::filesystem::remove_all(dir);
    return rc;
}
