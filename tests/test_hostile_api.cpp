// Hostile use of the public API (issue 17, items 3, 6 and 7): every method of an undefined
// Tensor answers as documented in <kiln/tensor.h> or throws kiln::Error; a trace file that
// cannot be created or written is reported when the engine starts, in the log and in
// EngineStats; a Function outlives its Engine; load_onnx of a directory says so.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "have_tier.h"
#include "skip.h"
#include "src/support/log.h"

#include <spdlog/sinks/ostream_sink.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

using namespace kiln;

namespace {

void expect_undefined_error(const std::string& what, const std::function<void()>& f) {
    CAPTURE(what);
    std::string msg;
    try {
        f();
    } catch (const Error& e) {
        msg = e.what();
    } catch (const std::exception& e) {
        FAIL_CHECK("expected kiln::Error, got another exception: " << std::string(e.what()));
        return;
    }
    INFO("message: ", msg);
    CHECK_MESSAGE(msg.find("undefined") != std::string::npos, "no kiln::Error saying the tensor is undefined");
}

// Captures what Kiln logs while it lives (the logger's level is raised to `warn` meanwhile).
class LogCapture {
public:
    LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)) {
        support::log().sinks().push_back(sink_);
    }
    ~LogCapture() {
        auto& sinks = support::log().sinks();
        std::erase(sinks, sink_);
    }
    std::string text() {
        support::log().flush();
        return out_.str();
    }

private:
    std::ostringstream out_;
    std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

Graph twice_plus_one() {
    return trace("f", {arg("x", DType::f32, {dyn("n"), 16})},
                 [](const std::vector<Var>& in) -> std::vector<Var> { return {tanh(in[0]) * 2.0 + 1.0}; });
}

std::filesystem::path temp_path(const std::string& name) { return std::filesystem::temp_directory_path() / name; }

}  // namespace

TEST_CASE("an undefined Tensor: queries answer as documented") {
    const Tensor t, u;
    CHECK_FALSE(t.defined());
    CHECK(t.numel() == 0);
    CHECK(t.rank() == 0);
    CHECK(t.shape().empty());
    CHECK(t.strides().empty());
    CHECK(t.offset() == 0);
    CHECK(t.dtype() == DType::f32);
    CHECK(t.device() == Device::cpu());
    CHECK(t.is_contiguous());
    CHECK(t.data() == nullptr);
    CHECK(t.data_as<float>() == nullptr);
    CHECK(t.data_as<double>() == nullptr);
    CHECK_FALSE(t.shares_storage(u));
    CHECK_FALSE(t.shares_storage(Tensor::zeros({2})));
    CHECK(t.to_string() == "Tensor(undefined)");
    std::ostringstream os;
    os << t;
    CHECK(os.str() == "Tensor(undefined)");
}

TEST_CASE("an undefined Tensor: operations on its values throw kiln::Error") {
    const Tensor t, d = Tensor::zeros({2});
    expect_undefined_error("to_doubles", [&] { t.to_doubles(); });
    expect_undefined_error("to_vector", [&] { t.to_vector<float>(); });
    expect_undefined_error("item", [&] { t.item({}); });
    expect_undefined_error("clone", [&] { t.clone(); });
    expect_undefined_error("contiguous", [&] { t.contiguous(); });
    expect_undefined_error("astype", [&] { t.astype(DType::f64); });
    expect_undefined_error("to", [&] { t.to(Device::cpu()); });
    expect_undefined_error("dim", [&] { t.dim(0); });
    expect_undefined_error("permute", [&] { t.permute({}); });
    expect_undefined_error("transpose", [&] { t.transpose(0, 0); });
    expect_undefined_error("slice", [&] { t.slice(0, 0, 1); });
    expect_undefined_error("broadcast_to", [&] { t.broadcast_to({2}); });
    expect_undefined_error("unsqueeze", [&] { t.unsqueeze(0); });
    expect_undefined_error("squeeze", [&] { t.squeeze(0); });
    expect_undefined_error("reshape", [&] { t.reshape({}); });
    expect_undefined_error("copy_from into it", [&] { t.copy_from(d); });
    expect_undefined_error("copy_from out of it", [&] { d.copy_from(t); });
}

