// jit_workloads: Kiln on the workloads of issue 3 ("Benchmarks"), as an embedder would run
// them: trace, load into an Engine configured from the environment (KILN_NUM_THREADS,
// KILN_JIT, the tier thresholds, ...), warm up past the tier thresholds, wait for the
// compiles, time many calls, check the result once against a plain double-precision
// reference.
//
//   usage: jit_workloads [--quick] [--only SUBSTRING]
//
// Prints `RESULT name=... impl=kiln ...` lines (impl=kiln_interp when KILN_JIT=0), one per
// measurement; bench/report.py turns them into the table of scripts/bench.sh. Fields:
//   ms, p10, p90   median and 10th/90th percentile of the time per call (f.run into
//                  caller-owned outputs), over `reps` repetitions of `iters` calls
//   tier           the highest tier any timed call counted under (calls_by_tier);
//                  calls=t0/t1/t2 the timed calls per tier
//   groups         the groups per tier after the run (groups[i].tier), "t0:N,t1:N,t2:N"
//   t2_call, t2_ms the first call (1-based, from the first call of this workload's
//                  shape) that counted under tier 2 and the wall time from that first call
//                  to the end of it ("n/a": no call reached tier 2)
//   compiles, compile_ms  the function's compile count and total compile time so far
//   bytes / flops  what the bandwidth floor and the rate are computed from
//   err            max |kiln - reference| / max |reference| (checked against --tol)
// and the JIT-cost lines: dispatch_run / dispatch_call (ns per call on a one-add graph on
// f32[4], f.run and f({x})) and jit_compile (engine totals: compiles, compile_ms, mean).
//
// Exits non-zero if a result differs from its reference.
#include "bench_util.h"
#include "workloads.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using kiln::Tensor;
using kiln::Var;
using kiln_bench::Clock;
using kiln_bench::Result;
using kiln_bench::Timing;
using kiln_bench::TimingPlan;
using I64 = std::int64_t;
using Vec = std::vector<double>;

// ---------------------------------------------------------------- settings and helpers

struct Settings {
    bool quick = false;
    std::string only;
    double tol = 1e-3;
};

struct Ctx {
    Settings settings;
    kiln::Engine* engine = nullptr;
    std::string impl;  // "kiln" or "kiln_interp"
    int threads = 1;
    int failures = 0;
    // Tier-2 compiles of every group measured ("function/group" -> count, ms), from the
    // function's latest stats (they accumulate over its shapes).
    std::map<std::string, std::pair<std::uint64_t, double>> t2_compiles;
};

void record_compiles(Ctx& ctx, const kiln::FunctionStats& s) {
    for (const kiln::GroupStats& g : s.groups)
        if (g.compiles_by_tier[2] > 0) ctx.t2_compiles[s.name + "/" + g.name] = {g.compiles_by_tier[2], g.compile_ms_by_tier[2]};
}

bool selected(const Ctx& ctx, const std::string& name) {
    return ctx.settings.only.empty() || name.find(ctx.settings.only) != std::string::npos;
}

using kiln_bench::weight;

Vec doubles(const Tensor& t) { return t.to_doubles(); }

// max |got - ref| / max |ref|.
double rel_err(const Tensor& got, const Vec& ref) {
    const Vec g = got.to_doubles();
    if (g.size() != ref.size()) return INFINITY;
    double num = 0, den = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
        const double d = std::fabs(g[i] - ref[i]);
        num = std::isnan(d) ? INFINITY : std::max(num, d);
        den = std::max(den, std::fabs(ref[i]));
    }
    return den > 0 ? num / den : num;
}

std::string groups_by_tier(const kiln::FunctionStats& s) {
    int n[3] = {0, 0, 0};
    for (const kiln::GroupStats& g : s.groups) n[std::clamp(g.tier, 0, 2)] += 1;
    return "t0:" + std::to_string(n[0]) + ",t1:" + std::to_string(n[1]) + ",t2:" + std::to_string(n[2]);
}

// Warm-up of one shape of one function: enough calls to pass the tier thresholds, then
// wait for the compiles, then a few calls more until one runs on tier 2 (if ever).
struct WarmInfo {
    I64 t2_call = -1;  // 1-based index of the first call that counted under tier 2
    double t2_ms = NAN;
    I64 calls = 0;
};

