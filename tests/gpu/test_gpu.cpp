// The GPU tests (kiln_gpu_tests): everything that needs a real GPU. They run on cuda:0 when
// the GPU tier can use it, else on hip:0 (an AMD GPU); on a machine with neither every case
// prints why it skips (tests/skip.h); nothing simulates a device. "The device" below is that GPU.
//
//   device tensors   factories, copies both ways, views, to_string on the device
//   differential     the random-graph corpus (tests/random_graphs.h) on the device, each call
//                    three times (tier 0, then the generic kernel, then the specialised one)
//                    against the interpreter on the host
//   threads          8 threads calling one function with random shapes on the device
//   out of memory    a small KILN_GPU_MEMORY_BYTES: bad_alloc, counted, and the call after it works
//   launch failure   an injected failed launch: the group runs on tier 0, the answer is right
//   vector form      elementwise kernels on aligned and unaligned inputs of every length remainder
//   code cache       a bound of one kernel: device code evicted and compiled again, answers right
//
// Run on a GPU machine: `kiln_gpu_tests` (the results of each run are kept in
// tests/gpu/results/).
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "differential.h"
#include "random_graphs.h"
#include "skip.h"
#include "src/core/gpu/runtime.h"
#include "tiers/gpu/gpu_tier.h"
#include "../bench/workloads.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>
#include <iostream>
#include <map>
#include <new>
#include <thread>

using namespace kiln;
namespace diff = kiln::test::diff;

namespace {

// The GPU the tests run on: cuda:0 where the GPU tier can use it, else hip:0 where it can,
// else cuda:0 (every case then skips, saying why).
Device gpu_device() {
    static const Device d = [] {
        if (tiers::gpu::gpu_tier_available(Device::cuda(0), nullptr)) return Device::cuda(0);
        if (tiers::gpu::gpu_tier_available(Device::hip(0), nullptr)) return Device::hip(0);
        return Device::cuda(0);
    }();
    return d;
}

bool have_gpu() {
    std::string why_cuda, why_hip;
    if (tiers::gpu::gpu_tier_available(gpu_device(), nullptr)) return true;
    tiers::gpu::gpu_tier_available(Device::cuda(0), &why_cuda);
    tiers::gpu::gpu_tier_available(Device::hip(0), &why_hip);
    test::skip("no usable GPU: cuda:0: " + why_cuda + "; hip:0: " + why_hip);
    return false;
}

Options gpu_options() {
    Options o;
    o.async_compile = false;  // deterministic: each compile happens in the call that asks for it
    o.tier1_threshold = 1;
    o.tier2_threshold = 2;
    o.tierup = "count";
    return o;
}

std::vector<Tensor> to_device(const std::vector<Tensor>& v) {
    std::vector<Tensor> out;
    for (const Tensor& t : v) out.push_back(t.to(gpu_device()));
    return out;
}

}  // namespace

TEST_CASE("device tensors: factories, copies, views") {
    if (!have_gpu()) return;
    const auto& info = core::gpu::device_info(gpu_device());
    std::cout << "device: " << gpu_device().to_string() << ", " << info.name << ", " << info.arch << ", " << info.sm_count
              << " SMs, driver " << core::gpu::status(gpu_device().kind).driver_version << "\n";
    for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i32, DType::i64,
                     DType::boolean}) {
        CAPTURE(dtype_name(dt));
        Tensor h = Tensor::rand({3, 5}, 7, dt, 0.0, 4.0);
        Tensor d = h.to(gpu_device());
        CHECK(d.device() == gpu_device());
        CHECK(d.data() != h.data());
        CHECK(d.to_doubles() == h.to_doubles());
        CHECK(d.to(Device::cpu()).to_doubles() == h.to_doubles());
        CHECK(Tensor::zeros({4, 3}, dt, gpu_device()).to_doubles() == std::vector<double>(12, 0.0));
        CHECK(Tensor::full({2, 2}, 3.0, dt, gpu_device()).to_doubles() == Tensor::full({2, 2}, 3.0, dt).to_doubles());
        // A strided view of a device tensor reads back as the same view of the host tensor.
        CHECK(d.transpose(0, 1).to_doubles() == h.transpose(0, 1).to_doubles());
        CHECK(d.slice(1, 1, 5, 2).contiguous().to_doubles() == h.slice(1, 1, 5, 2).to_doubles());
        CHECK(d.item({2, 4}) == h.item({2, 4}));
    }
    Tensor d = Tensor::full({2, 3}, 1.5, DType::f32, gpu_device());
    d.slice(1, 0, 1).copy_from(Tensor::full({2, 1}, 7.0));  // into a strided device view
    CHECK(d.to_vector<double>() == std::vector<double>{7, 1.5, 1.5, 7, 1.5, 1.5});
    CHECK(d.to_string().find(gpu_device().to_string()) != std::string::npos);
    CHECK_THROWS_AS(Tensor::zeros({2}, DType::f32, Device{gpu_device().kind, 99}), Error);
}

