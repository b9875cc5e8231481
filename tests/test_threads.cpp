// One Function called from 8 threads at once with different batch sizes: every result must
// match the same call made single-threaded beforehand, and stats().calls must count every
// call. Run under ThreadSanitizer by the CI (the test names contain "threads").
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "reference.h"

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using kiln::DType;
using kiln::Tensor;
using kiln::Var;
using ref::RTensor;

constexpr int kThreads = 8;
constexpr int kIters = 40;
const std::vector<std::int64_t> kBatches{0, 1, 2, 3, 5, 8, 13, 17, 32, 64};

struct Mlp {
    Tensor w1 = Tensor::randn({32, 16}, 71);  // linear: [out, in]
    Tensor b1 = Tensor::randn({32}, 72);
    Tensor w2 = Tensor::randn({32, 8}, 73);   // matmul: [in, out]
    Tensor b2 = Tensor::randn({8}, 74);

    kiln::Graph graph() const {
        return kiln::trace("mlp_threads", {kiln::arg("x", DType::f32, {kiln::dyn("B"), 16})},
                           [this](const std::vector<Var>& in) {
                               Var h = kiln::relu(kiln::linear(in[0], w1, b1));
                               Var logits = kiln::matmul(h, w2) + b2;
                               return std::vector<Var>{kiln::softmax(logits, -1), kiln::argmax(logits, 1)};
                           });
    }
    // The reference of both outputs.
    std::vector<RTensor> reference(const Tensor& x) const {
        RTensor h = ref::relu(ref::linear(ref::from_kiln(x), ref::from_kiln(w1), ref::from_kiln(b1)));
        RTensor logits = ref::add(ref::matmul(h, ref::from_kiln(w2)), ref::from_kiln(b2), DType::f32);
        return {ref::softmax(logits, -1), ref::argmax(logits, 1, false)};
    }
};

// Calls `f` from kThreads threads at once, kIters times each, cycling through batch sizes with
// a per-thread offset; compares against `expected` (computed single-threaded beforehand).
// Returns a description of the mismatches (empty when none). Doctest assertions are not made
// from the worker threads.
std::string hammer(const kiln::Function& f, const std::map<std::int64_t, Tensor>& inputs,
                   const std::map<std::int64_t, std::vector<Tensor>>& expected) {
    std::atomic<int> go{0};
    std::mutex mu;
    std::ostringstream problems;
    int problem_count = 0;
    auto report = [&](const std::string& s) {
        std::lock_guard<std::mutex> lock(mu);
        if (problem_count++ < 10) problems << s << "\n";
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            kiln::Function mine = t % 2 ? f : kiln::Function(f);  // copies share state
            while (go.load() == 0) std::this_thread::yield();
            for (int i = 0; i < kIters; ++i) {
                std::int64_t b = kBatches[(static_cast<std::size_t>(t) * 3 + static_cast<std::size_t>(i)) % kBatches.size()];
                const Tensor& x = inputs.at(b);
                const auto& want = expected.at(b);
                try {
                    std::vector<Tensor> got;
                    if (t % 4 == 3) {
                        // Caller-owned outputs through run().
                        got = {Tensor::empty(want[0].shape(), want[0].dtype()), Tensor::empty(want[1].shape(), want[1].dtype())};
                        std::vector<Tensor> in{x};
                        mine.run(in, got);
                    } else {
                        got = mine({x});
                    }
                    if (got.size() != want.size()) {
                        report("thread " + std::to_string(t) + " batch " + std::to_string(b) + ": wrong output count");
                        continue;
                    }
                    // 1e-5: the compiled matmul (blocked, FMA) rounds differently from the
                    // interpreter that computed `want`; a race would give garbage instead.
                    for (std::size_t k = 0; k < got.size(); ++k)
                        if (!ref::same_values(got[k], want[k], 1e-5))
                            report("thread " + std::to_string(t) + " iter " + std::to_string(i) + " batch " +
                                   std::to_string(b) + ": output " + std::to_string(k) + " differs");
                } catch (const std::exception& e) {
                    report("thread " + std::to_string(t) + " batch " + std::to_string(b) + ": threw " + e.what());
                }
            }
        });
    }
    go.store(1);
    for (auto& th : threads) th.join();
    if (problem_count) problems << problem_count << " problems in all";
    return problems.str();
}

