// interp_kernels: the interpreter's (tier 0) matmul and conv2d throughput, in GFLOP/s, and with
// --tier 1 or 2 that of the same graphs compiled at that tier alone.
//
//   usage: interp_kernels [--quick] [--dtype f32|f64] [--tier 0|1|2] [--only SUBSTRING]
//
// A model's first calls run on the interpreter, so its GEMM and convolution kernels set the
// first-call latency. Each shape is one graph with one op, run through an engine with the JIT
// off (Options::jit = false), on inputs made once; the time per call includes the
// interpreter's per-call work (negligible at these sizes). Shapes:
//   matmul  MxKxN: 1x784x1024 (a batch-1 dense layer), 4x, 8x and 61x784x1024 (a few rows,
//                  and batches that leave rows beside the register tiles), 128x256x1024, 512x512x512,
//                  128x768x3072 (a bert-base FFN layer at sequence length 128)
//   conv2d        : resnet18's 64ch 56x56, 256ch 14x14 and 512ch 7x7 3x3 (pad 1), its
//                  stride-2 3x3 (64 -> 128 at 56x56, 256 -> 512 at 14x14) and 1x1 downsample, its stem
//                  (7x7 stride 2, 3 -> 64 channels, 224x224), squeezenet1_1's stem (3x3 stride 2,
//                  a depth of 27), mobilenet_v2's 32ch 112x112 3x3
//                  depthwise and 144ch 56x56 3x3 depthwise stride 2, and a 1x1 conv
//                  (64 -> 256 channels, 56x56); mobilenet_v2's and efficientnet_b0's stems,
//                  small-plane depthwise layers and 1x1 layers from 112x112 down to 7x7,
//                  efficientnet_b0's depthwise layers with SiLU (3x3 at 56x56, 5x5 at 28, 14, 7)
// GFLOP/s counts 2 flops per multiply-add (bias and padding not counted). Set
// KILN_NUM_THREADS=1 for single-core figures. --cold evicts the caches before each timed call
// (single calls, median), as a model's layer finds them. Timing: after a warm-up call, repetitions of
// calibrated batches of calls (at least ~20 ms each); reported are the medians of the wall
// time and of the process CPU time per call. On one thread the CPU time is the work of that
// thread and does not count the time the process waited for a core, so on a shared, loaded
// machine "GFLOP/s (cpu)" is the figure to compare; with several threads, use the wall
// time. Prints one `RESULT` line per shape (bench/bench_util.h) and a table.
#include <kiln/kiln.h>

#include "bench_util.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

using kiln::DType;
using kiln::Tensor;
using kiln::Var;

struct Case {
    std::string name;
    kiln::Graph graph;
    std::vector<Tensor> inputs;
    double flops = 0;
};

Case matmul_case(std::int64_t m, std::int64_t k, std::int64_t n, DType dt) {
    Tensor a = Tensor::randn({m, k}, 1, dt), b = Tensor::randn({k, n}, 2, dt);
    kiln::Graph g = kiln::trace("mm", {kiln::arg("a", dt, {m, k}), kiln::arg("b", dt, {k, n})},
                                [](const std::vector<Var>& in) -> Var { return kiln::matmul(in[0], in[1]); });
    const std::string name = "matmul_" + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);
    return {name, g, {a, b}, 2.0 * double(m) * double(k) * double(n)};
}