TEST_CASE("differential: the random-graph corpus on the device against the interpreter") {
    if (!have_gpu()) return;
    struct Family {
        const char* name;
        diff::Case (*make)(std::uint64_t);
        std::uint64_t first_seed;
        int graphs;
    };
    const Family families[] = {
        {"elementwise", diff::elementwise_case, 1000, 40}, {"integer", diff::integer_case, 2000, 30},
        {"view", diff::view_case, 3000, 30},               {"reduction", diff::reduction_case, 4000, 30},
        {"norm", diff::norm_case, 5000, 30},               {"matmul", diff::matmul_case, 6000, 30},
        {"conv", diff::conv_case, 7000, 20},
    };
    std::uint64_t total_mismatches = 0;
    for (const Family& f : families) {
        std::uint64_t graphs = 0, calls = 0, mismatches = 0, compiles = 0, failures = 0, launches = 0;
        std::array<std::uint64_t, 3> by_tier{};
        std::map<std::string, std::uint64_t> bailouts;
        for (std::uint64_t seed : diff::seeds(f.first_seed, f.graphs)) {
            diff::Case c = f.make(seed);
            ++graphs;
            Engine ref(diff::interpreter_options()), gpu(gpu_options());
            Function fr = ref.load(c.graph), fg = gpu.load(c.graph);
            for (const auto& inputs : c.calls) {
                const std::vector<Tensor> want = fr(inputs);
                const std::vector<Tensor> dev_in = to_device(inputs);
                for (int rep = 0; rep < 3; ++rep) {
                    std::vector<Tensor> got;
                    try {
                        got = fg(dev_in);
                    } catch (const std::exception& e) {
                        FAIL_CHECK("family " << f.name << " seed " << seed << ": the device call threw: " << e.what() << "\n"
                                             << diff::describe(c));
                        ++mismatches;
                        break;
                    }
                    ++calls;
                    REQUIRE(got.size() == want.size());
                    for (std::size_t i = 0; i < got.size(); ++i) {
                        CHECK(got[i].device() == gpu_device());
                        const std::string m = diff::compare(got[i].to(Device::cpu()), want[i], c.tol_scale * 4.0);
                        if (!m.empty()) {
                            ++mismatches;
                            FAIL_CHECK("family " << f.name << " seed " << seed << " output " << i << " (call rep " << rep
                                                 << "): " << m << "\n" << diff::describe(c) << "stats: " << fg.stats().to_json());
                        }
                    }
                }
            }
            const FunctionStats s = fg.stats();
            for (std::size_t t = 0; t < 3; ++t) by_tier[t] += s.calls_by_tier[t];
            compiles += s.gpu_compiles;
            failures += s.gpu_compile_failures;
            launches += s.gpu_launches;
            for (const auto& [k, n] : s.bailouts)
                if (k.rfind("gpu_", 0) == 0) bailouts[k] += n;
        }
        total_mismatches += mismatches;
        std::cout << "family " << f.name << ": " << graphs << " graphs, " << calls << " device calls (tier 0/1/2: "
                  << by_tier[0] << "/" << by_tier[1] << "/" << by_tier[2] << "), " << compiles << " NVRTC compiles, "
                  << failures << " bail-outs, " << launches << " launches, " << mismatches << " mismatches";
        for (const auto& [k, n] : bailouts) std::cout << ", " << k << " " << n;
        std::cout << "\n";
        CHECK_MESSAGE(by_tier[1] + by_tier[2] > 0, "family " << f.name << " never ran device code");
    }
    CHECK(total_mismatches == 0);
}

