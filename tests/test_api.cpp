// Engine / Function / stats / profiles / Options.
#include <doctest/doctest.h>

#include "src/core/device.h"
#include <kiln/kiln.h>

#include "have_tier.h"
#include "reference.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

using namespace kiln;

namespace {
// Nothing tiers up, so every call is a tier-0 call and the code cache stays empty (with the
// default thresholds a background tier-1 compile could land before a test's checks).
Options no_tier_up() { return ref::jit_options(ref::kNever, ref::kNever, true); }

Graph small_mlp() {
    Tensor w = Tensor::randn({8, 4}, 1), b = Tensor::randn({4}, 2);
    return trace("small", {arg("x", DType::f32, {dyn("batch"), 8})},
                 [&](const std::vector<Var>& in) { return softmax(relu(matmul(in[0], w) + b), -1); });
}
}  // namespace

TEST_CASE("options: defaults are the documented ones") {
    Options o;
    CHECK(o.jit);
    CHECK(o.tier1_threshold == 2);
    CHECK(o.tier2_threshold == 8);
    CHECK(o.tierup == "time");
    CHECK(o.max_specializations == 8);
    CHECK(o.async_compile);
    CHECK(o.compile_threads == 1);
    CHECK(o.device == "auto");
    CHECK(o.num_threads == 0);
    CHECK(o.cache_dir.empty());
    CHECK(o.log_level == "warn");
    CHECK(o.dump.empty());
    CHECK(o.trace_file.empty());
    CHECK_NOTHROW(o.validate());
    o.log_level = "chatty";
    CHECK_THROWS_WITH_AS(o.validate(), doctest::Contains("KILN_LOG"), Error);
    CHECK_THROWS_WITH_AS(Engine{o}, doctest::Contains("KILN_LOG"), Error);
}

TEST_CASE("function: stats count calls per tier, signatures and dim histograms") {
    Engine e(no_tier_up());
    Function f = e.load(small_mlp());
    for (int b : {3, 3, 5, 0}) f({Tensor::randn({b, 8}, static_cast<std::uint64_t>(b))});
    CHECK_THROWS_WITH_AS(f({Tensor::randn({3, 9}, 1)}), doctest::Contains("argument 'x' dim 1 expected 8, got 9"), Error);
    FunctionStats s = f.stats();
    CHECK(s.calls == 4);
    CHECK(s.calls_by_tier[0] == 4);
    CHECK(s.failed_calls == 1);
    REQUIRE(s.signatures.size() == 3);
    CHECK(s.signatures[0].shapes == std::vector<Shape>{{3, 8}});
    CHECK(s.signatures[0].calls == 2);
    CHECK(s.dim_histograms.at("batch").at(3) == 2);
    CHECK(s.dim_histograms.at("batch").at(0) == 1);
    CHECK(!s.groups.empty());
    for (const auto& gr : s.groups) CHECK(gr.calls == 4);
    std::string json = s.to_json();
    CHECK(json.find("\"calls\":4") != std::string::npos);
    CHECK(json.find("\"batch\":{") != std::string::npos);
    EngineStats es = e.stats();
    CHECK(es.functions == 1);
    CHECK(es.calls == 4);
    CHECK(es.to_json().find("\"code_cache_bytes\":0") != std::string::npos);
}

TEST_CASE("function: run writes into caller-owned (strided) outputs") {
    Function f = Engine(Options{}).load(small_mlp());
    Tensor x = Tensor::randn({5, 8}, 3);
    Tensor expect = f({x})[0];
    Tensor big = Tensor::zeros({4, 5});           // a transposed view as the output buffer
    Tensor out = big.transpose(0, 1);
    std::vector<Tensor> ins{x}, outs{out};
    f.run(ins, outs);
    // The two calls may run on different tiers (a background compile can land between them),
    // whose sums may round differently: equal within f32 rounding.
    const std::vector<double> got = out.to_doubles(), want = expect.to_doubles();
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
    std::vector<Tensor> bad{Tensor::zeros({5, 3})};
    CHECK_THROWS_WITH_AS(f.run(ins, bad), doctest::Contains("output 0 expected shape [5,4], got [5,3]"), Error);
    std::vector<Tensor> bad_dtype{Tensor::zeros({5, 4}, DType::f64)};
    CHECK_THROWS_WITH_AS(f.run(ins, bad_dtype), doctest::Contains("output 0 expected dtype f32, got f64"), Error);
}

