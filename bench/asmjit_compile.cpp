// asmjit_compile: tier 1 (asmjit) measured through the Tier interface on lowered groups.
//
//   usage: asmjit_compile [--quick]
//
// 1. Compile latency per group: every group of a set of graphs (the elementwise chain
//    gelu_tanh(a*b+c)*sigmoid(a), flat and with a broadcast row; softmax, log_softmax,
//    layer_norm, rms_norm, sum, max rows; softmax(layer_norm); random elementwise graphs)
//    is compiled many times; the median and 90th percentile per kind, in microseconds (and
//    tier 2's, when the build has LLVM, for comparison).
// 2. Kernel time, one thread: the chain on 16M floats (1M with --quick) and
//    softmax(layer_norm(x)) on [4096, 1024] ([1024, 1024]), run by tier 1, by tier 2 (when
//    built) and by the interpreter (kiln::Engine with the JIT off, KILN_NUM_THREADS=1
//    semantics: one thread), median of repeated runs, with the ratios.
// Results are checked against the interpreter (max relative difference printed).
#include "bench_util.h"

#include "jit/exec/shape_plan.h"
#include "src/ir/ir.h"
#include "jit/exec/pipeline.h"
#include "src/passes/fuse.h"
#include "tiers/asmjit/asmjit_tier.h"
#if defined(KILN_HAVE_LLVM)
#include "tiers/llvm/llvm_tier.h"
#endif

#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <time.h>

namespace {

using kiln::DType;
using kiln::Tensor;
using kiln::Var;
using I64 = std::int64_t;
using Body = std::function<std::vector<Var>(const std::vector<Var>&)>;

struct Lowered {
    std::string kind;
    kiln::kir::Kernel kernel;
};

std::vector<Lowered> lower_all(const kiln::Graph& kg, const std::string& kind) {
    std::vector<Lowered> out;
    for (const auto& gr : kiln::jit::lower_function(kg.impl())->groups)
        if (gr->kernel) out.push_back({kind, *gr->kernel});
    return out;
}

Body chain() {
    return [](const std::vector<Var>& in) -> std::vector<Var> {
        return {kiln::gelu(in[0] * in[1] + in[2], true) * kiln::sigmoid(in[0])};
    };
}

kiln::Graph chain_graph() {
    return kiln::trace("chain", {kiln::arg("a", DType::f32, {kiln::dyn("n")}), kiln::arg("b", DType::f32, {kiln::dyn("n")}),
                                 kiln::arg("c", DType::f32, {kiln::dyn("n")})}, chain());
}

kiln::Graph row_graph(const Body& body) {
    return kiln::trace("rows", {kiln::arg("x", DType::f32, {kiln::dyn("r"), kiln::dyn("c")}), kiln::arg("g", DType::f32, {kiln::dyn("c")}),
                                kiln::arg("b", DType::f32, {kiln::dyn("c")})}, body);
}

kiln::Graph random_graph(std::uint64_t seed) {
    const Body body = [seed](const std::vector<Var>& in) -> std::vector<Var> {
        std::mt19937_64 r(seed);
        std::vector<Var> pool = in;
        const int ops = 3 + static_cast<int>(r() % 8);
        for (int i = 0; i < ops; ++i) {
            Var a = pool[r() % pool.size()], b = pool[r() % pool.size()];
            switch (r() % 8) {
            case 0: pool.push_back(a + b); break;
            case 1: pool.push_back(a * b); break;
            case 2: pool.push_back(kiln::maximum(a, b)); break;
            case 3: pool.push_back(kiln::tanh(a)); break;
            case 4: pool.push_back(kiln::exp(a) - b); break;
            case 5: pool.push_back(kiln::sigmoid(a) * b); break;
            case 6: pool.push_back(kiln::where(a > b, a, b)); break;
            default: pool.push_back(kiln::relu(a) / (kiln::abs(b) + 1.0)); break;
            }
        }
        return {pool.back()};
    };
    return kiln::trace("rand", {kiln::arg("x", DType::f32, {kiln::dyn("r"), kiln::dyn("c")}), kiln::arg("y", DType::f32, {kiln::dyn("c")}),
                                kiln::arg("z", DType::f32, {kiln::dyn("r"), kiln::dyn("c")})}, body);
}

// CPU time of this thread, in microseconds (robust against other processes on the machine).
double thread_cpu_us() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

struct Stats {
    double median = 0, p90 = 0;
};
Stats stats(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return {kiln_bench::percentile(v, 0.5), kiln_bench::percentile(v, 0.9)};
}

// ---- kernel runs on real buffers ----

struct GroupRun {
    kiln::kir::Kernel kernel;
    std::vector<Tensor> bufs;  // inputs then outputs
    std::vector<void*> ptrs;
    std::vector<I64> params;
    I64 extent = 0;
};

GroupRun prepare(const kiln::Graph& kg, const std::vector<Tensor>& inputs) {
    const auto plan = kiln::jit::lower_function(kg.impl());
    if (plan->groups.size() != 1) throw std::runtime_error("expected one group");
    const auto& gr = plan->groups[0]->group;
    const auto& k = plan->groups[0]->kernel;
    if (!k) throw std::runtime_error("not lowered: " + plan->groups[0]->lower_failure);
    std::vector<kiln::Shape> shapes;
    for (const auto& t : inputs) shapes.push_back(t.shape());
    auto sp = kiln::jit::make_shape_plan(*plan, shapes, "bench");
    GroupRun r;
    r.kernel = *k;
    for (auto v : gr.inputs) r.bufs.push_back(inputs[static_cast<std::size_t>(plan->arg_index[static_cast<std::size_t>(v)])]);
    for (auto v : gr.outputs) r.bufs.push_back(Tensor::empty(sp->shapes[static_cast<std::size_t>(v)], DType::f32));
    for (auto& t : r.bufs) r.ptrs.push_back(t.data());
    for (const auto& src : r.kernel.param_sources)
        r.params.push_back(r.bufs[static_cast<std::size_t>(src.buffer)].shape()[static_cast<std::size_t>(src.dim)]);
    r.extent = kiln::kir::eval_index(r.kernel.extent, r.params.data());
    return r;
}

double time_kernel(GroupRun& r, kiln::tiers::KernelFn fn, const kiln_bench::TimingPlan& plan) {
    auto body = [&] { fn(r.ptrs.data(), r.params.data(), 0, r.extent); };
    body();
    return kiln_bench::time_calls(body, plan).median_ms;
}

double max_rel(const Tensor& a, const Tensor& b) {
    auto x = a.to_doubles(), y = b.to_doubles();
    double m = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (std::isnan(x[i]) && std::isnan(y[i])) continue;
        m = std::max(m, std::fabs(x[i] - y[i]) / (1.0 + std::fabs(y[i])));
    }
    return m;
}

