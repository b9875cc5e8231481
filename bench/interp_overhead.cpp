// interp_overhead: what one call and one op cost in Kiln's interpreter (tier 0).
//
//   usage: interp_overhead [--quick]
//
// 1. Tiny graphs on f32[4], where the arithmetic is negligible and everything measured is
//    overhead: `add` (one op) and `chain16` (16 chained elementwise ops). Reported as the
//    median ns per call over several repetitions, for both call forms (f({x}), which
//    allocates its outputs, and f.run(in, out) into caller-owned outputs), and as ns per
//    op = (chain16 - add) / 15: the marginal cost of one more interpreted op.
// 2. The same 16-op chain on 1M floats against two hand-written loops compiled in this
//    program (-O3 -march=native): one fused loop (one pass over memory, what a fusing JIT
//    aims for) and one pass per op (what an unfused interpreter must do at best).
//
// Plain std::chrono; the numbers are for comparing within one run on one machine. Set
// KILN_NUM_THREADS=1 for a like-for-like comparison with the single-threaded loops.
#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kRounds = 4;                // 4 ops per round: mul, add, abs, neg
constexpr int kChainOps = 4 * kRounds;    // = 16

// The chain, traced: y = -|y * 0.5 + 0.25|, four times.
kiln::Var chain(kiln::Var y) {
    for (int r = 0; r < kRounds; ++r) y = kiln::neg(kiln::abs(y * 0.5 + 0.25));
    return y;
}

// The same chain by hand, fused: one pass over memory.
__attribute__((noinline)) void chain_fused(const float* __restrict x, float* __restrict y, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
        float v = x[i];
        for (int r = 0; r < kRounds; ++r) v = -std::fabs(v * 0.5f + 0.25f);
        y[i] = v;
    }
}

// The same chain by hand, one pass per op (through one temporary, as an interpreter
// without fusion would at best).
__attribute__((noinline)) void chain_unfused(const float* __restrict x, float* __restrict y, float* __restrict t,
                                             std::int64_t n) {
    const float* src = x;
    for (int r = 0; r < kRounds; ++r) {
        for (std::int64_t i = 0; i < n; ++i) t[i] = src[i] * 0.5f;
        for (std::int64_t i = 0; i < n; ++i) t[i] = t[i] + 0.25f;
        for (std::int64_t i = 0; i < n; ++i) t[i] = std::fabs(t[i]);
        for (std::int64_t i = 0; i < n; ++i) y[i] = -t[i];
        src = y;
    }
}

// Median over `reps` repetitions of the time per iteration, in ns. The iteration count
// is calibrated so that one repetition takes about `target_ms`.
double median_ns(const std::function<void()>& body, int reps, double target_ms) {
    body();  // warm up: first-call allocations, page faults
    std::int64_t iters = 1;
    for (;;) {
        auto t0 = Clock::now();
        for (std::int64_t i = 0; i < iters; ++i) body();
        double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (ms >= target_ms / 4 || iters >= (std::int64_t{1} << 30)) {
            iters = std::max<std::int64_t>(1, static_cast<std::int64_t>(double(iters) * target_ms / std::max(ms, 1e-3)));
            break;
        }
        iters *= 4;
    }
    std::vector<double> samples;
    for (int r = 0; r < reps; ++r) {
        auto t0 = Clock::now();
        for (std::int64_t i = 0; i < iters; ++i) body();
        samples.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(iters));
    }
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
}

double max_abs_diff(const kiln::Tensor& a, const std::vector<float>& b) {
    std::vector<float> va = a.to_vector<float>();
    double d = va.size() == b.size() ? 0.0 : INFINITY;
    for (std::size_t i = 0; i < std::min(va.size(), b.size()); ++i) d = std::max(d, double(std::fabs(va[i] - b[i])));
    return d;
}

}  // namespace

