// jit_service: the costs a service sees from the JIT machinery (issue 4), from one run:
//   - warm-up: the latency of each of the first calls of a fresh function (p50, p99, max)
//     with background compilation (KILN_ASYNC_COMPILE=1) and with compiles on the calling
//     thread (=0), and the call at which tier 2 is first used;
//   - dispatch: ns per call of a one-add graph (f.run into caller outputs) with 1 and 16
//     threads calling one Function at once, on f32[4] (`dispatch`) and on f32[?n] called at
//     n = 4 (`dispatch_sym`: the call also binds a symbol and profiles its value);
//   - tier 1 against the interpreter and tier 2 through the Engine, on the elementwise chain
//     and softmax(layer_norm) (each tier forced by its thresholds).
//
//   usage: jit_service [--quick] [--dispatch]   (--dispatch: only the dispatch lines, 2 s each)
// Prints `RESULT name=... ...` lines and a short table.
#include "bench_util.h"

#include <kiln/kiln.h>

#include <atomic>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using kiln::Tensor;
using kiln::Var;
using kiln_bench::Clock;
using kiln_bench::ms_since;
using kiln_bench::percentile;
constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

kiln::Graph service_graph() {
    Tensor w = Tensor::rand({256, 256}, 1, kiln::DType::f32, -0.06, 0.06), b = Tensor::randn({256}, 2);
    Tensor g = Tensor::rand({256}, 3, kiln::DType::f32, 0.5, 1.5), be = Tensor::randn({256}, 4);
    return kiln::trace("service", {kiln::arg("x", kiln::DType::f32, {kiln::dyn("B"), 256})},
                       [&](const std::vector<Var>& in) {
                           Var h = kiln::gelu(kiln::linear(in[0], w, b), true) * kiln::sigmoid(in[0]);
                           return std::vector<Var>{kiln::softmax(kiln::layer_norm(h, g, be), -1)};
                       });
}

void warmup_latency(bool async, int calls) {
    kiln::Options o = kiln::Options::from_env();
    o.async_compile = async;
    kiln::Engine e(o);
    kiln::Function f = e.load(service_graph());
    Tensor x = Tensor::randn({64, 256}, 9);
    std::vector<Tensor> out{Tensor::empty({64, 256}, kiln::DType::f32)};
    std::vector<double> lat;
    int first_t2 = -1;
    for (int i = 0; i < calls; ++i) {
        const auto t0 = Clock::now();
        f.run(std::vector<Tensor>{x}, out);
        lat.push_back(ms_since(t0));
        if (first_t2 < 0 && f.stats().calls_by_tier[2] > 0) first_t2 = i + 1;
    }
    std::vector<double> s = lat;
    std::sort(s.begin(), s.end());
    std::printf("RESULT name=warmup impl=kiln async=%d calls=%d p50_ms=%.4g p99_ms=%.4g max_ms=%.4g first_t2_call=%d\n",
                async ? 1 : 0, calls, percentile(s, 0.5), percentile(s, 0.99), s.back(), first_t2);
    f.wait_for_compiles();
}

void dispatch(int threads, double seconds, bool symbolic) {
    kiln::Options o = kiln::Options::from_env();
    o.tier1_threshold = 1;
    o.tier2_threshold = 2;
    kiln::Engine e(o);
    const kiln::Dim len = symbolic ? kiln::dyn("n") : kiln::Dim(4);
    kiln::Function f = e.load(kiln::trace("tiny", {kiln::arg("x", kiln::DType::f32, {len})},
                                          [](const std::vector<Var>& in) { return std::vector<Var>{in[0] + in[0]}; }));
    Tensor x = Tensor::randn({4}, 1);
    for (int i = 0; i < 10; ++i) f({x});
    f.wait_for_compiles();
    for (int i = 0; i < 10; ++i) f({x});
    std::atomic<bool> go{false}, stop{false};
    std::vector<std::uint64_t> counts(static_cast<std::size_t>(threads), 0);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            std::vector<Tensor> in{x};
            std::vector<Tensor> out{Tensor::empty({4}, kiln::DType::f32)};
            while (!go.load()) std::this_thread::yield();
            std::uint64_t n = 0;
            while (!stop.load(std::memory_order_relaxed)) {
                for (int k = 0; k < 64; ++k) f.run(in, out);
                n += 64;
            }
            counts[static_cast<std::size_t>(t)] = n;
        });
    const auto t0 = Clock::now();
    go = true;
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop = true;
    for (auto& t : pool) t.join();
    const double ms = ms_since(t0);
    std::uint64_t total = 0;
    for (auto c : counts) total += c;
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    // Per-call cost in CPU time: wall time x busy cores / calls.
    const double busy = static_cast<double>(std::min<unsigned>(cores, static_cast<unsigned>(threads)));
    std::printf("RESULT name=%s impl=kiln threads=%d cores=%u calls=%llu ns_per_call_cpu=%.1f calls_per_s=%.3g tier=%d\n",
                symbolic ? "dispatch_sym" : "dispatch", threads, cores, static_cast<unsigned long long>(total), ms * 1e6 * busy / static_cast<double>(total),
                static_cast<double>(total) / (ms / 1000.0), f.stats().calls_by_tier[2] > 0 ? 2 : 0);
}