WarmInfo warm_up(const Ctx& ctx, const kiln::Function& f, const std::function<void()>& call) {
    const kiln::Options& o = ctx.engine->options();
    // A threshold of a million calls or more stands for "never" (a tier left out on purpose).
    auto finite = [](I64 t) { return t < 1'000'000 ? t : I64{0}; };
    const I64 threshold = o.jit ? std::max(finite(o.tier1_threshold), finite(o.tier2_threshold)) : 0;
    WarmInfo w;
    std::uint64_t t2_before = f.stats().calls_by_tier[2];
    const auto t0 = Clock::now();
    auto one = [&] {
        call();
        ++w.calls;
        if (w.t2_call < 0) {
            const std::uint64_t t2 = f.stats().calls_by_tier[2];
            if (t2 > t2_before) {
                w.t2_call = w.calls;
                w.t2_ms = kiln_bench::ms_since(t0);
            }
        }
    };
    for (I64 i = 0; i < threshold + 2; ++i) one();
    f.wait_for_compiles();
    for (int i = 0; i < (o.jit ? 3 : 0) && w.t2_call < 0; ++i) one();
    return w;
}

// Warm up, time, and print one RESULT line; `out` is checked by the caller afterwards.
void measure(Ctx& ctx, const std::string& name, const kiln::Function& f, const std::vector<Tensor>& in,
             std::vector<Tensor>& out, const TimingPlan& plan, const std::string& extra_key, double extra_value,
             const std::function<double()>& check) {
    auto call = [&] { f.run(in, out); };
    const WarmInfo w = warm_up(ctx, f, call);
    const kiln::FunctionStats before = f.stats();
    const Timing t = kiln_bench::time_calls(call, plan);
    const kiln::FunctionStats after = f.stats();
    int tier = 0;
    std::string per_tier;
    for (int k = 0; k < 3; ++k) {
        const std::uint64_t d = after.calls_by_tier[static_cast<std::size_t>(k)] - before.calls_by_tier[static_cast<std::size_t>(k)];
        if (d > 0) tier = k;
        per_tier += (k ? "/" : "") + std::to_string(d);
    }
    record_compiles(ctx, after);
    const double err = check();
    const bool ok = err <= ctx.settings.tol;
    if (!ok) ++ctx.failures;
    Result r(name, ctx.impl);
    r.timing(t).add_int("tier", tier).add("calls", per_tier).add("groups", groups_by_tier(after));
    if (w.t2_call > 0) r.add_int("t2_call", w.t2_call).add("t2_ms", w.t2_ms, 5);
    else r.add("t2_call", "n/a").add("t2_ms", "n/a");
    r.add_int("warm_calls", w.calls).add_int("compiles", static_cast<I64>(after.compiles)).add("compile_ms", after.compile_ms, 5);
    r.add(extra_key, extra_value, 10).add_int("threads", ctx.threads).add("err", err, 3).add("ok", ok ? "1" : "0");
    r.print();
    if (!ok) std::fprintf(stderr, "jit_workloads: %s: result differs from the reference (err %.3g > %.3g)\n", name.c_str(), err, ctx.settings.tol);
}

TimingPlan plan_for(const Ctx& ctx, double budget_ms, int min_reps = 5, int max_reps = 30) {
    TimingPlan p;
    p.budget_ms = ctx.settings.quick ? budget_ms / 5 : budget_ms;
    p.min_reps = ctx.settings.quick ? 3 : min_reps;
    p.max_reps = max_reps;
    return p;
}

// ---------------------------------------------------------------- plain references (double)