TEST_CASE("models: the MLP and the transformer block of the examples and benchmarks on the device") {
    if (!have_gpu()) return;
    kiln_bench::Mlp mlp = kiln_bench::make_mlp();
    kiln_bench::Transformer tb = kiln_bench::make_transformer();
    struct Model {
        const char* name;
        const Graph& graph;
        std::vector<Shape> shapes;
    };
    const Model models[] = {{"mlp", mlp.graph, {{1, 784}, {7, 784}, {64, 784}}},
                            {"transformer_block", tb.graph, {{1, 1, 256}, {1, 17, 256}, {1, 128, 256}}}};
    for (const Model& m : models) {
        Engine ref(diff::interpreter_options()), gpu(gpu_options());
        Function fr = ref.load(m.graph), fg = gpu.load(m.graph);
        for (std::size_t i = 0; i < m.shapes.size(); ++i) {
            Tensor x = Tensor::randn(m.shapes[i], 100 + i);
            const Tensor want = fr({x})[0];
            for (int rep = 0; rep < 3; ++rep) {
                const Tensor got = fg({x.to(gpu_device())})[0];
                CHECK_MESSAGE(diff::compare(got.to(Device::cpu()), want, 10.0).empty(),
                              m.name << " " << shape_to_string(m.shapes[i]) << " rep " << rep);
            }
        }
        const FunctionStats s = fg.stats();
        std::cout << m.name << ": tier 0/1/2 " << s.calls_by_tier[0] << "/" << s.calls_by_tier[1] << "/"
                  << s.calls_by_tier[2] << ", " << s.gpu_compiles << " compiles (" << s.gpu_compile_ms << " ms), "
                  << s.gpu_launches << " launches\n";
        CHECK(s.calls_by_tier[2] > 0);
    }
}

TEST_CASE("convolutions: the implicit-GEMM forms on the device (tiles, element form), plain, grouped, strided, dilated, depthwise") {
    if (!have_gpu()) return;
    // 3x3 convs with bias and relu; weights constant (as an ONNX model's) or an argument.
    // Channels and pixels that fill tiles of 32 and that leave remainders (48 channels,
    // 15 x 15 images); the first call's shapes make the tier-2 kernel, the others run it or
    // the generic kernel (the image size is dynamic).
    struct Conv {
        const char* name;
        std::int64_t cin, cout, groups, stride, dilation;
        bool const_w;
    };
    const Conv convs[] = {
        {"plain", 32, 64, 1, 1, 1, true},    {"plain, weights an argument", 32, 64, 1, 1, 1, false},
        {"odd channels", 24, 48, 1, 1, 1, true}, {"grouped", 64, 64, 4, 1, 1, true},
        {"strided", 32, 64, 1, 2, 1, true},  {"dilated", 32, 64, 1, 1, 2, true},
        {"depthwise", 32, 32, 32, 1, 1, true},
    };
    std::uint64_t mismatches = 0;
    for (const Conv& cv : convs) {
        const Tensor w = Tensor::randn({cv.cout, cv.cin / cv.groups, 3, 3}, 7), b = Tensor::randn({cv.cout}, 8);
        std::vector<ArgSpec> args{arg("x", DType::f32, {dyn("N"), cv.cin, dyn("H"), dyn("W")})};
        if (!cv.const_w) args.push_back(arg("w", DType::f32, {cv.cout, cv.cin / cv.groups, 3, 3}));
        Graph g = trace("conv", args, [&](const std::vector<Var>& in) -> Var {
            const Var wv = cv.const_w ? Var(w) : in[1];
            return relu(conv2d(in[0], wv, Var(b), {cv.stride, cv.stride}, {cv.dilation, cv.dilation}, {cv.dilation, cv.dilation}, cv.groups));
        });
        Engine ref(diff::interpreter_options()), gpu(gpu_options());
        Function fr = ref.load(g), fg = gpu.load(g);
        const Shape shapes[] = {{2, cv.cin, 16, 16}, {1, cv.cin, 15, 15}, {3, cv.cin, 16, 16}, {2, cv.cin, 9, 31}};
        for (std::size_t i = 0; i < std::size(shapes); ++i) {
            std::vector<Tensor> in{Tensor::randn(shapes[i], 100 + i)};
            if (!cv.const_w) in.push_back(w);
            const Tensor want = fr(in)[0];
            for (int rep = 0; rep < 3; ++rep) {
                const Tensor got = fg(to_device(in))[0];
                const std::string m = diff::compare(got.to(Device::cpu()), want, 10.0);
                if (!m.empty()) ++mismatches;
                CHECK_MESSAGE(m.empty(), cv.name << " " << shape_to_string(shapes[i]) << " rep " << rep << ": " << m);
            }
        }
        const FunctionStats s = fg.stats();
        std::cout << "conv " << cv.name << ": tier 0/1/2 " << s.calls_by_tier[0] << "/" << s.calls_by_tier[1] << "/"
                  << s.calls_by_tier[2] << ", " << s.gpu_compiles << " compiles, " << s.gpu_launches << " launches\n";
        CHECK_MESSAGE(s.calls_by_tier[2] > 0, cv.name << " never ran tier 2");
    }
    CHECK(mismatches == 0);
}