TEST_CASE("trace file: an unwritable path is reported when the engine starts, in the log and the stats") {
    const std::string dir = temp_path("kiln_hostile_no_such_dir").string();
    std::filesystem::remove_all(dir);
    LogCapture log;
    Options o;
    o.trace_file = dir + "/trace.json";
    Engine e(o);
    INFO("log: ", log.text());
    CHECK(log.text().find(o.trace_file) != std::string::npos);
    CHECK(e.stats().trace_write_failures == 1);
    // Calls go on; the trace is simply not written.
    Function f = e.load(twice_plus_one());
    CHECK(f({Tensor::zeros({1, 16})})[0].item({0, 3}) == 1.0);
    CHECK_FALSE(std::filesystem::exists(dir));
}

TEST_CASE("trace file: a full device is reported when the engine starts, in the log and the stats") {
    if (!std::filesystem::exists("/dev/full")) {
        test::skip("this system has no /dev/full");
        return;
    }
    LogCapture log;
    Options o;
    o.trace_file = "/dev/full";
    Engine e(o);
    INFO("log: ", log.text());
    CHECK(log.text().find("/dev/full") != std::string::npos);
    CHECK(e.stats().trace_write_failures >= 1);
    CHECK(e.stats().to_json().find("\"trace_write_failures\"") != std::string::npos);
}

TEST_CASE("trace file: a writable path is created when the engine starts") {
    const auto path = temp_path("kiln_hostile_trace.json");
    std::filesystem::remove(path);
    Options o;
    o.trace_file = path.string();
    {
        Engine e(o);
        CHECK(std::filesystem::exists(path));
        CHECK(e.stats().trace_write_failures == 0);
        Function f = e.load(twice_plus_one());
        f({Tensor::zeros({2, 16})});
    }
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    CHECK(text.find("\"traceEvents\"") != std::string::npos);
    CHECK(text.find("\"cat\":\"call\"") != std::string::npos);
    CHECK(text.find("\"dropped_events\":0") != std::string::npos);
    CHECK(text.substr(text.size() - 3) == "}}\n");
    std::filesystem::remove(path);
}

TEST_CASE("trace file: a directory that disappears while the engine runs is logged") {
    const auto dir = temp_path("kiln_hostile_vanishing_dir");
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    LogCapture log;
    Options o;
    o.trace_file = (dir / "trace.json").string();
    {
        Engine e(o);
        CHECK(e.stats().trace_write_failures == 0);
        Function f = e.load(twice_plus_one());
        f({Tensor::zeros({2, 16})});
        std::filesystem::remove_all(dir);
    }  // the trace is completed here: into a file that no longer has a name
    INFO("log: ", log.text());
    CHECK(log.text().find(o.trace_file) != std::string::npos);
    CHECK(log.text().find("removed") != std::string::npos);
}

TEST_CASE("a Function keeps working after its Engine is destroyed") {
    Options o;
    o.jit = true;
    o.async_compile = true;
    o.tier1_threshold = 1;
    o.tier2_threshold = 3;
    Function f;
    {
        Engine e(o);
        f = e.load(twice_plus_one());
        f({Tensor::zeros({2, 16})});
    }
    const Tensor x = Tensor::randn({5, 16}, 9);
    const std::vector<double> xs = x.to_doubles();
    for (int i = 0; i < 8; ++i) {
        std::vector<double> y = f({x})[0].to_doubles();
        REQUIRE(y.size() == xs.size());
        for (std::size_t k = 0; k < y.size(); ++k) CHECK(y[k] == doctest::Approx(std::tanh(xs[k]) * 2 + 1).epsilon(1e-5));
    }
    f.wait_for_compiles();
    const FunctionStats s = f.stats();
    CHECK(s.calls == 9);
    if (test::have_tier(1) || test::have_tier(2)) CHECK(s.compiles >= 1);  // compiles went on
    else test::skip("no compiling tier in this build: only the calls are checked");
}

TEST_CASE("load_onnx of a directory says that the path is a directory") {
    if (!onnx_available()) {
        test::skip("this Kiln was built without ONNX");
        return;
    }
    const auto dir = temp_path("kiln_hostile_onnx_dir");
    std::filesystem::create_directories(dir);
    for (const auto& fn : std::vector<std::function<void()>>{[&] { load_onnx(dir.string()); },
                                                           [&] { inspect_onnx(dir.string()); },
                                                           [&] { load_onnx_tensor(dir.string()); }}) {
        std::string msg;
        try {
            fn();
        } catch (const Error& e) {
            msg = e.what();
        }
        INFO("message: ", msg);
        CHECK(msg.find("is a directory") != std::string::npos);
        CHECK(msg.find(dir.string()) != std::string::npos);
    }
    std::filesystem::remove_all(dir);
}