Case conv_case(const std::string& name, std::int64_t c_in, std::int64_t c_out, std::int64_t hw, std::int64_t ksize,
               std::int64_t stride, std::int64_t pad, std::int64_t groups, DType dt, bool silu = false) {
    Tensor x = Tensor::randn({1, c_in, hw, hw}, 3, dt), w = Tensor::randn({c_out, c_in / groups, ksize, ksize}, 4, dt);
    Tensor b = Tensor::randn({c_out}, 5, dt);
    kiln::Graph g = kiln::trace("conv",
                                {kiln::arg("x", dt, {1, c_in, hw, hw}), kiln::arg("w", dt, {c_out, c_in / groups, ksize, ksize}),
                                 kiln::arg("b", dt, {c_out})},
                                [&](const std::vector<Var>& in) -> Var {
                                    Var y = kiln::conv2d(in[0], in[1], in[2], {stride, stride}, {pad, pad}, {1, 1}, groups);
                                    return silu ? y * kiln::sigmoid(y) : y;  // SiLU (efficientnet)
                                });
    const std::int64_t out_hw = (hw + 2 * pad - ksize) / stride + 1;
    const double macs = double(c_out) * double(out_hw * out_hw) * double(c_in / groups) * double(ksize * ksize);
    return {name, g, {x, w, b}, 2.0 * macs};
}

double cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

struct Times {
    double wall_ms = 0, cpu_ms = 0;
};

// Medians over `reps` repetitions of the wall and CPU time per call, in ms.
template <class F> Times time_calls(F&& body, int reps, double min_rep_ms) {
    std::int64_t iters = 1;
    for (;;) {  // calibrate on CPU time
        const double c0 = cpu_seconds();
        for (std::int64_t i = 0; i < iters; ++i) body();
        if ((cpu_seconds() - c0) * 1e3 >= min_rep_ms || iters >= (std::int64_t{1} << 20)) break;
        iters *= 2;
    }
    std::vector<double> wall, cpu;
    for (int r = 0; r < reps; ++r) {
        const auto w0 = kiln_bench::Clock::now();
        const double c0 = cpu_seconds();
        for (std::int64_t i = 0; i < iters; ++i) body();
        cpu.push_back((cpu_seconds() - c0) * 1e3 / double(iters));
        wall.push_back(kiln_bench::ms_since(w0) / double(iters));
    }
    std::sort(wall.begin(), wall.end());
    std::sort(cpu.begin(), cpu.end());
    return {kiln_bench::percentile(wall, 0.5), kiln_bench::percentile(cpu, 0.5)};
}