// The persistent cache: this process compiles the transformer block's kernels into a fresh
// KILN_CACHE_DIR, then runs a second process (this binary, the case below) that must load
// every one of them from there and compile none.
TEST_CASE("persistent cache: a second process loads every cubin from a warm KILN_CACHE_DIR") {
    if (!have_gpu()) return;
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kiln-gpu-cache-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    kiln_bench::Transformer tb = kiln_bench::make_transformer();
    Options o = gpu_options();
    o.cache_dir = dir.string();
    std::uint64_t compiled = 0;
    {
        Engine e(o);
        Function f = e.load(tb.graph);
        for (int i = 0; i < 3; ++i) f({Tensor::randn({1, 9, 256}, 1).to(gpu_device())});
        // Groups whose kernel IR matches one compiled before load that one's cubin (a hit
        // already in this process): the second process loads all of them.
        compiled = f.stats().gpu_compiles + f.stats().persistent_cache_hits;
    }
    REQUIRE(compiled > 0);
    const std::string cmd = "KILN_TEST_GPU_CACHE_DIR='" + dir.string() + "' KILN_TEST_GPU_CACHE_EXPECT=" + std::to_string(compiled) +
                            " '" + std::filesystem::read_symlink("/proc/self/exe").string() +
                            "' -tc='persistent cache (second process)*' > '" + (dir / "child.txt").string() + "' 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream in(dir / "child.txt");
    std::stringstream text;
    text << in.rdbuf();
    std::cout << text.str();
    CHECK_MESSAGE(rc == 0, text.str());
    std::filesystem::remove_all(dir);
}

TEST_CASE("persistent cache (second process): run by the case above") {
    const char* dir = std::getenv("KILN_TEST_GPU_CACHE_DIR");
    const char* expect = std::getenv("KILN_TEST_GPU_CACHE_EXPECT");
    if (!dir || !expect) {
        test::skip("the second process of the persistent-cache test: run by that test");
        return;
    }
    kiln_bench::Transformer tb = kiln_bench::make_transformer();
    Options o = gpu_options();
    o.cache_dir = dir;
    Engine e(o);
    Function f = e.load(tb.graph);
    for (int i = 0; i < 3; ++i) f({Tensor::randn({1, 9, 256}, 1).to(gpu_device())});
    const FunctionStats s = f.stats();
    std::cout << "second process: " << s.gpu_compiles << " compiles, " << s.persistent_cache_hits
              << " cubins loaded from the cache (the first compiled " << expect << ")\n";
    CHECK(s.gpu_compiles == 0);
    CHECK(s.persistent_cache_hits == std::stoull(expect));
    CHECK(s.calls_by_tier[2] > 0);
}

TEST_CASE("trace: GPU groups, compiles, guard failures and launch failures in KILN_TRACE, with their device") {
    if (!have_gpu()) return;
    const std::filesystem::path path = std::filesystem::temp_directory_path() / ("kiln-gpu-trace-" + std::to_string(::getpid()) + ".json");
    {
        Options o = gpu_options();
        o.trace_file = path.string();
        Engine e(o);
        Graph g = trace("traced", {arg("x", DType::f32, {dyn("n"), 64})},
                        [](const std::vector<Var>& in) -> std::vector<Var> { return {softmax(in[0] * 2.0, -1)}; });
        Function f = e.load(g);
        for (int i = 0; i < 3; ++i) f({Tensor::randn({8, 64}, 1).to(gpu_device())});
        f({Tensor::randn({5, 64}, 1).to(gpu_device())});  // the specialisation's guard fails: generic code
        tiers::gpu::fail_next_launches_for_testing(1);
        f({Tensor::randn({8, 64}, 1).to(gpu_device())});
    }
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const std::string t = text.str();
    CHECK(t.find("\"device\":\"" + gpu_device().to_string() + "\"") != std::string::npos);
    CHECK(t.find("\"cat\":\"compile\"") != std::string::npos);
    CHECK(t.find("guard_failure") != std::string::npos);
    CHECK(t.find("launch_failure") != std::string::npos);
    std::filesystem::remove(path);
}