TEST_CASE("function: output_shapes and warmup check shapes without running") {
    Function f = Engine(Options{}).load(small_mlp());
    CHECK(f.output_shapes({{7, 8}}) == std::vector<Shape>{{7, 4}});
    CHECK_NOTHROW(f.warmup({{{1, 8}}, {{64, 8}}}));
    CHECK_THROWS_WITH_AS(f.warmup({{{1, 9}}}), doctest::Contains("argument 'x' dim 1 expected 8, got 9"), Error);
    f.wait_for_compiles();
    CHECK(f.stats().calls == 0);
}

TEST_CASE("function: inputs may be non-contiguous views") {
    Function f = Engine(Options{}).load(small_mlp());
    Tensor base = Tensor::randn({8, 6}, 9);
    Tensor view = base.transpose(0, 1);  // [6, 8], strided
    CHECK(!view.is_contiguous());
    // The two calls may run on different tiers (the JIT compiles in the background), whose
    // sums may round differently: equal within f32 rounding.
    const std::vector<double> a = f({view})[0].to_doubles(), b = f({view.contiguous()})[0].to_doubles();
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-5));
}

TEST_CASE("engine: KILN_DUMP=graph writes the graph text") {
    namespace fs = std::filesystem;
    fs::path dir = fs::temp_directory_path() / ("kiln_dump_test_" + std::to_string(std::rand()));
    Options o;
    o.dump = {"graph"};
    o.dump_dir = dir.string();
    Engine e(o);
    Graph g = small_mlp();
    e.load(g);
    std::ifstream in(dir / "small.graph.txt");
    REQUIRE(in.good());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(Graph::parse(text).structurally_equal(g));
    fs::remove_all(dir);
}

TEST_CASE("engine: KILN_DUMP=perf lists the engine's tier-2 kernels in the process's perf map") {
    // From Options::dump through the engine's settings to the LLVM tier (the tier's own test,
    // test_llvm_tier.cpp, checks the lines of compiled and loaded kernels).
    if (test::lacks_tier(2)) return;
    const std::filesystem::path map = "/tmp/perf-" + std::to_string(::getpid()) + ".map";
    std::filesystem::remove(map);
    Options o = ref::tier2_options();
    o.dump = {"perf"};
    Function f = Engine(o).load(small_mlp());
    for (int i = 0; i < 3; ++i) f({Tensor::randn({3, 8}, 3)});
    REQUIRE(f.stats().calls_by_tier[2] >= 1);
    std::ifstream in(map);
    REQUIRE(in.good());
    int kernels = 0;
    for (std::string line; std::getline(in, line);) {
        std::istringstream fields(line);
        std::string start, size, name;
        fields >> start >> size >> name;
        if (name.rfind("kiln_", 0) == 0) ++kernels;
    }
    CHECK(kernels >= 1);
    in.close();
    std::filesystem::remove(map);
}

TEST_CASE("engine: a backend this machine lacks is refused clearly") {
    for (const char* dev : {"cuda", "hip"}) {
        CAPTURE(dev);
        Options o;
        o.device = dev;
        const Device d = std::string(dev) == "cuda" ? Device::cuda(0) : Device::hip(0);
        if (core::device_available(d, nullptr)) {
            CHECK_NOTHROW(Engine{o});
            continue;
        }
        try {
            Engine e(o);
            FAIL("expected kiln::Error");
        } catch (const Error& err) {
            CHECK(std::string(err.what()).find("KILN_DEVICE") != std::string::npos);
            CHECK(std::string(err.what()).find("not available") != std::string::npos);
        }
    }
}

