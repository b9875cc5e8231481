// KILN_TRACE: the Chrome-trace file of a short run, read back and checked against the
// function's stats (calls per tier, groups, compiles, guard failures, deopts).
#include <doctest/doctest.h>
#include <kiln/kiln.h>
#include "have_tier.h"
#include "skip.h"

#include "profiling/chrome_trace.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace kiln;

namespace {

std::vector<std::string> read_lines(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
}

bool has(const std::string& line, const std::string& what) { return line.find(what) != std::string::npos; }

std::uint64_t count(const std::vector<std::string>& lines, std::initializer_list<const char*> all) {
    std::uint64_t n = 0;
    for (const auto& l : lines) {
        bool ok = true;
        for (const char* w : all) ok = ok && has(l, w);
        n += ok ? 1 : 0;
    }
    return n;
}

}  // namespace

TEST_CASE("trace: escape keeps JSON strings valid") {
    CHECK(profiling::ChromeTrace::escape("a\"b\\c\n") == "a\\\"b\\\\c\\u000a");
}

TEST_CASE("trace: the events of a short run match the function's stats") {
    const std::string path = (std::filesystem::temp_directory_path() / "kiln_trace_test.json").string();
    std::filesystem::remove(path);
    Options o;
    o.jit = true;
    o.async_compile = false;
    o.tier1_threshold = 1;
    o.tier2_threshold = 3;
    o.trace_file = path;
    FunctionStats s;
    {
        Engine e(o);
        Tensor g = Tensor::rand({32}, 3, DType::f32, 0.5, 1.5), b = Tensor::randn({32}, 4);
        Function f = e.load(trace("traced", {arg("x", DType::f32, {dyn("B"), 32})}, [&](const std::vector<Var>& in) {
            return std::vector<Var>{softmax(layer_norm(gelu(in[0], true) * 2.0, g, b), -1)};
        }));
        for (int i = 0; i < 6; ++i) f({Tensor::randn({8, 32}, 1)});
        f({Tensor::randn({5, 32}, 2)});  // a batch size the specialisations do not cover
        s = f.stats();
    }  // the engine and the function are gone: the file is complete
    INFO(s.to_json());
    const auto lines = read_lines(path);
    REQUIRE(lines.size() >= 3);
    CHECK(has(lines.front(), "\"traceEvents\":["));
    CHECK(lines.back() == "],\"otherData\":{\"producer\":\"kiln\",\"dropped_events\":0}}");
    CHECK(count(lines, {"\"cat\":\"call\""}) == s.calls);
    for (int t = 0; t < 3; ++t)
        CHECK(count(lines, {"\"cat\":\"call\"", ("\"tier\":" + std::to_string(t) + "}").c_str()}) == s.calls_by_tier[static_cast<std::size_t>(t)]);
    std::uint64_t group_calls = 0;
    for (const auto& gr : s.groups) group_calls += gr.calls;
    CHECK(count(lines, {"\"cat\":\"group\""}) == group_calls);
    CHECK(count(lines, {"\"cat\":\"compile\""}) == s.compiles + s.compile_failures + s.code_cache_hits + s.persistent_cache_hits);
    CHECK(count(lines, {"\"cat\":\"compile\"", "\"cache\":\"miss\""}) == s.compiles + s.compile_failures);
    CHECK(count(lines, {"\"name\":\"evict\""}) == s.evictions);
    CHECK(count(lines, {"\"cat\":\"compile\"", "\"outcome\":\"compiled\""}) == s.compiles);
    CHECK(count(lines, {"\"name\":\"guard_failure\""}) == s.guard_failures);
    CHECK(count(lines, {"\"name\":\"deopt\""}) == s.deopts);
    // Every compile the policy requested is marked with its numbers (no warmup here); so is
    // each signature the policy moved back to tier 1 because it measured faster there
    // (\"by\":\"measured\", no compile; timing decides whether any happens).
    const std::uint64_t pins = count(lines, {"\"cat\":\"tierup\"", "\"by\":\"measured\""});
    CHECK(count(lines, {"\"cat\":\"tierup\""}) - pins == count(lines, {"\"cat\":\"compile\""}));
    CHECK(count(lines, {"\"cat\":\"tierup\"", "\"saving_ms\":", "\"cost_ms\":", "\"bound\":"}) ==
          count(lines, {"\"cat\":\"tierup\""}));
#if defined(KILN_HAVE_LLVM)
    // Tier 2 specialised on B = 8; the last call missed its guard, and the trace names the fact.
    REQUIRE(s.calls_by_tier[2] > 0);
    CHECK(s.guard_failures >= 1);
    CHECK(count(lines, {"\"name\":\"guard_failure\"", "== 8, got 5"}) >= 1);
    CHECK(count(lines, {"\"backend\":\"llvm\""}) >= 1);
#else
    kiln::test::skip("the guard-failure part: no tier 2 (LLVM) in this build, so no guard failures to trace");
#endif
    std::filesystem::remove(path);
}

