// Expected errors: malformed traces throw kiln::Error at trace time naming the op and the
// operands' shapes; bad calls throw kiln::Error naming the argument, the expected and the
// actual value, and leave the Function usable; Options::from_env parses every KILN_*
// variable and rejects malformed values naming the variable and the value.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "reference.h"

#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

using kiln::DType;
using kiln::Tensor;
using kiln::Var;

using Body = std::function<Var(const std::vector<Var>&)>;

// The message of the kiln::Error thrown by tracing `body`, or nullopt when nothing (or
// another exception type) was thrown.
std::optional<std::string> trace_error(const std::vector<kiln::ArgSpec>& args, const Body& body) {
    try {
        kiln::trace("bad", args, body);
    } catch (const kiln::Error& e) {
        return std::string(e.what());
    } catch (const std::exception& e) {
        FAIL_CHECK("expected kiln::Error, got another exception: " << e.what());
        return std::nullopt;
    }
    return std::nullopt;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Checks that tracing fails with a kiln::Error whose message contains every one of `parts`.
void expect_trace_error(const char* what, const std::vector<kiln::ArgSpec>& args, const Body& body,
                        const std::vector<std::string>& parts) {
    CAPTURE(what);
    auto msg = trace_error(args, body);
    REQUIRE_MESSAGE(msg.has_value(), "no kiln::Error thrown for " << what);
    INFO("message: ", *msg);
    for (const auto& p : parts) CHECK_MESSAGE(contains(*msg, p), "the message lacks \"" << p << "\"");
}

kiln::ArgSpec a(const char* name, DType dt, std::vector<kiln::Dim> dims) { return kiln::arg(name, dt, std::move(dims)); }

// The message of the kiln::Error a call throws, or nullopt.
std::optional<std::string> call_error(const kiln::Function& f, const std::vector<Tensor>& in) {
    try {
        f(in);
    } catch (const kiln::Error& e) {
        return std::string(e.what());
    } catch (const std::exception& e) {
        FAIL_CHECK("expected kiln::Error, got another exception: " << e.what());
        return std::nullopt;
    }
    return std::nullopt;
}

}  // namespace