double gelu_tanh_ref(double v) { return 0.5 * v * (1.0 + std::tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v))); }
double gelu_erf_ref(double v) { return 0.5 * v * (1.0 + std::erf(v * 0.70710678118654752440)); }
double sigmoid_ref(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// y[m, n] = x[m, k] @ w[n, k]^T + b[n]
Vec linear_ref(const Vec& x, I64 m, I64 k, const Vec& w, const Vec& b, I64 n) {
    Vec y(static_cast<std::size_t>(m * n));
    for (I64 i = 0; i < m; ++i)
        for (I64 j = 0; j < n; ++j) {
            double s = b[static_cast<std::size_t>(j)];
            const double* xi = x.data() + i * k;
            const double* wj = w.data() + j * k;
            for (I64 q = 0; q < k; ++q) s += xi[q] * wj[q];
            y[static_cast<std::size_t>(i * n + j)] = s;
        }
    return y;
}

Vec layer_norm_ref(const Vec& x, I64 m, I64 d, const Vec& g, const Vec& b, double eps = 1e-5) {
    Vec y(x.size());
    for (I64 i = 0; i < m; ++i) {
        const double* xi = x.data() + i * d;
        double mean = 0, var = 0;
        for (I64 k = 0; k < d; ++k) mean += xi[k];
        mean /= double(d);
        for (I64 k = 0; k < d; ++k) var += (xi[k] - mean) * (xi[k] - mean);
        var /= double(d);
        const double inv = 1.0 / std::sqrt(var + eps);
        for (I64 k = 0; k < d; ++k)
            y[static_cast<std::size_t>(i * d + k)] = (xi[k] - mean) * inv * g[static_cast<std::size_t>(k)] + b[static_cast<std::size_t>(k)];
    }
    return y;
}

void softmax_rows_ref(double* x, I64 m, I64 d) {
    for (I64 i = 0; i < m; ++i) {
        double* xi = x + i * d;
        double mx = -INFINITY, s = 0;
        for (I64 k = 0; k < d; ++k) mx = std::max(mx, xi[k]);
        for (I64 k = 0; k < d; ++k) s += (xi[k] = std::exp(xi[k] - mx));
        for (I64 k = 0; k < d; ++k) xi[k] /= s;
    }
}

// ---------------------------------------------------------------- workloads

void chain(Ctx& ctx) {
    const std::string name = "chain_16M";
    if (!selected(ctx, name)) return;
    const I64 n = I64{1} << 24;
    kiln::Graph g = kiln::trace("chain", {kiln::arg("a", kiln::DType::f32, {kiln::dyn("n")}), kiln::arg("b", kiln::DType::f32, {kiln::dyn("n")}),
                                          kiln::arg("c", kiln::DType::f32, {kiln::dyn("n")})},
                                [](const std::vector<Var>& v) -> std::vector<Var> {
                                    return {kiln::gelu(v[0] * v[1] + v[2], /*tanh_approx=*/true) * kiln::sigmoid(v[0])};
                                });
    kiln::Function f = ctx.engine->load(g);
    std::vector<Tensor> in{Tensor::randn({n}, 1), Tensor::randn({n}, 2), Tensor::randn({n}, 3)};
    std::vector<Tensor> out{Tensor::empty({n})};
    const double bytes = 4.0 * 4.0 * double(n);  // 3 inputs read, 1 output written
    measure(ctx, name, f, in, out, plan_for(ctx, 3000), "bytes", bytes, [&] {
        const float *a = in[0].data_as<float>(), *b = in[1].data_as<float>(), *c = in[2].data_as<float>();
        Vec ref(static_cast<std::size_t>(n));
        for (I64 i = 0; i < n; ++i) {
            const double t = double(a[i]) * double(b[i]) + double(c[i]);
            ref[static_cast<std::size_t>(i)] = gelu_tanh_ref(t) * sigmoid_ref(a[i]);
        }
        return rel_err(out[0], ref);
    });
}

void softmax_layer_norm(Ctx& ctx) {
    const std::string name = "softmax_ln_4096x1024";
    if (!selected(ctx, name)) return;
    const I64 m = 4096, d = 1024;
    Tensor gamma = weight({d}, 11, 0.1f, 1.0f), beta = weight({d}, 12, 0.1f);
    kiln::Graph g = kiln::trace("softmax_ln", {kiln::arg("x", kiln::DType::f32, {kiln::dyn("rows"), d})},
                                [&](const std::vector<Var>& v) -> std::vector<Var> {
                                    return {kiln::softmax(kiln::layer_norm(v[0], gamma, beta), -1)};
                                });
    kiln::Function f = ctx.engine->load(g);
    std::vector<Tensor> in{Tensor::randn({m, d}, 10)};
    std::vector<Tensor> out{Tensor::empty({m, d})};
    const double bytes = 2.0 * 4.0 * double(m * d);  // x read, y written
    measure(ctx, name, f, in, out, plan_for(ctx, 2000), "bytes", bytes, [&] {
        Vec y = layer_norm_ref(doubles(in[0]), m, d, doubles(gamma), doubles(beta));
        softmax_rows_ref(y.data(), m, d);
        return rel_err(out[0], y);
    });
}

void mlp(Ctx& ctx) {
    const I64 batches[] = {1, 8, 64, 256};
    bool any = false;
    for (I64 b : batches) any = any || selected(ctx, "mlp_b" + std::to_string(b));
    if (!any) return;
    const kiln_bench::Mlp model = kiln_bench::make_mlp();
    constexpr I64 d0 = kiln_bench::Mlp::d0, d1 = kiln_bench::Mlp::d1, d2 = kiln_bench::Mlp::d2, d3 = kiln_bench::Mlp::d3;
    const Tensor &W1 = model.W1, &b1 = model.b1, &W2 = model.W2, &b2 = model.b2, &W3 = model.W3, &b3 = model.b3;
    // One function with a dynamic batch, as a service would load it; each batch size is
    // its own shape signature.
    kiln::Function f = ctx.engine->load(model.graph);
    const Vec w1 = doubles(W1), c1 = doubles(b1), w2 = doubles(W2), c2 = doubles(b2), w3 = doubles(W3), c3 = doubles(b3);
    for (I64 b : batches) {
        const std::string name = "mlp_b" + std::to_string(b);
        if (!selected(ctx, name)) continue;
        std::vector<Tensor> in{Tensor::randn({b, d0}, 100 + static_cast<std::uint64_t>(b))};
        std::vector<Tensor> out{Tensor::empty({b, d3})};
        const double flops = kiln_bench::Mlp::flops(b);
        measure(ctx, name, f, in, out, plan_for(ctx, b >= 64 ? 2500 : 1500), "flops", flops, [&] {
            Vec h = linear_ref(doubles(in[0]), b, d0, w1, c1, d1);
            for (double& v : h) v = std::max(v, 0.0);
            h = linear_ref(h, b, d1, w2, c2, d2);
            for (double& v : h) v = std::max(v, 0.0);
            return rel_err(out[0], linear_ref(h, b, d2, w3, c3, d3));
        });
    }
}

// The pre-norm transformer block of examples/02_dynamic_shapes.cpp with d=256, 4 heads,
// FFN 1024, batch 1 and a dynamic sequence length.
void transformer(Ctx& ctx) {
    const I64 lengths[] = {32, 128, 512};
    bool any = false;
    for (I64 s : lengths) any = any || selected(ctx, "xformer_s" + std::to_string(s));
    if (!any) return;
    const kiln_bench::Transformer model = kiln_bench::make_transformer();
    using T = kiln_bench::Transformer;
    constexpr I64 D = T::D, H = T::H, Dh = T::Dh, F = T::F;
    const Tensor &ln1_g = model.ln1_g, &ln1_b = model.ln1_b, &Wqkv = model.Wqkv, &bqkv = model.bqkv, &Wo = model.Wo,
                 &bo = model.bo, &ln2_g = model.ln2_g, &ln2_b = model.ln2_b, &W1 = model.W1, &b1 = model.b1,
                 &W2 = model.W2, &b2 = model.b2;
    kiln::Function f = ctx.engine->load(model.graph);

    const Vec g1 = doubles(ln1_g), e1 = doubles(ln1_b), wqkv = doubles(Wqkv), cqkv = doubles(bqkv), wo = doubles(Wo),
              co = doubles(bo), g2 = doubles(ln2_g), e2 = doubles(ln2_b), w1 = doubles(W1), c1 = doubles(b1), w2 = doubles(W2),
              c2 = doubles(b2);
    for (I64 S : lengths) {
        const std::string name = "xformer_s" + std::to_string(S);
        if (!selected(ctx, name)) continue;
        std::vector<Tensor> in{Tensor::randn({1, S, D}, 200 + static_cast<std::uint64_t>(S))};
        std::vector<Tensor> out{Tensor::empty({1, S, D})};
        const double flops = T::flops(S);
        measure(ctx, name, f, in, out, plan_for(ctx, S >= 512 ? 3000 : 1500), "flops", flops, [&] {
            const Vec x = doubles(in[0]);
            const Vec qkv = linear_ref(layer_norm_ref(x, S, D, g1, e1), S, D, wqkv, cqkv, 3 * D);
            Vec ctxv(static_cast<std::size_t>(S * D)), p(static_cast<std::size_t>(S));
            const double scale = 1.0 / std::sqrt(double(Dh));
            for (I64 hh = 0; hh < H; ++hh)
                for (I64 i = 0; i < S; ++i) {
                    const double* qi = qkv.data() + i * 3 * D + hh * Dh;
                    for (I64 j = 0; j < S; ++j) {
                        const double* kj = qkv.data() + j * 3 * D + D + hh * Dh;
                        double s = 0;
                        for (I64 t = 0; t < Dh; ++t) s += qi[t] * kj[t];
                        p[static_cast<std::size_t>(j)] = s * scale;
                    }
                    softmax_rows_ref(p.data(), 1, S);
                    for (I64 t = 0; t < Dh; ++t) {
                        double s = 0;
                        for (I64 j = 0; j < S; ++j) s += p[static_cast<std::size_t>(j)] * qkv[static_cast<std::size_t>(j * 3 * D + 2 * D + hh * Dh + t)];
                        ctxv[static_cast<std::size_t>(i * D + hh * Dh + t)] = s;
                    }
                }
            Vec x1 = linear_ref(ctxv, S, D, wo, co, D);
            for (std::size_t i = 0; i < x1.size(); ++i) x1[i] += x[i];
            Vec m = linear_ref(layer_norm_ref(x1, S, D, g2, e2), S, D, w1, c1, F);
            for (double& v : m) v = gelu_erf_ref(v);
            Vec y = linear_ref(m, S, F, w2, c2, D);
            for (std::size_t i = 0; i < y.size(); ++i) y[i] += x1[i];
            return rel_err(out[0], y);
        });
    }
}

// A ResNet-style 3x3 convolution with its bias and relu (one conv group at tier 2), batch 1
// and 8: x [N, 64, 56, 56], w [64, 64, 3, 3], padding 1. Not a goal of the issue; measured
// against the interpreter and PyTorch.
void conv(Ctx& ctx) {
    const I64 batches[] = {1, 8};
    bool any = false;
    for (I64 b : batches) any = any || selected(ctx, "conv3x3_b" + std::to_string(b));
    if (!any) return;
    constexpr I64 C = 64, O = 64, HW = 56, K = 3;
    Tensor W = weight({O, C, K, K}, 51, 1.0f / std::sqrt(float(C * K * K))), B = weight({O}, 52, 0.02f);
    kiln::Graph g = kiln::trace("conv3x3", {kiln::arg("x", kiln::DType::f32, {kiln::dyn("batch"), C, HW, HW})},
                                [&](const std::vector<Var>& v) -> std::vector<Var> {
                                    return {kiln::relu(kiln::conv2d(v[0], W, B, {1, 1}, {1, 1}))};
                                });
    kiln::Function f = ctx.engine->load(g);
    const Vec w = doubles(W), bias = doubles(B);
    for (I64 n : batches) {
        const std::string name = "conv3x3_b" + std::to_string(n);
        if (!selected(ctx, name)) continue;
        std::vector<Tensor> in{Tensor::randn({n, C, HW, HW}, 60 + static_cast<std::uint64_t>(n))};
        std::vector<Tensor> out{Tensor::empty({n, O, HW, HW})};
        const double flops = 2.0 * double(n * O * HW * HW * C * K * K);
        measure(ctx, name, f, in, out, plan_for(ctx, 2000), "flops", flops, [&] {
            const Vec x = doubles(in[0]);
            Vec y(static_cast<std::size_t>(n * O * HW * HW));
            for (I64 s = 0; s < n; ++s)
                for (I64 o = 0; o < O; ++o)
                    for (I64 i = 0; i < HW; ++i)
                        for (I64 j = 0; j < HW; ++j) {
                            double acc = bias[static_cast<std::size_t>(o)];
                            for (I64 c = 0; c < C; ++c)
                                for (I64 di = 0; di < K; ++di)
                                    for (I64 dj = 0; dj < K; ++dj) {
                                        const I64 yi = i + di - 1, xj = j + dj - 1;
                                        if (yi < 0 || yi >= HW || xj < 0 || xj >= HW) continue;
                                        acc += x[static_cast<std::size_t>(((s * C + c) * HW + yi) * HW + xj)] *
                                               w[static_cast<std::size_t>(((o * C + c) * K + di) * K + dj)];
                                    }
                            y[static_cast<std::size_t>(((s * O + o) * HW + i) * HW + j)] = std::max(acc, 0.0);
                        }
            return rel_err(out[0], y);
        });
    }
}

// Per-call cost on a graph whose arithmetic is negligible: one add on f32[4].
void dispatch(Ctx& ctx) {
    if (!selected(ctx, "dispatch")) return;
    kiln::Graph g = kiln::trace("add4", {kiln::arg("x", kiln::DType::f32, {4})},
                                [](const std::vector<Var>& v) -> std::vector<Var> { return {v[0] + v[0]}; });
    kiln::Function f = ctx.engine->load(g);
    std::vector<Tensor> in{Tensor::randn({4}, 5)};
    std::vector<Tensor> out{Tensor::empty({4})};
    TimingPlan plan = plan_for(ctx, 600, 9, 15);
    plan.min_rep_ms = 20;
    const WarmInfo w = warm_up(ctx, f, [&] { f.run(in, out); });
    struct Form { const char* name; std::function<void()> call; };
    const Form forms[] = {{"dispatch_run", [&] { f.run(in, out); }}, {"dispatch_call", [&] { (void)f(in); }}};
    for (const Form& form : forms) {
        const kiln::FunctionStats before = f.stats();
        const Timing t = kiln_bench::time_calls(form.call, plan);
        const kiln::FunctionStats after = f.stats();
        int tier = 0;
        for (int k = 0; k < 3; ++k)
            if (after.calls_by_tier[static_cast<std::size_t>(k)] > before.calls_by_tier[static_cast<std::size_t>(k)]) tier = k;
        const double err = rel_err(out[0], [&] {
            Vec r = doubles(in[0]);
            for (double& v : r) v += v;
            return r;
        }());
        Result r(form.name, ctx.impl);
        r.add("ns", t.median_ms * 1e6, 5).add("p10_ns", t.p10_ms * 1e6, 5).add("p90_ns", t.p90_ms * 1e6, 5);
        r.add_int("reps", t.reps).add_int("iters", t.iters).add_int("tier", tier).add("groups", groups_by_tier(after));
        if (w.t2_call > 0) r.add_int("t2_call", w.t2_call);
        else r.add("t2_call", "n/a");
        r.add_int("threads", ctx.threads).add("err", err, 3).add("ok", err <= ctx.settings.tol ? "1" : "0");
        r.print();
        if (err > ctx.settings.tol) ++ctx.failures;
    }
}

}  // namespace

