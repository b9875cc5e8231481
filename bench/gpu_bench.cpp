// The GPU tier's benchmark (needs an NVIDIA GPU; prints why it stops otherwise):
//   - the device's copy bandwidth (device to device, bytes read + written), measured here;
//   - NVRTC compile latency per group (generic and specialised) of the workloads below:
//     median and largest;
//   - launch overhead: calls of a one-kernel function on 16 floats (call, launch, sync);
//   - the elementwise chain on 16M floats and softmax(layer_norm) on [4096,1024] at tier 2,
//     as a fraction of the copy bandwidth;
//   - the MLP (784-1024-1024-10) and the transformer block (d 256) per call, after tier-up,
//     and 3x3 convolutions with bias and relu (64 -> 64 channels on 8 x 56 x 56; depthwise
//     on 8 x 128 x 56 x 56), for bench/torch_gpu.py to put beside PyTorch eager on the same GPU.
// All times are medians of repeated calls, each ending when its outputs are ready.
#include <kiln/kiln.h>

#include "jit/exec/pipeline.h"
#include "src/core/gpu/runtime.h"
#include "tiers/gpu/gpu_tier.h"
#include "workloads.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

using namespace kiln;
using Clock = std::chrono::steady_clock;

namespace {

double median_ms(int reps, const std::function<void()>& fn) {
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        const auto t0 = Clock::now();
        fn();
        t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

double copy_bandwidth_gbs() {
    const std::size_t bytes = std::size_t{1} << 30;
    Tensor a = Tensor::zeros({static_cast<std::int64_t>(bytes / 4)}, DType::f32, Device::cuda(0));
    Tensor b = Tensor::empty({static_cast<std::int64_t>(bytes / 4)}, DType::f32, Device::cuda(0));
    const double ms = median_ms(10, [&] { core::gpu::copy(Device::cuda(0), core::gpu::CopyKind::device_to_device, b.data(), a.data(), bytes); });
    return 2.0 * double(bytes) / (ms * 1e6);
}

Options tiered() {
    Options o;
    o.async_compile = false;
    o.tier1_threshold = 1;
    o.tier2_threshold = 2;
    o.tierup = "count";
    return o;
}

// Calls f until its groups run their specialised code, then the median time of `reps` calls.
double steady_ms(Function& f, const std::vector<Tensor>& in, int reps) {
    for (int i = 0; i < 4; ++i) f(in);
    return median_ms(reps, [&] { f(in); });
}

// NVRTC's time for the generic kernel of every group (what tier 1 on the device compiles).
void compile_latency(const std::vector<Graph>& graphs) {
    std::string why;
    auto tier = tiers::gpu::make_gpu_tier(Device::cuda(0), &why);
    std::vector<double> ms;
    for (const Graph& g : graphs) {
        const auto exe = jit::lower_function(g.impl());  // kept alive: the loop reads its groups
        for (const auto& gr : exe->groups) {
            if (!gr->kernel) continue;
            kir::Specialization none{std::vector<std::optional<std::int64_t>>(gr->kernel->params.size())};
            auto r = tier->compile(*gr->kernel, none);
            if (r.kernel) ms.push_back(r.compile_ms);
            else std::printf("  %s: no code: %s\n", gr->group.name.c_str(), r.detail.c_str());
        }
    }
    if (ms.empty()) return;
    std::sort(ms.begin(), ms.end());
    std::printf("nvrtc compile + load, generic kernels: %zu groups, median %.1f ms, largest %.1f ms\n", ms.size(),
                ms[ms.size() / 2], ms.back());
}

}  // namespace

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it is printed, also into a pipe
    std::string why;
    if (!tiers::gpu::gpu_tier_available(Device::cuda(0), &why)) {
        std::printf("gpu_bench: no usable CUDA device: %s\n", why.c_str());
        return 0;
    }
    const auto& info = core::gpu::device_info(Device::cuda(0));
    std::printf("device: %s, %s, %d SMs, driver %d\n", info.name.c_str(), info.arch.c_str(), info.sm_count,
                core::gpu::status(Device::Kind::cuda).driver_version);
    const double bw = copy_bandwidth_gbs();
    std::printf("copy bandwidth (device to device, read + write): %.0f GB/s\n", bw);

    Engine e(tiered());
    const Device cuda = Device::cuda(0);