TEST_CASE("errors: malformed traces name the op and the operand shapes") {
    const DType f = DType::f32;
    expect_trace_error("broadcast", {a("x", f, {2, 3}), a("y", f, {4})},
                       [](const std::vector<Var>& in) { return in[0] + in[1]; }, {"add", "[2,3]", "[4]"});
    expect_trace_error("broadcast mul", {a("x", f, {5, 3}), a("y", f, {2, 1, 4})},
                       [](const std::vector<Var>& in) { return in[0] * in[1]; }, {"mul", "[5,3]", "[2,1,4]"});
    expect_trace_error("dtype mismatch", {a("x", f, {2}), a("y", DType::f64, {2})},
                       [](const std::vector<Var>& in) { return in[0] - in[1]; }, {"sub", "f32", "f64", "[2]"});
    expect_trace_error("reduce axis", {a("x", f, {2, 3})},
                       [](const std::vector<Var>& in) { return kiln::sum(in[0], std::vector<std::int64_t>{2}); },
                       {"sum", "[2,3]"});
    expect_trace_error("negative axis", {a("x", f, {2, 3})},
                       [](const std::vector<Var>& in) { return kiln::max(in[0], -3); }, {"max", "[2,3]"});
    expect_trace_error("softmax axis", {a("x", f, {4, 5})},
                       [](const std::vector<Var>& in) { return kiln::softmax(in[0], 5); }, {"softmax", "[4,5]"});
    expect_trace_error("matmul contracted", {a("x", f, {2, 3}), a("y", f, {4, 5})},
                       [](const std::vector<Var>& in) { return kiln::matmul(in[0], in[1]); }, {"matmul", "[2,3]", "[4,5]"});
    expect_trace_error("matmul batch", {a("x", f, {2, 3, 4}), a("y", f, {3, 4, 5})},
                       [](const std::vector<Var>& in) { return kiln::matmul(in[0], in[1]); }, {"matmul", "[2,3,4]", "[3,4,5]"});
    expect_trace_error("reshape count", {a("x", f, {2, 3})},
                       [](const std::vector<Var>& in) { return kiln::reshape(in[0], {4, 2}); }, {"reshape", "[2,3]"});
    expect_trace_error("conv channels", {a("x", f, {1, 3, 5, 5}), a("w", f, {2, 4, 3, 3})},
                       [](const std::vector<Var>& in) { return kiln::conv2d(in[0], in[1]); },
                       {"conv2d", "[1,3,5,5]", "[2,4,3,3]"});
    expect_trace_error("conv window", {a("x", f, {1, 1, 2, 2}), a("w", f, {1, 1, 3, 3})},
                       [](const std::vector<Var>& in) { return kiln::conv2d(in[0], in[1]); }, {"conv2d", "[1,1,2,2]"});
    expect_trace_error("exp of int", {a("x", DType::i32, {3})},
                       [](const std::vector<Var>& in) { return kiln::exp(in[0]); }, {"exp", "i32", "[3]"});
    expect_trace_error("logical_not of float", {a("x", f, {3})},
                       [](const std::vector<Var>& in) { return kiln::logical_not(in[0]); }, {"logical_not", "[3]"});
    expect_trace_error("add of bool", {a("x", DType::boolean, {3}), a("y", DType::boolean, {3})},
                       [](const std::vector<Var>& in) { return in[0] + in[1]; }, {"add", "[3]"});
    expect_trace_error("where cond", {a("c", f, {3}), a("x", f, {3}), a("y", f, {3})},
                       [](const std::vector<Var>& in) { return kiln::where(in[0], in[1], in[2]); }, {"where", "[3]"});
    expect_trace_error("layer_norm gamma", {a("x", f, {2, 8}), a("g", f, {7}), a("b", f, {8})},
                       [](const std::vector<Var>& in) { return kiln::layer_norm(in[0], in[1], in[2]); },
                       {"layer_norm", "[2,8]", "[7]"});
    expect_trace_error("concat", {a("x", f, {2, 3}), a("y", f, {3, 3})},
                       [](const std::vector<Var>& in) { return kiln::concat({in[0], in[1]}, 1); },
                       {"concat", "[2,3]", "[3,3]"});
    expect_trace_error("gather float indices", {a("x", f, {4, 3}), a("i", f, {2})},
                       [](const std::vector<Var>& in) { return kiln::gather(in[0], in[1], 0); }, {"gather", "[4,3]", "[2]"});
    expect_trace_error("pad count", {a("x", f, {4, 3})},
                       [](const std::vector<Var>& in) { return kiln::pad(in[0], {1, 1}); }, {"pad", "[4,3]"});
    expect_trace_error("permute", {a("x", f, {4, 3})},
                       [](const std::vector<Var>& in) { return kiln::permute(in[0], {0, 0}); }, {"permute", "[4,3]"});
    expect_trace_error("squeeze", {a("x", f, {4, 3})},
                       [](const std::vector<Var>& in) { return kiln::squeeze(in[0], {0}); }, {"squeeze", "[4,3]"});
    expect_trace_error("slice step", {a("x", f, {4, 3})},
                       [](const std::vector<Var>& in) { return kiln::slice(in[0], 0, 0, 4, 0); }, {"slice", "[4,3]"});
    expect_trace_error("broadcast_to", {a("x", f, {4, 3})},
                       [](const std::vector<Var>& in) { return kiln::broadcast_to(in[0], {4, 5}); }, {"broadcast_to", "[4,3]"});
    expect_trace_error("pool padding", {a("x", f, {1, 1, 5, 5})},
                       [](const std::vector<Var>& in) { return kiln::max_pool2d(in[0], {2, 2}, {1, 1}, {2, 2}); },
                       {"max_pool2d", "[1,1,5,5]"});
    expect_trace_error("mean of int", {a("x", DType::i64, {4})},
                       [](const std::vector<Var>& in) { return kiln::mean(in[0]); }, {"mean", "[4]"});
    expect_trace_error("matmul of int", {a("x", DType::i32, {2, 2}), a("y", DType::i32, {2, 2})},
                       [](const std::vector<Var>& in) { return kiln::matmul(in[0], in[1]); }, {"matmul", "[2,2]"});
}