int main(int argc, char** argv) try {
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    const int reps = quick ? 3 : 9;
    const double target_ms = quick ? 5.0 : 50.0;

    kiln::Engine engine;
    std::printf("Kiln %s interpreter overhead (%s)\n", kiln::version_string(), engine.options().to_string().c_str());
    std::printf("median of %d repetitions\n\n", reps);

    // ---- 1. tiny graphs: overhead per call and per op ----
    kiln::Graph add = kiln::trace("add", {kiln::arg("x", kiln::DType::f32, {4})},
                                  [](const std::vector<kiln::Var>& in) -> std::vector<kiln::Var> { return {in[0] + in[0]}; });
    kiln::Graph chain16 = kiln::trace("chain16", {kiln::arg("x", kiln::DType::f32, {kiln::dyn("n")})},
                                      [](const std::vector<kiln::Var>& in) -> std::vector<kiln::Var> { return {chain(in[0])}; });
    kiln::Function f_add = engine.load(add), f_chain = engine.load(chain16);

    kiln::Tensor x4 = kiln::Tensor::randn({4}, 1);
    std::vector<kiln::Tensor> in4{x4};
    std::vector<kiln::Tensor> out_add{kiln::Tensor::empty({4})}, out_chain{kiln::Tensor::empty({4})};

    const double add_call = median_ns([&] { (void)f_add(in4); }, reps, target_ms);
    const double chain_call = median_ns([&] { (void)f_chain(in4); }, reps, target_ms);
    const double add_run = median_ns([&] { f_add.run(in4, out_add); }, reps, target_ms);
    const double chain_run = median_ns([&] { f_chain.run(in4, out_chain); }, reps, target_ms);

    std::printf("tiny graphs on f32[4] (%lld and %lld IR nodes, 1 and %d ops)\n", static_cast<long long>(add.num_nodes()),
                static_cast<long long>(chain16.num_nodes()), kChainOps);
    std::printf("  %-28s %12s %12s\n", "", "f({x})", "f.run(in,out)");
    std::printf("  %-28s %9.0f ns %9.0f ns\n", "add (1 op): per call", add_call, add_run);
    std::printf("  %-28s %9.0f ns %9.0f ns\n", "chain16 (16 ops): per call", chain_call, chain_run);
    std::printf("  %-28s %9.1f ns %9.1f ns\n", "per op, (chain16 - add)/15", (chain_call - add_call) / (kChainOps - 1),
                (chain_run - add_run) / (kChainOps - 1));
    std::printf("  %-28s %9.1f ns %9.1f ns\n", "chain16 per call / 16 ops", chain_call / kChainOps, chain_run / kChainOps);

    // ---- 2. a large chain: interpreter against hand-written loops ----
    const std::int64_t n = std::int64_t{1} << 20;
    kiln::Tensor xl = kiln::Tensor::randn({n}, 2);
    std::vector<kiln::Tensor> inl{xl};
    std::vector<kiln::Tensor> outl{kiln::Tensor::empty({n})};
    std::vector<float> xs = xl.to_vector<float>(), y_fused(static_cast<std::size_t>(n)), y_unfused(static_cast<std::size_t>(n)),
                       tmp(static_cast<std::size_t>(n));

    const double kiln_ns = median_ns([&] { f_chain.run(inl, outl); }, reps, target_ms * 4);
    const double fused_ns = median_ns([&] { chain_fused(xs.data(), y_fused.data(), n); }, reps, target_ms * 4);
    const double unfused_ns =
        median_ns([&] { chain_unfused(xs.data(), y_unfused.data(), tmp.data(), n); }, reps, target_ms * 4);

    const double d_fused = max_abs_diff(outl[0], y_fused), d_unfused = max_abs_diff(outl[0], y_unfused);
    const double bytes = double(n) * sizeof(float) * 2;  // one read, one write per element
    const double mb = bytes / 1e6;
    std::printf("\n16-op elementwise chain on f32[%lld] (%.1f MB in + out)\n", static_cast<long long>(n), mb);
    std::printf("  %-34s %9.3f ms  %6.2f GB/s\n", "kiln f.run (interpreter)", kiln_ns / 1e6, bytes / kiln_ns);
    std::printf("  %-34s %9.3f ms  %6.2f GB/s\n", "hand-written, fused loop", fused_ns / 1e6, bytes / fused_ns);
    std::printf("  %-34s %9.3f ms  %6.2f GB/s\n", "hand-written, one pass per op", unfused_ns / 1e6, bytes / unfused_ns);
    std::printf("  ratio kiln / fused loop:      %6.2fx\n", kiln_ns / fused_ns);
    std::printf("  ratio kiln / per-op loops:    %6.2fx\n", kiln_ns / unfused_ns);
    std::printf("  max abs diff vs loops: %.3g (fused), %.3g (per op)\n", d_fused, d_unfused);

    if (!(d_fused <= 1e-5 && d_unfused <= 1e-5)) {
        std::fprintf(stderr, "interp_overhead: Kiln's result differs from the hand-written loops\n");
        return 1;
    }
    return 0;
} catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln::Error: %s\n", e.what());
    return 1;
}