TEST_CASE("graph: parse(print(g)) is structurally equal and hashes equal") {
    Graph g = small_mlp();
    Graph h = Graph::parse(g.to_string());
    CHECK(h.structurally_equal(g));
    CHECK(h.hash() == g.hash());
    CHECK(h.to_string() == g.to_string());
    Graph other = trace("small", {arg("x", DType::f32, {dyn("batch"), 8})}, [](const std::vector<Var>& in) { return relu(in[0]); });
    CHECK(other.hash() != g.hash());
    CHECK_THROWS_WITH_AS(Graph::parse(g.to_string({.max_constant_elements = 2})), doctest::Contains("constant data was elided"), Error);
}

TEST_CASE("tensor: views share storage and factories fill") {
    Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor v = t.permute({1, 0});
    CHECK(v.shares_storage(t));
    CHECK(v.shape() == Shape{3, 2});
    CHECK(v.item({2, 1}) == 6);
    Tensor s = t.slice(1, 0, 3, 2);
    CHECK(s.shape() == Shape{2, 2});
    CHECK(s.to_vector<float>() == std::vector<float>{1, 3, 4, 6});
    CHECK(Tensor::full({2}, 7, DType::i8).to_vector<int>() == std::vector<int>{7, 7});
    CHECK(Tensor::randn({16}, 3).to_doubles() == Tensor::randn({16}, 3).to_doubles());
    CHECK(Tensor::randn({16}, 3).to_doubles() != Tensor::randn({16}, 4).to_doubles());
    CHECK_THROWS_WITH_AS(t.data_as<double>(), doctest::Contains("expected dtype f64, got f32"), Error);
    CHECK_THROWS_WITH_AS(Tensor::from_vector<float>({1, 2}, {3}), doctest::Contains("shape [3] needs 3 values, got 2"), Error);
    // Device tensors need a device: without one the factory says what is missing.
    if (!core::device_available(Device::cuda(0), nullptr))
        CHECK_THROWS_WITH_AS(Tensor::empty({2}, DType::f32, Device::cuda(0)), doctest::Contains("cuda:0 is not available"), Error);
    if (!core::device_available(Device::hip(0), nullptr))
        CHECK_THROWS_WITH_AS(Tensor::empty({2}, DType::f32, Device::hip(0)), doctest::Contains("hip:0 is not available"), Error);
    float buf[4] = {1, 2, 3, 4};
    Tensor w = Tensor::wrap(buf, {2, 2}, DType::f32);
    buf[3] = 9;
    CHECK(w.item({1, 1}) == 9);
    Half h(1.5f);
    CHECK(static_cast<float>(h) == 1.5f);
    CHECK(static_cast<float>(BFloat16(-2.0f)) == -2.0f);
    CHECK(static_cast<float>(Half(65504.0f)) == 65504.0f);
    CHECK(std::isinf(static_cast<float>(Half(1e6f))));
    CHECK(Device::parse("cuda:1") == Device::cuda(1));
    CHECK_THROWS_WITH_AS(Device::parse("tpu"), doctest::Contains("got 'tpu'"), Error);
}

TEST_CASE("engine: stats keep the calls of functions that are gone") {
    Engine e(no_tier_up());
    {
        Function f = e.load(small_mlp());
        f({Tensor::randn({2, 8}, 1)});
        f({Tensor::randn({3, 8}, 1)});
    }
    Function g = e.load(small_mlp());
    g({Tensor::randn({1, 8}, 1)});
    EngineStats s = e.stats();
    CHECK(s.functions == 1);
    CHECK(s.calls == 3);
    CHECK(s.calls_by_tier[0] == 3);
}