TEST_CASE("errors: bad calls name the argument, expected and actual, and the Function still works") {
    kiln::Graph g = kiln::trace("mul", {kiln::arg("x", DType::f32, {kiln::dyn("B"), 4}),
                                        kiln::arg("y", DType::f32, {kiln::dyn("B"), 1})},
                                [](const std::vector<Var>& in) -> Var { return in[0] * in[1]; });
    kiln::Function f = ref::interp_engine().load(g);
    Tensor x = Tensor::randn({3, 4}, 1), y = Tensor::randn({3, 1}, 2);
    std::uint64_t good_calls = 0, bad_calls = 0;
    auto good_call = [&] {
        auto out = f({x, y});
        ++good_calls;
        REQUIRE(out.size() == 1);
        ref::check_close(out[0], ref::mul(ref::from_kiln(x), ref::from_kiln(y), DType::f32), DType::f32,
                         ref::tol_for(DType::f32), "x*y after a bad call");
    };
    auto expect_call_error = [&](const char* what, const std::vector<Tensor>& in, const std::vector<std::string>& parts) {
        CAPTURE(what);
        auto msg = call_error(f, in);
        ++bad_calls;
        REQUIRE_MESSAGE(msg.has_value(), "no kiln::Error thrown for " << what);
        INFO("message: ", *msg);
        for (const auto& p : parts) CHECK_MESSAGE(contains(*msg, p), "the message lacks \"" << p << "\"");
        good_call();
    };
    good_call();
    expect_call_error("too few inputs", {x}, {"2", "1"});
    expect_call_error("too many inputs", {x, y, y}, {"2", "3"});
    expect_call_error("rank", {Tensor::randn({12}, 3), y}, {"x", "[12]"});
    expect_call_error("dtype", {Tensor::randn({3, 4}, 4, DType::f64), y}, {"x", "f32", "f64"});
    expect_call_error("static dim", {Tensor::randn({3, 5}, 5), y}, {"x", "4", "5"});
    expect_call_error("static dim of y", {x, Tensor::randn({3, 2}, 6)}, {"y", "1", "2"});
    expect_call_error("symbol disagrees", {x, Tensor::randn({2, 1}, 7)}, {"B", "3", "2"});
    CHECK(f.stats().calls == good_calls);
    CHECK(f.stats().failed_calls == bad_calls);

    // Caller-owned outputs of the wrong shape or dtype are rejected too.
    std::vector<Tensor> in{x, y};
    std::vector<Tensor> bad_out{Tensor::empty({3, 5})};
    CHECK_THROWS_WITH_AS(f.run(in, bad_out), doctest::Contains("output 0 expected shape [3,4], got [3,5]"), kiln::Error);
    std::vector<Tensor> bad_dtype{Tensor::empty({3, 4}, DType::f64)};
    CHECK_THROWS_WITH_AS(f.run(in, bad_dtype), doctest::Contains("output 0 expected dtype f32, got f64"), kiln::Error);
    std::vector<Tensor> good_out{Tensor::empty({3, 4})};
    f.run(in, good_out);
    ref::check_close(good_out[0], ref::mul(ref::from_kiln(x), ref::from_kiln(y), DType::f32), DType::f32,
                     ref::tol_for(DType::f32), "run into caller-owned outputs");
}