    // Launch overhead of a one-kernel function.
    {
        Graph g = trace("one", {arg("x", DType::f32, {16})},
                        [](const std::vector<Var>& v) -> std::vector<Var> { return {v[0] * 2.0}; });
        Function f = e.load(g);
        std::vector<Tensor> in{Tensor::randn({16}, 1).to(cuda)};
        const double ms = steady_ms(f, in, 2000);
        std::printf("one-kernel call (16 floats, launch + sync): %.1f us, tier %d\n", ms * 1e3,
                    f.stats().groups[0].gpu_tier);
    }
    // The elementwise chain on 16M floats.
    {
        const std::int64_t n = std::int64_t{1} << 24;
        Graph g = trace("chain", {arg("a", DType::f32, {dyn("n")}), arg("b", DType::f32, {dyn("n")}), arg("c", DType::f32, {dyn("n")})},
                        [](const std::vector<Var>& v) -> std::vector<Var> {
                            return {gelu(v[0] * v[1] + v[2], true) * sigmoid(v[0])};
                        });
        Function f = e.load(g);
        std::vector<Tensor> in{Tensor::randn({n}, 1).to(cuda), Tensor::randn({n}, 2).to(cuda), Tensor::randn({n}, 3).to(cuda)};
        const double ms = steady_ms(f, in, 50);
        const double gbs = 16.0 * double(n) / (ms * 1e6);
        std::printf("chain 16M f32: %.3f ms, %.0f GB/s = %.2f of copy bandwidth\n", ms, gbs, gbs / bw);
    }
    // softmax(layer_norm) on [4096, 1024].
    {
        const std::int64_t m = 4096, d = 1024;
        Tensor gamma = kiln_bench::weight({d}, 11, 0.1f, 1.0f), beta = kiln_bench::weight({d}, 12, 0.1f);
        Graph g = trace("softmax_ln", {arg("x", DType::f32, {dyn("rows"), d})},
                        [&](const std::vector<Var>& v) -> std::vector<Var> { return {softmax(layer_norm(v[0], gamma, beta), -1)}; });
        Function f = e.load(g);
        std::vector<Tensor> in{Tensor::randn({m, d}, 10).to(cuda)};
        const double ms = steady_ms(f, in, 50);
        const double gbs = 8.0 * double(m * d) / (ms * 1e6);
        std::printf("softmax(layer_norm) [4096,1024] f32: %.3f ms, %.0f GB/s = %.2f of copy bandwidth\n", ms, gbs, gbs / bw);
    }
    // The MLP and the transformer block.
    kiln_bench::Mlp mlp = kiln_bench::make_mlp();
    kiln_bench::Transformer tb = kiln_bench::make_transformer();
    {
        Function f = e.load(mlp.graph);
        for (std::int64_t b : {1, 32, 256}) {
            std::vector<Tensor> in{Tensor::randn({b, kiln_bench::Mlp::d0}, 5).to(cuda)};
            const double ms = steady_ms(f, in, 100);
            std::printf("mlp batch %lld: %.3f ms (%.0f GFLOP/s)\n", static_cast<long long>(b), ms,
                        kiln_bench::Mlp::flops(b) / (ms * 1e6));
        }
    }
    {
        Function f = e.load(tb.graph);
        for (std::int64_t s : {16, 128, 512}) {
            std::vector<Tensor> in{Tensor::randn({1, s, kiln_bench::Transformer::D}, 6).to(cuda)};
            const double ms = steady_ms(f, in, 50);
            std::printf("transformer block seq %lld: %.3f ms (%.0f GFLOP/s)\n", static_cast<long long>(s), ms,
                        kiln_bench::Transformer::flops(s) / (ms * 1e6));
        }
        const FunctionStats st = f.stats();
        std::printf("transformer stats: gpu_compiles %llu, gpu_compile_ms %.1f, launches %llu\n",
                    static_cast<unsigned long long>(st.gpu_compiles), st.gpu_compile_ms,
                    static_cast<unsigned long long>(st.gpu_launches));
    }
    // 3x3 convolutions, padded, with bias and relu (weights constant, as a model's).
    for (const std::int64_t groups : {std::int64_t{1}, std::int64_t{128}}) {
        const std::int64_t n = 8, c = groups == 1 ? 64 : 128, hw = 56;
        Tensor w = kiln_bench::weight({c, c / groups, 3, 3}, 31, 0.05f), b = kiln_bench::weight({c}, 32, 0.02f);
        Graph g = trace("conv", {arg("x", DType::f32, {dyn("N"), c, hw, hw})}, [&](const std::vector<Var>& v) -> std::vector<Var> {
            return {relu(conv2d(v[0], w, b, {1, 1}, {1, 1}, {1, 1}, groups))};
        });
        Function f = e.load(g);
        std::vector<Tensor> in{Tensor::randn({n, c, hw, hw}, 7).to(cuda)};
        const double ms = steady_ms(f, in, 50);
        const double flops = 2.0 * double(n * c * (c / groups) * 9 * hw * hw);
        std::printf("conv3x3 %s [%lld,%lld,%lld,%lld]: %.3f ms (%.0f GFLOP/s)\n", groups == 1 ? "dense" : "depthwise",
                    static_cast<long long>(n), static_cast<long long>(c), static_cast<long long>(hw), static_cast<long long>(hw), ms,
                    flops / (ms * 1e6));
    }
    compile_latency({mlp.graph, tb.graph});
    std::printf("engine: %s\n", e.stats().to_json().c_str());
    return 0;
}
