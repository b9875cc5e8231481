// What the GPU tier does on any machine, GPU or not: which calls go to a device and the
// errors that name what is wrong (mixed devices, KILN_DEVICE=cpu, a missing backend), and
// KILN_DUMP=cuda/hip writing the source of every group at load. The device tensors here
// are wrapped host memory labelled cuda:0; no call reaches a device (each is refused first).
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "skip.h"
#include "src/core/cuda/driver.h"
#include "src/core/device.h"

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
    Tensor h = Tensor::wrap(buf, {4}, DType::f32, Device::hip(0));
    Engine any;
    CHECK_THROWS_WITH_AS(any.load(add_graph())({h, h}), doctest::Contains("hip:0 is not available"), Error);
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
    CHECK(kiln::core::cuda::driver_status().why.find("lacks") == std::string::npos);
#else
    kiln::test::skip("cuda.h was not found when the build was configured: cuda_api.def is unchecked");
#endif
}