TEST_CASE("errors: a gather index out of range is an error at run time, then calls still work") {
    Tensor table = Tensor::randn({5, 2}, 8);
    kiln::Graph g = kiln::trace("gather_oob", {kiln::arg("i", DType::i64, {kiln::dyn("N")})},
                                [&](const std::vector<Var>& in) -> Var { return kiln::gather(table, in[0], 0); });
    kiln::Function f = ref::interp_engine().load(g);
    CHECK_THROWS_WITH_AS(f({ref::to_kiln(ref::make({3}, {0, 5, 1}), DType::i64)}), doctest::Contains("index 5 is out of range for axis 0 of size 5"), kiln::Error);
    CHECK_THROWS_WITH_AS(f({ref::to_kiln(ref::make({2}, {-6, 0}), DType::i64)}), doctest::Contains("index -6 is out of range for axis 0 of size 5"), kiln::Error);
    Tensor ok = ref::to_kiln(ref::make({3}, {4, -5, 2}), DType::i64);
    ref::check_close(f({ok})[0], ref::gather(ref::from_kiln(table), ref::from_kiln(ok), 0), DType::f32, {}, "gather");
}

namespace {

const std::vector<std::string>& kiln_vars() {
    static const std::vector<std::string> v{"KILN_JIT", "KILN_TIER1_THRESHOLD", "KILN_TIER2_THRESHOLD",
                                            "KILN_MAX_SPECIALIZATIONS", "KILN_ASYNC_COMPILE", "KILN_COMPILE_THREADS",
                                            "KILN_DEVICE", "KILN_NUM_THREADS", "KILN_CACHE_DIR", "KILN_LOG",
                                            "KILN_DUMP", "KILN_DUMP_DIR", "KILN_TRACE", "KILN_WINOGRAD"};
    return v;
}

// Clears every KILN_* variable for the test's duration and restores the old values afterwards.
struct EnvGuard {
    std::map<std::string, std::optional<std::string>> saved;
    EnvGuard() {
        for (const auto& n : kiln_vars()) {
            const char* v = std::getenv(n.c_str());
            saved[n] = v ? std::optional<std::string>(v) : std::nullopt;
            ::unsetenv(n.c_str());
        }
    }
    ~EnvGuard() {
        for (const auto& [n, v] : saved) {
            if (v) ::setenv(n.c_str(), v->c_str(), 1);
            else ::unsetenv(n.c_str());
        }
    }
    void set(const std::string& n, const std::string& v) { ::setenv(n.c_str(), v.c_str(), 1); }
    void clear() {
        for (const auto& n : kiln_vars()) ::unsetenv(n.c_str());
    }
};

}  // namespace