TEST_CASE("trace: code cache hits and evictions match the stats") {
    if (!test::have_tier(1) && !test::have_tier(2)) {
        test::skip("this build and host have no compiling tier: no code, so no code cache");
        return;
    }
    const std::string path = (std::filesystem::temp_directory_path() / "kiln_trace_cache_test.json").string();
    std::filesystem::remove(path);
    Options o;
    o.async_compile = false;
    o.tier1_threshold = 1;
    o.tier2_threshold = 2;
    o.trace_file = path;
    auto graph = [](const std::string& name, bool rows) {
        return trace(name, {arg("x", DType::f32, {dyn("B"), 32})}, [&](const std::vector<Var>& in) {
            Var h = tanh(in[0]) * 3.0;
            return std::vector<Var>{rows ? softmax(h, -1) : sigmoid(h)};
        });
    };
    std::uint64_t hits = 0, evictions = 0, misses = 0;
    EngineStats es;
    {
        // Measure the code of one function, then bound the cache below what three need.
        std::uint64_t one = 0;
        {
            Options u = o;
            u.trace_file.clear();
            Engine e(u);
            Function f = e.load(graph("probe", true));
            for (int i = 0; i < 4; ++i) f({Tensor::randn({4, 32}, 1)});
            one = e.stats().code_cache_bytes;
        }
        REQUIRE(one > 0);
        o.code_cache_bytes = static_cast<std::int64_t>(one + one / 2);
        Engine e(o);
        Function a = e.load(graph("a", true)), b = e.load(graph("b", true)), c = e.load(graph("c", false));
        for (int i = 0; i < 4; ++i) {
            a({Tensor::randn({4, 32}, 1)});
            b({Tensor::randn({4, 32}, 2)});  // the same kernels as a: hits
        }
        for (int i = 0; i < 4; ++i) c({Tensor::randn({4, 32}, 3)});  // other kernels: evictions
        for (Function* f : {&a, &b, &c}) {
            FunctionStats s = f->stats();
            hits += s.code_cache_hits;
            evictions += s.evictions;
            misses += s.compiles + s.compile_failures;
        }
        es = e.stats();
    }
    INFO(es.to_json());
    const auto lines = read_lines(path);
    REQUIRE(lines.size() >= 3);
    CHECK(hits > 0);
    CHECK(evictions > 0);
    CHECK(hits == es.code_cache_hits);
    CHECK(count(lines, {"\"cat\":\"compile\"", "\"cache\":\"hit\""}) == hits);
    CHECK(count(lines, {"\"cat\":\"compile\"", "\"cache\":\"miss\""}) == misses);
    CHECK(count(lines, {"\"name\":\"evict\""}) == evictions);
    std::filesystem::remove(path);
}

TEST_CASE("trace: an unwritable path is reported, not thrown") {
    Options o;
    o.trace_file = "/nonexistent-dir-for-kiln/trace.json";
    CHECK_NOTHROW([&] {
        Engine e(o);
        Function f = e.load(trace("t", {arg("x", DType::f32, {4})}, [](const std::vector<Var>& in) {
            return std::vector<Var>{in[0] * 2.0};
        }));
        f({Tensor::randn({4}, 1)});
    }());
}