void tier_speed(const char* name, const kiln::Graph& g, const std::vector<Tensor>& in, bool quick) {
    struct Mode {
        const char* tier;
        bool jit;
        std::int64_t t1, t2;
    };
    double interp_ms = 0;
    for (const Mode& m : {Mode{"interp", false, kNever, kNever}, Mode{"tier1", true, 1, kNever}, Mode{"tier2", true, kNever, 1}}) {
        kiln::Options o = kiln::Options::from_env();
        o.jit = m.jit;
        o.async_compile = false;
        o.tier1_threshold = m.t1;
        o.tier2_threshold = m.t2;
        kiln::Engine e(o);
        kiln::Function f = e.load(g);
        std::vector<Tensor> out = f(in);
        for (int i = 0; i < 3; ++i) f(in);
        kiln_bench::TimingPlan plan;
        if (quick) plan.budget_ms = 300;
        kiln_bench::Timing t = kiln_bench::time_calls([&] { f.run(in, out); }, plan);
        if (!m.jit) interp_ms = t.median_ms;
        const auto s = f.stats();
        const int reached = s.calls_by_tier[2] ? 2 : s.calls_by_tier[1] ? 1 : 0;
        std::printf("RESULT name=%s impl=kiln_%s ms=%.4g p10=%.4g p90=%.4g reached_tier=%d interp_over=%.3g\n", name, m.tier,
                    t.median_ms, t.p10_ms, t.p90_ms, reached, interp_ms / t.median_ms);
    }
}

}  // namespace

int main(int argc, char** argv) try {
    bool quick = false, dispatch_only = false;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--quick") == 0) quick = true;
        else if (std::strcmp(argv[i], "--dispatch") == 0) dispatch_only = true;
        else throw std::runtime_error(std::string("unknown argument '") + argv[i] + "'; expected --quick or --dispatch");
    }
    std::printf("# jit_service: %s\n", kiln::Options::from_env().to_string().c_str());
    if (dispatch_only) {
        for (bool sym : {false, true})
            for (int threads : {1, 16}) dispatch(threads, 2.0, sym);
        return 0;
    }
    warmup_latency(true, quick ? 100 : 300);
    warmup_latency(false, quick ? 100 : 300);
    for (bool sym : {false, true})
        for (int threads : {1, 16}) dispatch(threads, quick ? 0.3 : 1.0, sym);
    {
        const std::int64_t n = quick ? (1 << 20) : (1 << 22);
        Tensor a = Tensor::randn({n}, 1), b = Tensor::randn({n}, 2), c = Tensor::randn({n}, 3);
        kiln::Graph g = kiln::trace("chain", {kiln::arg("a", kiln::DType::f32, {n}), kiln::arg("b", kiln::DType::f32, {n}),
                                              kiln::arg("c", kiln::DType::f32, {n})},
                                    [](const std::vector<Var>& in) {
                                        return std::vector<Var>{kiln::gelu(in[0] * in[1] + in[2], true) * kiln::sigmoid(in[0])};
                                    });
        tier_speed("chain", g, {a, b, c}, quick);
    }
    {
        Tensor gm = Tensor::rand({1024}, 3, kiln::DType::f32, 0.5, 1.5), be = Tensor::randn({1024}, 4);
        kiln::Graph g = kiln::trace("softmax_ln", {kiln::arg("x", kiln::DType::f32, {kiln::dyn("R"), 1024})},
                                    [&](const std::vector<Var>& in) {
                                        return std::vector<Var>{kiln::softmax(kiln::layer_norm(in[0], gm, be), -1)};
                                    });
        tier_speed("softmax_ln", g, {Tensor::randn({quick ? 512 : 4096, 1024}, 5)}, quick);
    }
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "jit_service: %s\n", e.what());
    return 1;
}