void run_workload(const char* name, const kiln::Graph& kg, const std::vector<Tensor>& inputs, kiln::tiers::Tier& t1,
                  kiln::tiers::Tier* t2, const kiln_bench::TimingPlan& plan) {
    GroupRun r = prepare(kg, inputs);
    // The interpreter, one thread, through the engine with the JIT off.
    kiln::Options o;
    o.jit = false;
    o.num_threads = 1;
    o.async_compile = false;
    kiln::Engine engine(o);
    kiln::Function f = engine.load(kg);
    std::vector<Tensor> out = {Tensor::empty(r.bufs.back().shape(), DType::f32)};
    auto interp = [&] { f.run(inputs, out); };
    interp();
    const double t_interp = kiln_bench::time_calls(interp, plan).median_ms;

    auto c1 = t1.compile(r.kernel, {});
    if (c1.bailout != kiln::tiers::Bailout::none) {
        std::printf("%-28s tier 1 bailed out: %s\n", name, c1.detail.c_str());
        return;
    }
    const auto rep = kiln::tiers::asmjit_loop_report(r.kernel);
    const double t_1 = time_kernel(r, kiln::tiers::host_entry(*c1.kernel), plan);
    const double err1 = max_rel(r.bufs.back(), out[0]);
    double t_2 = NAN, err2 = NAN;
    if (t2) {
        auto c2 = t2->compile(r.kernel, {});
        if (c2.bailout == kiln::tiers::Bailout::none) {
            t_2 = time_kernel(r, kiln::tiers::host_entry(*c2.kernel), plan);
            err2 = max_rel(r.bufs.back(), out[0]);
        }
    }
    std::printf("%-28s %10.3f %10.3f %10.3f %9.2fx %9.2fx   %d/%d   %.1e / %.1e\n", name, t_interp, t_1, t_2, t_interp / t_1,
                t_2 / t_1, rep.vector_loops, rep.vector_loops + rep.scalar_loops, err1, err2);
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    if (!kiln::tiers::asmjit_available()) {
        std::printf("asmjit_compile: this host cannot run tier-1 code (x86-64 with AVX2 and FMA needed)\n");
        return 0;
    }
    auto t1 = kiln::tiers::make_asmjit_tier();
    std::unique_ptr<kiln::tiers::Tier> t2;
#if defined(KILN_HAVE_LLVM)
    t2 = kiln::tiers::make_llvm_tier();
#endif

    // ---- 1. compile latency ----
    std::vector<Lowered> ks;
    auto add = [&](const kiln::Graph& g, const std::string& kind) {
        for (auto& l : lower_all(g, kind)) ks.push_back(std::move(l));
    };
    add(chain_graph(), "elementwise chain");
    add(kiln::trace("chain2", {kiln::arg("a", DType::f32, {kiln::dyn("r"), kiln::dyn("c")}), kiln::arg("b", DType::f32, {kiln::dyn("r"), kiln::dyn("c")}),
                               kiln::arg("c", DType::f32, {kiln::dyn("c")})}, chain()),
        "chain, broadcast row");
    add(row_graph([](const std::vector<Var>& in) -> std::vector<Var> { return {kiln::softmax(in[0], -1)}; }), "softmax");
    add(row_graph([](const std::vector<Var>& in) -> std::vector<Var> { return {kiln::log_softmax(in[0], -1)}; }), "log_softmax");
    add(row_graph([](const std::vector<Var>& in) -> std::vector<Var> { return {kiln::layer_norm(in[0], in[1], in[2], 1e-5)}; }), "layer_norm");
    add(row_graph([](const std::vector<Var>& in) -> std::vector<Var> { return {kiln::rms_norm(in[0], in[1], 1e-6)}; }), "rms_norm");
    add(row_graph([](const std::vector<Var>& in) -> std::vector<Var> { return {kiln::sum(in[0], -1)}; }), "sum");
    add(row_graph([](const std::vector<Var>& in) -> std::vector<Var> { return {kiln::max(in[0], -1)}; }), "max");
    add(row_graph([](const std::vector<Var>& in) -> std::vector<Var> {
            return {kiln::softmax(kiln::layer_norm(in[0], in[1], in[2], 1e-5), -1)};
        }),
        "softmax(layer_norm)");
    for (std::uint64_t s = 0; s < (quick ? 10u : 40u); ++s) add(random_graph(1000 + s), "random elementwise");

    const int reps = quick ? 10 : 50;
    std::map<std::string, std::vector<double>> us1, cpu1, ms2;
    std::vector<std::string> order;
    std::vector<double> all1, allcpu;
    for (int rep = 0; rep < reps; ++rep)
        for (const auto& l : ks) {
            if (std::find(order.begin(), order.end(), l.kind) == order.end()) order.push_back(l.kind);
            const double c0 = thread_cpu_us();
            auto r = t1->compile(l.kernel, {});
            const double cpu = thread_cpu_us() - c0;
            cpu1[l.kind].push_back(cpu);
            allcpu.push_back(cpu);
            if (r.bailout != kiln::tiers::Bailout::none) {
                std::printf("tier 1 bailed out on a %s group: %s\n", l.kind.c_str(), r.detail.c_str());
                return 1;
            }
            us1[l.kind].push_back(r.compile_ms * 1000.0);
            all1.push_back(r.compile_ms * 1000.0);
            if (t2 && rep < 3) {
                auto r2 = t2->compile(l.kernel, {});
                if (r2.bailout == kiln::tiers::Bailout::none) ms2[l.kind].push_back(r2.compile_ms);
            }
        }
    std::printf("Compile latency per group (%d compiles of each; tier 2 from 3):\n", reps);
    std::printf("(wall: CompileResult::compile_ms; cpu: this thread's CPU time, unaffected by other processes)\n");
    std::printf("%-24s %6s %13s %11s %12s %10s %14s\n", "group kind", "groups", "t1 wall med", "wall p90", "t1 cpu med",
                "cpu p90", "t2 median ms");
    for (const auto& kind : order) {
        const Stats s = stats(us1[kind]), c = stats(cpu1[kind]);
        const double m2 = ms2[kind].empty() ? NAN : stats(ms2[kind]).median;
        std::printf("%-24s %6zu %10.1f us %8.1f us %9.1f us %7.1f us %14.2f\n", kind.c_str(),
                    us1[kind].size() / static_cast<std::size_t>(reps), s.median, s.p90, c.median, c.p90, m2);
    }
    const Stats sa = stats(all1), ca = stats(allcpu);
    std::printf("%-24s %6zu %10.1f us %8.1f us %9.1f us %7.1f us\n\n", "all groups", ks.size(), sa.median, sa.p90, ca.median, ca.p90);

    // ---- 2. kernel time ----
    kiln_bench::TimingPlan plan;
    plan.budget_ms = quick ? 300 : 1500;
    const I64 n = quick ? (1 << 20) : (1 << 24);
    const I64 rows = quick ? 1024 : 4096, cols = 1024;
    std::printf("Kernel time, one thread, median ms (vector loops: of the kernel's loops; err: max rel. diff vs interpreter):\n");
    std::printf("%-28s %10s %10s %10s %10s %10s   %s   %s\n", "workload", "interp", "tier1", "tier2", "t1/interp", "t1/t2", "vec",
                "err t1 / t2");
    {
        std::vector<Tensor> in = {Tensor::randn({n}, 1), Tensor::randn({n}, 2), Tensor::randn({n}, 3)};
        const std::string name = "chain [" + std::to_string(n) + "]";
        run_workload(name.c_str(), chain_graph(), in, *t1, t2.get(), plan);
    }
    {
        std::vector<Tensor> in = {Tensor::randn({rows, cols}, 4), Tensor::randn({cols}, 5), Tensor::randn({cols}, 6)};
        const std::string name = "softmax(layer_norm) [" + std::to_string(rows) + "," + std::to_string(cols) + "]";
        run_workload(name.c_str(),
                     row_graph([](const std::vector<Var>& x) -> std::vector<Var> {
                         return {kiln::softmax(kiln::layer_norm(x[0], x[1], x[2], 1e-5), -1)};
                     }),
                     in, *t1, t2.get(), plan);
    }
    std::printf("(t1/interp: how many times faster tier 1 is than the interpreter; t1/t2: tier 2's time over tier 1's)\n");
    return 0;
}