TEST_CASE("errors: Options::from_env reads every variable over the defaults") {
    EnvGuard env;
    kiln::Options d = kiln::Options::from_env();
    kiln::Options def;
    CHECK(d.jit == def.jit);
    CHECK(d.tier1_threshold == def.tier1_threshold);
    CHECK(d.tier2_threshold == def.tier2_threshold);
    CHECK(d.max_specializations == 8);
    CHECK(d.async_compile == true);
    CHECK(d.compile_threads == 1);
    CHECK(d.device == "auto");
    CHECK(d.num_threads == def.num_threads);
    CHECK(d.cache_dir.empty());
    CHECK(d.log_level == "warn");
    CHECK(d.dump.empty());
    CHECK(d.trace_file.empty());

    env.set("KILN_JIT", "0");
    env.set("KILN_TIER1_THRESHOLD", "7");
    env.set("KILN_TIER2_THRESHOLD", "123");
    env.set("KILN_MAX_SPECIALIZATIONS", "3");
    env.set("KILN_ASYNC_COMPILE", "0");
    env.set("KILN_COMPILE_THREADS", "4");
    env.set("KILN_DEVICE", "cpu");
    env.set("KILN_NUM_THREADS", "2");
    env.set("KILN_CACHE_DIR", "/tmp/kiln-test-cache");
    env.set("KILN_LOG", "debug");
    env.set("KILN_DUMP", "graph,kir");
    env.set("KILN_DUMP_DIR", "/tmp/kiln-test-dumps");
    env.set("KILN_TRACE", "/tmp/kiln-test-trace.json");
    kiln::Options o = kiln::Options::from_env();
    CHECK(o.jit == false);
    CHECK(o.tier1_threshold == 7);
    CHECK(o.tier2_threshold == 123);
    CHECK(o.max_specializations == 3);
    CHECK(o.async_compile == false);
    CHECK(o.compile_threads == 4);
    CHECK(o.device == "cpu");
    CHECK(o.num_threads == 2);
    CHECK(o.cache_dir == "/tmp/kiln-test-cache");
    CHECK(o.log_level == "debug");
    CHECK(o.dump == std::vector<std::string>{"graph", "kir"});
    CHECK(o.dumps("graph"));
    CHECK(o.dumps("kir"));
    CHECK_FALSE(o.dumps("llvm"));
    CHECK(o.dump_dir == "/tmp/kiln-test-dumps");
    CHECK(o.trace_file == "/tmp/kiln-test-trace.json");
    CHECK_NOTHROW(o.validate());

    env.set("KILN_JIT", "1");
    env.set("KILN_ASYNC_COMPILE", "1");
    for (const char* dev : {"auto", "cpu", "cuda", "hip"}) {
        env.set("KILN_DEVICE", dev);
        CHECK(kiln::Options::from_env().device == dev);
    }
    for (const char* lvl : {"off", "error", "warn", "info", "debug", "trace"}) {
        env.set("KILN_LOG", lvl);
        CHECK(kiln::Options::from_env().log_level == lvl);
    }
    env.set("KILN_DUMP", "graph,groups,kir,llvm,asm,perf,cuda,hip");
    kiln::Options all = kiln::Options::from_env();
    CHECK(all.jit == true);
    CHECK(all.async_compile == true);
    CHECK(all.dump.size() == 8);
    for (const char* w : {"graph", "groups", "kir", "llvm", "asm", "perf", "cuda", "hip"}) CHECK(all.dumps(w));
}

TEST_CASE("errors: Options::from_env rejects malformed values naming the variable and the value") {
    EnvGuard env;
    const std::vector<std::pair<std::string, std::string>> bad{
        {"KILN_JIT", "maybe"},
        {"KILN_TIER1_THRESHOLD", "1x"},
        {"KILN_TIER2_THRESHOLD", "abc"},
        {"KILN_MAX_SPECIALIZATIONS", "many"},
        {"KILN_ASYNC_COMPILE", "yesno"},
        {"KILN_COMPILE_THREADS", "two"},
        {"KILN_DEVICE", "tpu"},
        {"KILN_NUM_THREADS", "-3"},
        {"KILN_LOG", "loud"},
        {"KILN_DUMP", "graph,bogus"},
        {"KILN_WINOGRAD", "yes"},  // process-wide, read by the lowering; checked here too
    };
    for (const auto& [name, value] : bad) {
        CAPTURE(name);
        CAPTURE(value);
        env.clear();
        env.set(name, value);
        std::string msg;
        try {
            kiln::Options::from_env();
        } catch (const kiln::Error& e) {
            msg = e.what();
        }
        REQUIRE_MESSAGE(!msg.empty(), "no kiln::Error for " << name << "=" << value);
        INFO("message: ", msg);
        CHECK(contains(msg, name));
        CHECK(contains(msg, name == "KILN_DUMP" ? std::string("bogus") : value));
    }
    // validate() applies the same rules to fields set in code.
    kiln::Options o;
    o.device = "tpu";
    CHECK_THROWS_WITH_AS(o.validate(), doctest::Contains("KILN_DEVICE"), kiln::Error);
    o = kiln::Options();
    o.log_level = "loud";
    CHECK_THROWS_WITH_AS(o.validate(), doctest::Contains("KILN_LOG"), kiln::Error);
    o = kiln::Options();
    o.dump = {"graph", "bogus"};
    CHECK_THROWS_WITH_AS(o.validate(), doctest::Contains("KILN_DUMP lists 'bogus'"), kiln::Error);
    CHECK_NOTHROW(kiln::Options().validate());
}
