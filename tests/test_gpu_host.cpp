// What the GPU tier does on any machine, GPU or not: which calls go to a device and the
// errors that name what is wrong (mixed devices, KILN_DEVICE=cpu, a missing backend), and
// KILN_DUMP=cuda/hip writing the source of every group at load. The device tensors here
// are wrapped host memory labelled cuda:0; no call reaches a device (each is refused first).
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "skip.h"
#include "src/core/gpu/runtime.h"
#include "src/core/device.h"
#include "tiers/gpu/gpu_tier.h"

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace kiln;
namespace fs = std::filesystem;

namespace {

Graph add_graph() {
    return trace("add", {arg("a", DType::f32, {dyn("n")}), arg("b", DType::f32, {dyn("n")})},
                 [](const std::vector<Var>& v) -> std::vector<Var> { return {relu(v[0] + v[1])}; });
}

}  // namespace

TEST_CASE("gpu: inputs on different devices are an error naming both arguments") {
    Engine e;
    Function f = e.load(add_graph());
    float buf[4] = {};
    Tensor host = Tensor::zeros({4});
    Tensor dev = Tensor::wrap(buf, {4}, DType::f32, Device::cuda(0));
    CHECK_THROWS_WITH_AS(f({host, dev}), doctest::Contains("argument 'b' (input 1) is on cuda:0 but argument 'a' (input 0) is on cpu"),
                         Error);
    CHECK(f.stats().failed_calls == 1);
}

TEST_CASE("gpu: KILN_DEVICE=cpu rejects device inputs; without the backend a device call says what is missing") {
    float buf[4] = {};
    Tensor a = Tensor::wrap(buf, {4}, DType::f32, Device::cuda(0));
    Options cpu_only;
    cpu_only.device = "cpu";
    Engine e(cpu_only);
    Function f = e.load(add_graph());
    CHECK_THROWS_WITH_AS(f({a, a}), doctest::Contains("runs on the CPU only (KILN_DEVICE=cpu)"), Error);
    if (!core::device_available(Device::cuda(0), nullptr)) {
        Engine any;
        Function g = any.load(add_graph());
        CHECK_THROWS_WITH_AS(g({a, a}), doctest::Contains("cuda:0 is not available"), Error);
    }
    if (!core::device_available(Device::hip(0), nullptr)) {
        Tensor h = Tensor::wrap(buf, {4}, DType::f32, Device::hip(0));
        Engine any;
        CHECK_THROWS_WITH_AS(any.load(add_graph())({h, h}), doctest::Contains("hip:0 is not available"), Error);
    }
}

TEST_CASE("gpu: Function::run takes host tensors only") {
    float buf[4] = {};
    Tensor a = Tensor::wrap(buf, {4}, DType::f32, Device::cuda(0));
    Engine e;
    Function f = e.load(add_graph());
    std::vector<Tensor> out{Tensor::empty({4})};
    CHECK_THROWS_WITH_AS(f.run(std::vector<Tensor>{a, a}, out), doctest::Contains("Function::run takes host tensors"), Error);
}

TEST_CASE("gpu: KILN_DUMP=cuda,hip writes the source of every group at load, with or without a GPU") {
    const fs::path dir = fs::temp_directory_path() / "kiln-test-gpu-dump";
    fs::remove_all(dir);
    Options o;
    o.dump = {"cuda", "hip"};
    o.dump_dir = dir.string();
    Engine e(o);
    Graph g = trace("mlp_dump", {arg("x", DType::f32, {dyn("b"), 8})}, [](const std::vector<Var>& v) -> std::vector<Var> {
        return {softmax(relu(matmul(v[0], Tensor::randn({8, 4}, 1)) + 1.0), -1)};
    });
    e.load(g);
    int cu = 0, hip = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        CHECK(name.rfind("mlp_dump.", 0) == 0);
        std::ifstream in(entry.path());
        std::stringstream text;
        text << in.rdbuf();
        CHECK(text.str().find("__global__") != std::string::npos);
        if (entry.path().extension() == ".cu") ++cu;
        if (entry.path().extension() == ".hip") ++hip;
    }
    CHECK(cu >= 2);  // the matmul group and the softmax group at least
    CHECK(hip == cu);
    fs::remove_all(dir);
}

TEST_CASE("gpu: cuda_api.def agrees with the toolkit's cuda.h") {
#if defined(KILN_CHECKED_API_CUDA)
    // The static_asserts ran when the tests were built (cmake/KilnApiCheck.cmake); here, a
    // driver that loads has every function of the table (none is reported missing).
    MESSAGE("cuda_api.def was checked against cuda.h at build time");
    CHECK(kiln::core::gpu::status(Device::Kind::cuda).why.find("lacks") == std::string::npos);
#else
    kiln::test::skip("cuda.h was not found when the build was configured: cuda_api.def is unchecked");
#endif
}

TEST_CASE("gpu: hip_api.def and hip_layout.h agree with the installed hip_runtime_api.h") {
#if defined(KILN_CHECKED_API_HIP) && defined(KILN_CHECKED_HIP_LAYOUT)
    // The static_asserts ran when the tests were built (cmake/KilnApiCheck.cmake,
    // tests/hip_layout_check.cpp); here, a HIP runtime that loads has every function of the table.
    MESSAGE("hip_api.def and hip_layout.h were checked against hip_runtime_api.h at build time");
    CHECK(core::gpu::status(Device::Kind::hip).why.find("lacks") == std::string::npos);
#else
    kiln::test::skip("hip/hip_runtime_api.h was not found when the build was configured: hip_api.def is unchecked");
#endif
}

TEST_CASE("gpu: the HIP runtime loads where it is installed; without an AMD GPU, hip:0 says why") {
    const core::gpu::Status& st = core::gpu::status(Device::Kind::hip);
    if (st.library.empty()) {
        kiln::test::skip("the HIP runtime is not installed: " + st.why);
        return;
    }
    MESSAGE("HIP runtime " << st.library << ", version " << st.driver_version << ": "
                           << (st.available ? std::to_string(st.device_count) + " device(s)" : st.why));
    CHECK(st.why.find("lacks") == std::string::npos);  // every function of hip_api.def resolved
    CHECK(st.driver_version > 0);
    std::string why;
    if (st.available) {  // an AMD GPU: each device's architecture is HIPRTC's name for it
        for (int i = 0; i < st.device_count; ++i) CHECK(core::gpu::device_info(Device::hip(i)).arch.rfind("gfx", 0) == 0);
        CHECK_FALSE(core::device_available(Device::hip(st.device_count), &why));
        CHECK(why.find("no such device") != std::string::npos);
        return;
    }
    CHECK(st.device_count == 0);
    CHECK_FALSE(core::device_available(Device::hip(0), &why));
    CHECK(why == st.why);
    CHECK_FALSE(tiers::gpu::gpu_tier_available(Device::hip(0), &why));
    CHECK(why == st.why);
    // The vendor's own words reach the caller: the device factory and KILN_DEVICE=hip.
    CHECK_THROWS_WITH_AS(Tensor::empty({2}, DType::f32, Device::hip(0)), doctest::Contains(st.why.c_str()), Error);
    CHECK_THROWS_WITH_AS(Tensor::full({2}, 1.0, DType::f32).to(Device::hip(0)), doctest::Contains(st.why.c_str()), Error);
    Options o;
    o.device = "hip";
    const std::string refused = "the hip backend is not available: " + st.why;
    CHECK_THROWS_WITH_AS(Engine{o}, doctest::Contains(refused.c_str()), Error);
}