TEST_CASE("threads: 8 threads call one function with random shapes on the device") {
    if (!have_gpu()) return;
    diff::Case c = diff::norm_case(5003);
    Options o = gpu_options();
    o.async_compile = true;  // compiles in the background while the threads call
    Engine ref(diff::interpreter_options()), gpu(o);
    Function fr = ref.load(c.graph), fg = gpu.load(c.graph);
    std::vector<std::vector<Tensor>> want;
    for (const auto& in : c.calls) want.push_back(fr(in));
    std::atomic<int> bad{0}, done{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 60; ++i) {
                const std::size_t k = static_cast<std::size_t>(t * 7 + i) % c.calls.size();
                try {
                    std::vector<Tensor> got = fg(to_device(c.calls[k]));
                    for (std::size_t j = 0; j < got.size(); ++j)
                        if (!diff::compare(got[j].to(Device::cpu()), want[k][j], c.tol_scale * 4.0).empty()) ++bad;
                } catch (const std::exception&) {
                    ++bad;
                }
                ++done;
            }
        });
    for (auto& th : threads) th.join();
    fg.wait_for_compiles();
    const FunctionStats s = fg.stats();
    std::cout << "threads: " << done.load() << " calls, tier 0/1/2 " << s.calls_by_tier[0] << "/" << s.calls_by_tier[1]
              << "/" << s.calls_by_tier[2] << ", " << s.gpu_compiles << " compiles, " << bad.load() << " wrong\n";
    CHECK(bad.load() == 0);
    CHECK(done.load() == 8 * 60);
}

TEST_CASE("out of memory under a small KILN_GPU_MEMORY_BYTES") {
    if (!have_gpu()) return;
    Options o = gpu_options();
    o.gpu_memory_bytes = 8 << 20;
    Engine e(o);
    const std::uint64_t before = e.stats().gpu_oom_retries;
    CHECK_THROWS_AS(Tensor::empty({64 << 20}, DType::f32, gpu_device()), std::bad_alloc);  // 256 MiB
    CHECK(e.stats().gpu_oom_retries > before);
    // Smaller requests still work, and a function's call too.
    Tensor a = Tensor::full({1 << 18}, 2.0, DType::f32, gpu_device());
    Graph g = trace("double", {arg("x", DType::f32, {dyn("n")})},
                    [](const std::vector<Var>& in) -> std::vector<Var> { return {in[0] * 2.0 + 1.0}; });
    Function f = e.load(g);
    for (int i = 0; i < 3; ++i) CHECK(f({a})[0].item({5}) == 5.0);
    std::cout << "oom: " << e.stats().to_json() << "\n";
    core::gpu::set_memory_limit(0);
}

TEST_CASE("an injected launch failure runs the group on tier 0 with the right answer") {
    if (!have_gpu()) return;
    Engine e(gpu_options());
    Graph g = trace("chain", {arg("x", DType::f32, {dyn("n"), 64})},
                    [](const std::vector<Var>& in) -> std::vector<Var> { return {relu(in[0] * 3.0 - 1.0)}; });
    Function f = e.load(g);
    Tensor x = Tensor::randn({32, 64}, 3);
    Engine ref(diff::interpreter_options());
    Tensor want = ref.load(g)({x})[0];
    Tensor xd = x.to(gpu_device());
    for (int i = 0; i < 3; ++i) f({xd});
    CHECK(f.stats().gpu_launches > 0);
    tiers::gpu::fail_next_launches_for_testing(1);
    Tensor got = f({xd})[0];
    CHECK(diff::compare(got.to(Device::cpu()), want, 1.0).empty());
    CHECK(f.stats().gpu_launch_failures == 1);
    // The next call runs the compiled kernel again (within the dtype's tolerance of tier 0:
    // the kernel contracts x * 3 - 1 into one FMA).
    CHECK(diff::compare(f({xd})[0].to(Device::cpu()), want, 1.0).empty());
    CHECK(f.stats().gpu_launches > 1);
}