int main(int argc, char** argv) try {
    Ctx ctx;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--quick") ctx.settings.quick = true;
        else if (a == "--only" && i + 1 < argc) ctx.settings.only = argv[++i];
        else if (a == "--tol" && i + 1 < argc) ctx.settings.tol = std::stod(argv[++i]);
        else {
            std::fprintf(stderr, "usage: jit_workloads [--quick] [--only SUBSTRING] [--tol REL_ERR]\n");
            return a == "--help" || a == "-h" ? 0 : 2;
        }
    }
    kiln::Engine engine;  // kiln::Options::from_env()
    ctx.engine = &engine;
    ctx.impl = engine.options().jit ? "kiln" : "kiln_interp";
    ctx.threads = kiln_bench::threads_from_env();
    std::printf("# jit_workloads: Kiln %s, %s\n", kiln::version_string(), engine.options().to_string().c_str());
    std::fflush(stdout);

    const auto t0 = Clock::now();
    dispatch(ctx);
    chain(ctx);
    softmax_layer_norm(ctx);
    mlp(ctx);
    transformer(ctx);
    conv(ctx);

    const kiln::EngineStats es = engine.stats();
    Result r("jit_compile", ctx.impl);
    r.add_int("compiles", static_cast<I64>(es.compiles)).add("compile_ms", es.compile_ms, 5);
    r.add("mean_ms", es.compiles > 0 ? es.compile_ms / double(es.compiles) : NAN, 5);
    // Per group: its mean tier-2 (LLVM) compile time; then the median and the largest of those.
    std::vector<double> per_group;
    for (const auto& [key, c] : ctx.t2_compiles) per_group.push_back(c.second / static_cast<double>(c.first));
    std::sort(per_group.begin(), per_group.end());
    const std::size_t ng = per_group.size();
    r.add_int("t2_groups", static_cast<I64>(ng));
    r.add("t2_group_median_ms", ng ? (ng % 2 ? per_group[ng / 2] : 0.5 * (per_group[ng / 2 - 1] + per_group[ng / 2])) : NAN, 5);
    r.add("t2_group_max_ms", ng ? per_group.back() : NAN, 5);
    r.add_int("failures", static_cast<I64>(es.compile_failures)).add_int("specializations", static_cast<I64>(es.specializations));
    r.add_int("guard_failures", static_cast<I64>(es.guard_failures)).add_int("deopts", static_cast<I64>(es.deopts));
    r.add_int("calls_t0", static_cast<I64>(es.calls_by_tier[0])).add_int("calls_t1", static_cast<I64>(es.calls_by_tier[1]));
    r.add_int("calls_t2", static_cast<I64>(es.calls_by_tier[2])).add_int("threads", ctx.threads);
    r.add("total_s", kiln_bench::ms_since(t0) / 1000.0, 4);
    r.print();
    if (ctx.failures != 0) {
        std::fprintf(stderr, "jit_workloads: %d result(s) differ from the reference\n", ctx.failures);
        return 1;
    }
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "jit_workloads: error: %s\n", e.what());
    return 1;
}
