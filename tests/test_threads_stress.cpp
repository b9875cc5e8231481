// The stress test of issue 4: 16 threads call one Function for several seconds with shapes
// drawn from a distribution that moves over time, while background compiles finish and a
// code cache bounded below the working set evicts code. Every answer must equal the
// interpreter's. Run under ThreadSanitizer and AddressSanitizer/LeakSanitizer by the
// sanitizer builds (scripts/test.sh).
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "have_tier.h"
#include "reference.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace kiln;
using kiln::test::have_tier;

namespace {

Graph stress_graph() {
    Tensor w = Tensor::randn({24, 24}, 11, DType::f32), g = Tensor::rand({24}, 12, DType::f32, 0.5, 1.5);
    Tensor b = Tensor::randn({24}, 13);
    return trace("stress", {arg("x", DType::f32, {dyn("B"), 24}), arg("y", DType::f32, {24})},
                 [&](const std::vector<Var>& in) {
                     Var h = gelu(in[0] * in[1] + 0.25, true) * sigmoid(in[0]);
                     Var m = relu(matmul(h, w) + b);
                     return std::vector<Var>{softmax(layer_norm(m, g, b), -1), sum(exp(h) - 1.0, -1), max(m, -1)};
                 });
}

double seconds_from_env(double dflt) {
    if (const char* v = std::getenv("KILN_TEST_STRESS_SECONDS")) return std::atof(v);
    return dflt;
}

}  // namespace

TEST_CASE("threads: 16 threads, moving shapes, background compiles and evictions; every answer is the interpreter's") {
    Options io;
    io.jit = false;
    Function ref = Engine(io).load(stress_graph());

    Options o;
    o.async_compile = true;
    o.compile_threads = 2;
    o.tier1_threshold = 2;
    o.tier2_threshold = 4;
    o.max_specializations = 4;
    o.code_cache_bytes = 8 << 10;  // below what the traffic's versions need (tier 2 alone too): evictions happen
    Engine engine(o);
    Function f = engine.load(stress_graph());

    constexpr int kThreads = 16;
    const double seconds = seconds_from_env(3.0);
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + std::chrono::duration<double>(seconds);
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> calls{0}, wrong{0}, errors{0};
    std::mutex first_mu;
    std::string first_problem;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            std::mt19937_64 rng(static_cast<std::uint64_t>(t) * 7919 + 1);
            Tensor y = Tensor::rand({24}, 100 + static_cast<std::uint64_t>(t), DType::f32, 0.5, 1.5);
            while (!stop.load(std::memory_order_relaxed)) {
                // The distribution moves: every ~third of the run a new window of batch sizes
                // becomes common, and some calls draw from a wide range.
                const double frac = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / seconds;
                const auto window = static_cast<std::int64_t>(frac * 3.0);
                std::int64_t bsz = (rng() % 8 == 0) ? 1 + static_cast<std::int64_t>(rng() % 40)
                                                    : 1 + window * 4 + static_cast<std::int64_t>(rng() % 4);
                Tensor x = Tensor::randn({bsz, 24}, rng());
                try {
                    auto a = f({x, y});
                    auto r = ref({x, y});
                    bool ok = a.size() == r.size();
                    for (std::size_t k = 0; ok && k < a.size(); ++k) ok = ref::max_rel_diff(a[k], r[k]) < 1e-4;
                    if (!ok) {
                        wrong.fetch_add(1);
                        std::lock_guard<std::mutex> lock(first_mu);
                        if (first_problem.empty()) first_problem = "wrong answer at B=" + std::to_string(bsz);
                    }
                } catch (const std::exception& e) {
                    errors.fetch_add(1);
                    std::lock_guard<std::mutex> lock(first_mu);
                    if (first_problem.empty()) first_problem = e.what();
                }
                calls.fetch_add(1);
            }
        });
    }
    // The traffic runs for `seconds`; where a tier compiles, on until the first eviction (a
    // loaded machine compiles slowly), but at most 10x as long.
    const bool compiling = have_tier(1) || have_tier(2);
    std::this_thread::sleep_until(deadline);
    const auto cap = start + std::chrono::duration<double>(10 * seconds);
    while (compiling && engine.stats().code_cache_evictions == 0 && std::chrono::steady_clock::now() < cap)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stop.store(true);
    const double ran_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (auto& th : threads) th.join();
    f.wait_for_compiles();
    const FunctionStats fs = f.stats();
    const EngineStats es = engine.stats();
    MESSAGE(calls.load() << " calls in " << ran_s << " s on " << kThreads << " threads; tiers " << fs.calls_by_tier[0]
                         << "/" << fs.calls_by_tier[1] << "/" << fs.calls_by_tier[2] << ", " << fs.compiles << " compiles, "
                         << es.code_cache_evictions << " evictions, " << es.code_cache_hits << " cache hits");
    INFO(first_problem);
    INFO(es.to_json());
    CHECK(wrong.load() == 0);
    CHECK(errors.load() == 0);
    CHECK(fs.calls == calls.load());
    CHECK(es.code_cache_bytes <= static_cast<std::uint64_t>(o.code_cache_bytes));
    // Compiled code and evictions are required wherever this build and host have a tier.
    if (compiling) {
        CHECK(fs.compiles > 0);
        CHECK(fs.calls_by_tier[1] + fs.calls_by_tier[2] > 0);
        CHECK(es.code_cache_evictions > 0);
    } else {
        test::skip("the compile and eviction part: no compiling tier in this build or host");
    }
}