// The vector form of elementwise kernels (tiers/gpu/print_cuda.cpp): four items a thread
// with 128-bit loads and stores when every buffer it vectorises is 16-byte aligned, one item
// a thread otherwise and for the last n % 4. Inputs that start 1, 2 and 3 floats into an
// allocation (unaligned views) and lengths around multiples of 4 and of the grid.
TEST_CASE("vector form: aligned and unaligned inputs, every length remainder") {
    if (!have_gpu()) return;
    Graph g = trace("chain", {arg("a", DType::f32, {dyn("n")}), arg("b", DType::f32, {dyn("n")})},
                    [](const std::vector<Var>& v) -> std::vector<Var> { return {gelu(v[0] * v[1] + v[0], true) * sigmoid(v[1])}; });
    Engine ref(diff::interpreter_options()), gpu(gpu_options());
    Function fr = ref.load(g), fg = gpu.load(g);
    int checked = 0;
    for (std::int64_t n : {1, 3, 4, 5, 8, 1023, 1024, 1025, 1 << 20, (1 << 20) + 3}) {
        for (std::int64_t offset : {0, 1, 2, 3}) {
            CAPTURE(n);
            CAPTURE(offset);
            Tensor a = Tensor::randn({n + 3}, 40 + n), b = Tensor::randn({n + 3}, 41 + n);
            Tensor ad = a.to(gpu_device()).slice(0, offset, offset + n), bd = b.to(gpu_device()).slice(0, 3 - offset, 3 - offset + n);
            const Tensor want = fr({a.slice(0, offset, offset + n).contiguous(), b.slice(0, 3 - offset, 3 - offset + n).contiguous()})[0];
            for (int rep = 0; rep < 3; ++rep) {
                CHECK(diff::compare(fg({ad, bd})[0].to(Device::cpu()), want, 4.0).empty());
                ++checked;
            }
        }
    }
    const FunctionStats s = fg.stats();
    std::cout << "vector form: " << checked << " calls, tier 0/1/2 " << s.calls_by_tier[0] << "/" << s.calls_by_tier[1] << "/"
              << s.calls_by_tier[2] << "\n";
    CHECK(s.calls_by_tier[2] > 0);
}

// Device code in the engine's code cache: a bound of one byte keeps one kernel at a time, so
// every compile evicts the kernel before it; the transformer block's groups keep taking each
// other's code out, run tier 0 or other versions meanwhile, and every answer stays right.
TEST_CASE("code cache: a bound of one kernel evicts device code, and the calls stay right") {
    if (!have_gpu()) return;
    kiln_bench::Transformer tb = kiln_bench::make_transformer();
    Options o = gpu_options();
    o.code_cache_bytes = 1;
    Engine ref(diff::interpreter_options()), gpu(o);
    Function fr = ref.load(tb.graph), fg = gpu.load(tb.graph);
    for (std::int64_t seq : {1, 17, 64}) {
        Tensor x = Tensor::randn({1, seq, 256}, 200 + seq);
        const Tensor want = fr({x})[0];
        for (int rep = 0; rep < 4; ++rep)
            CHECK_MESSAGE(diff::compare(fg({x.to(gpu_device())})[0].to(Device::cpu()), want, 10.0).empty(),
                          "seq " << seq << " rep " << rep);
    }
    const EngineStats es = gpu.stats();
    const FunctionStats s = fg.stats();
    std::cout << "code cache: " << s.gpu_compiles << " compiles, " << s.evictions << " versions evicted, "
              << es.code_cache_evictions << " entries evicted, " << es.code_cache_entries << " held ("
              << es.gpu_code_cache_bytes << " bytes)\n";
    CHECK(s.gpu_compiles > 1);
    CHECK(es.code_cache_evictions > 0);
    CHECK(s.evictions > 0);
    CHECK(es.code_cache_entries == 1);
    CHECK(es.gpu_code_cache_bytes == es.code_cache_bytes);
    CHECK(es.gpu_code_cache_bytes > 0);
}
