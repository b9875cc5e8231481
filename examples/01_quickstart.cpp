// 01_quickstart: trace a small MLP with a dynamic batch, load it into an Engine, and serve a
// short stream of calls at two batch sizes, printing as they happen each call's latency,
// the code each group ran on, and the compiles as they land: the JIT at work.
//
//   usage: 01_quickstart [BATCH ...] [--calls N] [--gap-ms MS]
//          (default: batches 8 64, 40 calls each, 20 ms between calls)
//
// Exits non-zero if an output has the wrong shape, a NaN, or a softmax row that does not
// sum to 1.
#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace {

// Checks one output: shape [batch, 10], finite, every row a probability distribution.
int check(const std::vector<kiln::Tensor>& y, std::int64_t batch) {
    if (y.size() != 1 || y[0].shape() != kiln::Shape{batch, 10}) {
        std::cerr << "batch " << batch << ": expected one output of shape [" << batch << ", 10]\n";
        return 1;
    }
    std::vector<float> v = y[0].to_vector<float>();
    int bad_rows = 0;
    for (std::int64_t r = 0; r < batch; ++r) {
        double s = 0.0;
        for (std::int64_t c = 0; c < 10; ++c) {
            const float p = v[static_cast<std::size_t>(r * 10 + c)];
            s += std::isfinite(p) && p >= 0.0f ? p : -1e9;
        }
        if (std::abs(s - 1.0) > 1e-5) ++bad_rows;
    }
    if (bad_rows) std::cerr << "batch " << batch << ": " << bad_rows << " rows do not sum to 1\n";
    return bad_rows;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) try {
    std::vector<std::int64_t> batches;
    int calls_per_batch = 40, gap_ms = 20;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--calls" && i + 1 < argc) calls_per_batch = std::stoi(argv[++i]);
        else if (a == "--gap-ms" && i + 1 < argc) gap_ms = std::stoi(argv[++i]);
        else batches.push_back(std::stoll(a));
    }
    if (batches.empty()) batches = {8, 64};

    // Step 1: the weights. They are ordinary tensors; captured by the trace they become
    // constants of the graph. Tensor::randn(shape, seed) is deterministic on every platform.
    kiln::Tensor W1 = kiln::Tensor::randn({784, 512}, /*seed=*/1);
    kiln::Tensor b1 = kiln::Tensor::zeros({512});
    kiln::Tensor W2 = kiln::Tensor::randn({512, 10}, /*seed=*/2);
    kiln::Tensor b2 = kiln::Tensor::zeros({10});

    // Step 2: trace. The body runs once, on symbolic Vars; `dyn("batch")` declares a
    // dimension whose size is only known at call time. Every op checks its operands
    // here, so a shape mistake throws kiln::Error now, not at the first call.
    kiln::Graph g = kiln::trace(
        "mlp", {kiln::arg("x", kiln::DType::f32, {kiln::dyn("batch"), 784})},
        [&](const std::vector<kiln::Var>& in) -> std::vector<kiln::Var> {
            // The scales keep the logits in a sensible range for randn weights.
            kiln::Var h = kiln::relu(kiln::matmul(in[0], W1) * (1.0 / 28.0) + b1);
            return {kiln::softmax(kiln::matmul(h, W2) * (1.0 / 22.0) + b2, /*axis=*/-1)};
        });

    // Step 3: look at the IR (the weights print as <elided>; Graph::to_string() without
    // options prints them in full and parses back with Graph::parse).
    std::cout << "---- IR ----\n" << g.to_string({.max_constant_elements = 4}) << "\n";

    // Step 4: load it. Engine() reads the KILN_* environment variables (README); a Function
    // is cheap to copy and may be called from any number of threads. The graph is split
    // into fusion groups, each of which tiers up on its own.
    kiln::Engine engine;
    kiln::Function f = engine.load(g);
    kiln::FunctionStats before = f.stats();
    std::cout << "---- groups ----\n";
    for (std::size_t i = 0; i < before.groups.size(); ++i)
        std::cout << "  g" << i << " = " << before.groups[i].name << " (" << before.groups[i].kind << ")\n";

    // Step 5: serve a stream of calls, spaced `gap_ms` apart as a service's requests would
    // be (compiles run in the background meanwhile; a call never waits for one). Each line:
    // the call, its batch, its latency, and per group the code it ran on: 0 the
    // interpreter, 1 the baseline tier (asmjit), 2 the optimising tier (LLVM), read from
    // the stats' counters before and after the call; then what happened around it.
    std::cout << "---- calls (" << calls_per_batch << " per batch, " << gap_ms << " ms apart) ----\n";
    int failures = 0, n = 0;
    std::vector<std::vector<double>> latency(batches.size());
    for (std::size_t bi = 0; bi < batches.size(); ++bi) {
        const std::int64_t batch = batches[bi];
        kiln::Tensor x = kiln::Tensor::randn({batch, 784}, /*seed=*/100 + bi);
        for (int c = 0; c < calls_per_batch; ++c) {
            const auto t0 = std::chrono::steady_clock::now();
            std::vector<kiln::Tensor> y = f({x});
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            latency[bi].push_back(ms);
            failures += check(y, batch);
            const kiln::FunctionStats now = f.stats();
            std::string ran;
            for (std::size_t i = 0; i < now.groups.size(); ++i) {
                const kiln::GroupStats &a = before.groups[i], &b = now.groups[i];
                // Ran compiled: its best tier (a deopt below shows when that was not the case).
                ran += " " + std::to_string(b.compiled_calls > a.compiled_calls ? b.tier : 0);
            }
            char line[160];
            std::snprintf(line, sizeof line, "call %3d  batch %3lld  %8.3f ms  groups:%s", ++n,
                          static_cast<long long>(batch), ms, ran.c_str());
            std::cout << line;
            if (now.deopts > before.deopts)
                std::cout << "   guard failed: no version fits batch " << batch << ", ran a lower tier";
            std::cout << "\n";
            for (std::size_t i = 0; i < now.groups.size(); ++i)
                for (std::size_t t = 1; t < kiln::kNumTiers; ++t)
                    if (now.groups[i].compiles_by_tier[t] > before.groups[i].compiles_by_tier[t])
                            std::printf("           + g%zu %s: tier-%zu code landed (%.1f ms to compile); it holds %llu "
                                        "version(s), %llu specialised\n",
                                        i, now.groups[i].name.c_str(), t,
                                        now.groups[i].compile_ms_by_tier[t] - before.groups[i].compile_ms_by_tier[t],
                                        static_cast<unsigned long long>(now.groups[i].versions),
                                        static_cast<unsigned long long>(now.groups[i].specializations));
            before = now;
            if (gap_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
        }
    }

    // Step 6: what the JIT did: the speed-up from each batch's first call to its steady
    // state (the median of its last 10 calls), and the counters.
    const kiln::FunctionStats s = f.stats();
    std::cout << "---- summary ----\n";
    for (std::size_t bi = 0; bi < batches.size(); ++bi) {
        const auto& l = latency[bi];
        const std::vector<double> tail(l.end() - std::min<std::ptrdiff_t>(10, static_cast<std::ptrdiff_t>(l.size())), l.end());
        std::printf("batch %3lld: first call %.3f ms, steady state %.3f ms: %.1fx faster\n",
                    static_cast<long long>(batches[bi]), l.front(), median(tail), l.front() / median(tail));
    }
    std::printf("calls by tier %llu/%llu/%llu, compiles %llu (%.1f ms in the background), specialisations %llu, "
                "guard failures %llu\n",
                static_cast<unsigned long long>(s.calls_by_tier[0]), static_cast<unsigned long long>(s.calls_by_tier[1]),
                static_cast<unsigned long long>(s.calls_by_tier[2]), static_cast<unsigned long long>(s.compiles),
                s.compile_ms, static_cast<unsigned long long>(s.specializations),
                static_cast<unsigned long long>(s.guard_failures));
    std::cout << "what the tier-up policy says about each group now:\n";
    for (std::size_t i = 0; i < s.groups.size(); ++i)
        std::cout << "  g" << i << " " << s.groups[i].name << ": tier " << s.groups[i].tier << ", "
                  << (s.groups[i].tierup.empty() ? s.groups[i].note : s.groups[i].tierup) << "\n";
    std::cout << "(the first batch got versions specialised on its size; the next one failed their guards,\n"
                 " ran on lower tiers for a few calls, and got a generic version that serves any batch.\n"
                 " The first call of all is cold: compare the steady state with the warm interpreted calls too.\n"
                 " f.stats().to_json() has every counter.)\n";

    if (failures != 0) {
        std::cerr << "01_quickstart: " << failures << " check(s) failed\n";
        return 1;
    }
    std::cout << "01_quickstart: ok\n";
    return 0;
} catch (const kiln::Error& e) {
    std::cerr << "kiln::Error: " << e.what() << "\n";
    return 1;
} catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
}