void run_threads_case(kiln::Engine& engine) {
    Mlp mlp;
    kiln::Function f = engine.load(mlp.graph());
    std::map<std::int64_t, Tensor> inputs;
    std::map<std::int64_t, std::vector<Tensor>> expected;
    std::uint64_t calls = 0;
    for (std::int64_t b : kBatches) {
        CAPTURE(b);
        inputs[b] = Tensor::randn({b, 16}, 800 + static_cast<std::uint64_t>(b));
        expected[b] = f({inputs[b]});
        ++calls;
        REQUIRE(expected[b].size() == 2);
        // The single-threaded results are right, so the comparison below means something.
        auto want = mlp.reference(inputs[b]);
        ref::check_close(expected[b][0], want[0], DType::f32, ref::tol_for(DType::f32, 8), "softmax");
        ref::check_close(expected[b][1], want[1], DType::i64, {}, "argmax");
    }
    std::string problems = hammer(f, inputs, expected);
    calls += static_cast<std::uint64_t>(kThreads) * kIters;
    CHECK_MESSAGE(problems.empty(), problems);
    f.wait_for_compiles();
    kiln::FunctionStats s = f.stats();
    CHECK(s.calls == calls);
    CHECK(s.calls_by_tier[0] + s.calls_by_tier[1] + s.calls_by_tier[2] == calls);
    CHECK(s.failed_calls == 0);
    // After the storm, one more call of every size still gives the same answer.
    for (std::int64_t b : kBatches) {
        CAPTURE(b);
        auto again = f({inputs[b]});
        REQUIRE(again.size() == 2);
        CHECK(ref::same_values(again[0], expected[b][0], 1e-5));
        CHECK(ref::same_values(again[1], expected[b][1], 0));
    }
}

}  // namespace

TEST_CASE("threads: one Function called from 8 threads at tier 0 (interpreter only)") {
    kiln::Options o;
    o.jit = false;
    kiln::Engine engine(o);
    run_threads_case(engine);
}

TEST_CASE("threads: one Function called from 8 threads with the JIT on and low thresholds") {
    kiln::Options o;
    o.jit = true;
    o.async_compile = true;
    o.tier1_threshold = 1;
    o.tier2_threshold = 3;
    o.max_specializations = 2;
    o.compile_threads = 2;
    kiln::Engine engine(o);
    run_threads_case(engine);
}

TEST_CASE("threads: several Functions loaded and called concurrently from one Engine") {
    kiln::Options o;
    o.jit = false;
    kiln::Engine engine(o);
    Mlp mlp;
    kiln::Graph g = mlp.graph();
    std::vector<std::optional<std::string>> errors(4);
    std::vector<std::thread> threads;
    std::vector<std::vector<Tensor>> results(4);
    std::vector<kiln::Function> functions(4);  // kept alive: EngineStats aggregates live functions
    Tensor x = Tensor::randn({5, 16}, 900);
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            try {
                functions[t] = engine.load(g);  // load is thread-safe
                for (int i = 0; i < 10; ++i) results[t] = functions[t]({x});
            } catch (const std::exception& e) {
                errors[t] = e.what();
            }
        });
    for (auto& th : threads) th.join();
    auto want = mlp.reference(x);
    for (int t = 0; t < 4; ++t) {
        CAPTURE(t);
        CHECK_MESSAGE(!errors[t].has_value(), errors[t].value_or(""));
        REQUIRE(results[t].size() == 2);
        ref::check_close(results[t][0], want[0], DType::f32, ref::tol_for(DType::f32, 8), "softmax");
        ref::check_close(results[t][1], want[1], DType::i64, {}, "argmax");
    }
    kiln::EngineStats es = engine.stats();
    CHECK(es.functions == 4);
    CHECK(es.calls == 40);
    for (int t = 0; t < 4; ++t) CHECK(functions[t].stats().calls == 10);
}

TEST_CASE("threads: 8 threads' first compiled calls of a conv whose weights are packed once (kir::Derived) agree") {
    // A 7 x 7 conv of 64 channels: its constant weights get a packed copy, made by the first
    // compiled call of whichever thread comes first while the others wait for it.
    using namespace kiln;
    Tensor w = Tensor::randn({64, 40, 3, 3}, 31), b = Tensor::randn({64}, 32);
    Graph g = trace("packed_conv", {arg("x", DType::f32, {1, 40, 7, 7})}, [&](const std::vector<Var>& in) {
        return std::vector<Var>{relu(conv2d(in[0], w, b, {1, 1}, {1, 1}, {1, 1}, 1))};
    });
    Function fi = Engine(ref::interp_options()).load(g);
    Function fj = Engine(ref::tier2_options()).load(g);
    Tensor x = Tensor::randn({1, 40, 7, 7}, 33);
    const Tensor expected = fi({x})[0];
    for (int i = 0; i < 2; ++i) CHECK(ref::max_rel_diff(fj({x})[0], expected) < 1e-4);  // tier 0; the compile
    std::atomic<int> ready{0}, bad{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 8; ++t)
        ts.emplace_back([&] {
            ready.fetch_add(1);
            while (ready.load() < 8) std::this_thread::yield();
            if (!(ref::max_rel_diff(fj({x})[0], expected) < 1e-4)) bad.fetch_add(1);
        });
    for (auto& t : ts) t.join();
    CHECK(bad.load() == 0);
    CHECK(fj.stats().calls_by_tier[2] >= 8);
}