// --cold: medians over `reps` single calls, each after writing a buffer larger than the
// last-level cache, so that the call finds its inputs and weights in memory, not in cache,
// as a layer of a model does (its weights were last read one call earlier, behind the
// whole model's).
template <class F> Times time_cold(F&& body, int reps) {
    static std::vector<char> evict(std::size_t{256} << 20);
    std::vector<double> wall, cpu;
    for (int r = 0; r < reps; ++r) {
        for (std::size_t i = 0; i < evict.size(); i += 64) evict[i] = static_cast<char>(evict[i] + 1);
        const auto w0 = kiln_bench::Clock::now();
        const double c0 = cpu_seconds();
        body();
        cpu.push_back((cpu_seconds() - c0) * 1e3);
        wall.push_back(kiln_bench::ms_since(w0));
    }
    std::sort(wall.begin(), wall.end());
    std::sort(cpu.begin(), cpu.end());
    return {kiln_bench::percentile(wall, 0.5), kiln_bench::percentile(cpu, 0.5)};
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false, cold = false;
    int tier = 0;
    std::string only;  // --only: the shapes whose name contains it
    DType dt = DType::f32;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--quick") == 0) quick = true;
        else if (std::strcmp(argv[i], "--cold") == 0) cold = true;
        else if (std::strcmp(argv[i], "--tier") == 0 && i + 1 < argc) tier = std::atoi(argv[++i]);
        else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
        else if (std::strcmp(argv[i], "--dtype") == 0 && i + 1 < argc) {
            const std::string d = argv[++i];
            dt = d == "f64" ? DType::f64 : d == "f16" ? DType::f16 : DType::f32;
        } else {
            std::fprintf(stderr, "usage: interp_kernels [--quick] [--cold] [--dtype f32|f64|f16] [--tier 0|1|2] [--only SUBSTRING]\n");
            return 2;
        }
    }
    kiln::Options opt = kiln::Options::from_env();
    // --tier 1 or 2: the same graphs compiled at that tier alone (after the first call), to
    // compare with the interpreter's kernels.
    opt.jit = tier > 0;
    opt.tierup = "count";
    opt.async_compile = false;
    opt.tier1_threshold = tier == 1 ? 1 : std::int64_t{1} << 40;
    opt.tier2_threshold = tier == 2 ? 1 : std::int64_t{1} << 40;
    kiln::Engine engine(opt);
    const std::string impl = tier == 0 ? "kiln_interp" : "kiln_tier" + std::to_string(tier);
    const int threads = kiln_bench::threads_from_env();
    const std::string dname(kiln::dtype_name(dt));
    std::printf("Kiln %s %s kernels, dtype %s, %d thread(s)\n", kiln::version_string(),
                tier == 0 ? "interpreter" : ("tier-" + std::to_string(tier)).c_str(), dname.c_str(), threads);

    std::vector<Case> cases;
    cases.push_back(matmul_case(1, 784, 1024, dt));
    cases.push_back(matmul_case(4, 784, 1024, dt));
    cases.push_back(matmul_case(8, 784, 1024, dt));
    cases.push_back(matmul_case(61, 784, 1024, dt));
    cases.push_back(matmul_case(128, 256, 1024, dt));
    cases.push_back(matmul_case(512, 512, 512, dt));
    cases.push_back(matmul_case(128, 768, 3072, dt));
    cases.push_back(conv_case("conv_resnet18_64c56_3x3", 64, 64, 56, 3, 1, 1, 1, dt));
    cases.push_back(conv_case("conv_resnet18_128c28_3x3", 128, 128, 28, 3, 1, 1, 1, dt));
    cases.push_back(conv_case("conv_resnet18_256c14_3x3", 256, 256, 14, 3, 1, 1, 1, dt));
    cases.push_back(conv_case("conv_resnet18_512c7_3x3", 512, 512, 7, 3, 1, 1, 1, dt));
    cases.push_back(conv_case("conv_resnet18_64to128c56_3x3s2", 64, 128, 56, 3, 2, 1, 1, dt));
    cases.push_back(conv_case("conv_resnet18_256to512c14_3x3s2", 256, 512, 14, 3, 2, 1, 1, dt));
    cases.push_back(conv_case("conv_resnet18_64to128c56_1x1s2", 64, 128, 56, 1, 2, 0, 1, dt));
    cases.push_back(conv_case("conv_resnet18_stem_7x7s2", 3, 64, 224, 7, 2, 3, 1, dt));
    cases.push_back(conv_case("conv_squeezenet_stem_3x3s2", 3, 64, 224, 3, 2, 0, 1, dt));
    cases.push_back(conv_case("conv_mbv2_dw32c112_3x3", 32, 32, 112, 3, 1, 1, 32, dt));
    cases.push_back(conv_case("conv_mbv2_dw144c56_3x3s2", 144, 144, 56, 3, 2, 1, 144, dt));
    cases.push_back(conv_case("conv_mbv2_dw96c112_3x3s2", 96, 96, 112, 3, 2, 1, 96, dt));
    cases.push_back(conv_case("conv_mbv2_dw144c56_3x3", 144, 144, 56, 3, 1, 1, 144, dt));
    cases.push_back(conv_case("conv_mbv2_dw576c14_3x3", 576, 576, 14, 3, 1, 1, 576, dt));
    cases.push_back(conv_case("conv_mbv2_dw960c7_3x3", 960, 960, 7, 3, 1, 1, 960, dt));
    cases.push_back(conv_case("conv_effnet_dw144c56_3x3_silu", 144, 144, 56, 3, 1, 1, 144, dt, true));
    cases.push_back(conv_case("conv_effnet_dw240c28_5x5", 240, 240, 28, 5, 1, 2, 240, dt));
    cases.push_back(conv_case("conv_effnet_dw240c28_5x5_silu", 240, 240, 28, 5, 1, 2, 240, dt, true));
    cases.push_back(conv_case("conv_effnet_dw672c14_5x5_silu", 672, 672, 14, 5, 1, 2, 672, dt, true));
    cases.push_back(conv_case("conv_effnet_dw1152c7_5x5_silu", 1152, 1152, 7, 5, 1, 2, 1152, dt, true));
    cases.push_back(conv_case("conv_1x1_64to256c56", 64, 256, 56, 1, 1, 0, 1, dt));
    cases.push_back(conv_case("conv_mbv2_stem_3x3s2", 3, 32, 224, 3, 2, 1, 1, dt));
    cases.push_back(conv_case("conv_mbv2_1x1_16to96c112", 16, 96, 112, 1, 1, 0, 1, dt));
    cases.push_back(conv_case("conv_effnet_1x1_16to96c112_silu", 16, 96, 112, 1, 1, 0, 1, dt, true));
    cases.push_back(conv_case("conv_mbv2_1x1_32to16c112", 32, 16, 112, 1, 1, 0, 1, dt));
    cases.push_back(conv_case("conv_mbv2_1x1_24to144c56", 24, 144, 56, 1, 1, 0, 1, dt));
    cases.push_back(conv_case("conv_mbv2_1x1_96to24c56", 96, 24, 56, 1, 1, 0, 1, dt));
    cases.push_back(conv_case("conv_effnet_1x1_80to480c14", 80, 480, 14, 1, 1, 0, 1, dt));
    cases.push_back(conv_case("conv_effnet_1x1_192to1152c7", 192, 1152, 7, 1, 1, 0, 1, dt));
    cases.push_back(conv_case("conv_effnet_1x1_192to1152c7_silu", 192, 1152, 7, 1, 1, 0, 1, dt, true));
    cases.push_back(conv_case("conv_effnet_1x1_80to480c14_silu", 80, 480, 14, 1, 1, 0, 1, dt, true));
    cases.push_back(conv_case("conv_squeezenet_1x1_512to1000c13", 512, 1000, 13, 1, 1, 0, 1, dt));
    cases.push_back(conv_case("conv_mbv2_1x1_960to320c7", 960, 320, 7, 1, 1, 0, 1, dt));
    cases.push_back(conv_case("conv_mbv2_1x1_320to1280c7", 320, 1280, 7, 1, 1, 0, 1, dt));

    const int reps = quick ? 3 : 9;
    const double min_rep_ms = quick ? 5 : 20;
    std::printf("%-28s %10s %10s %14s %14s\n", "shape", "ms (wall)", "ms (cpu)", "GFLOP/s (wall)", "GFLOP/s (cpu)");
    for (Case& c : cases) {
        if (!only.empty() && c.name.find(only) == std::string::npos) continue;
        kiln::Function f = engine.load(c.graph);
        f(c.inputs);  // warm-up (and, with --tier, the compile)
        f(c.inputs);
        if (tier > 0 && f.stats().groups.front().tier != tier)
            std::printf("# %s: the group is not at tier %d: %s\n", c.name.c_str(), tier, f.stats().groups.front().tierup.c_str());
        const Times t = cold ? time_cold([&] { f(c.inputs); }, quick ? 11 : 41) : time_calls([&] { f(c.inputs); }, reps, min_rep_ms);
        const double gf_wall = c.flops / (t.wall_ms * 1e6), gf_cpu = c.flops / (t.cpu_ms * 1e6);
        std::printf("%-28s %10.3f %10.3f %14.2f %14.2f\n", c.name.c_str(), t.wall_ms, t.cpu_ms, gf_wall, gf_cpu);
        kiln_bench::Result(c.name, impl)
            .add("dtype", dname)
            .add_int("threads", threads)
            .add("ms", t.wall_ms, 5)
            .add("cpu_ms", t.cpu_ms, 5)
            .add("gflops", gf_wall)
            .add("gflops_cpu", gf_cpu)
            .print();
    }
    return 0;
}
