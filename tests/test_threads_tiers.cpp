// Tier 1 through the Engine (tier 0 -> 1 -> 2, deopt from tier 2 to tier 1) and the
// background compile queue (calls never wait for a compile; hot groups compile first;
// a function destroyed with compiles queued or running is safe).
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "jit/tiering/compile_queue.h"
#include "jit/tiering/tier_manager.h"
#if defined(KILN_HAVE_ASMJIT)
#include "tiers/asmjit/asmjit_tier.h"
#endif
#include "have_tier.h"
#include "reference.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace kiln;

namespace {

using ref::kNever;

Graph chain_and_rows() {
    Tensor g = Tensor::rand({32}, 3, DType::f32, 0.5, 1.5), b = Tensor::randn({32}, 4);
    return trace("chain_rows", {arg("x", DType::f32, {dyn("B"), 32}), arg("y", DType::f32, {32})},
                 [&](const std::vector<Var>& in) {
                     Var h = gelu(in[0] * in[1] + 0.5, true) * sigmoid(in[0]);
                     return std::vector<Var>{softmax(layer_norm(h, g, b), -1), sum(h, -1)};
                 });
}


void check_same(Function& f, Function& ref, const std::vector<Tensor>& in) {
    auto a = f(in);
    auto b = ref(in);
    REQUIRE(a.size() == b.size());
    for (std::size_t k = 0; k < a.size(); ++k) CHECK(ref::max_rel_diff(a[k], b[k]) < 1e-5);
}


}  // namespace

TEST_CASE("tier1: groups reach tier 1 after KILN_TIER1_THRESHOLD calls; one version serves every shape") {
    if (test::lacks_tier(1)) return;
    Graph g = chain_and_rows();
    Function fj = Engine(ref::jit_options(2, kNever, false)).load(g);
    Function fi = Engine(ref::interp_options()).load(g);
    Tensor y = Tensor::randn({32}, 2);
    for (int i = 0; i < 3; ++i) check_same(fj, fi, {Tensor::randn({8, 32}, 10 + static_cast<std::uint64_t>(i)), y});
    FunctionStats s = fj.stats();
    INFO(s.to_json());
    CHECK(s.calls_by_tier[0] == 2);
    CHECK(s.calls_by_tier[1] == 1);
    for (const auto& gr : s.groups) CHECK(gr.tier == 1);
    // Other batch sizes run on the same generic code: no guard failure, no new compile.
    const std::uint64_t compiles = s.compiles;
    for (std::int64_t b : {1, 3, 17, 64}) check_same(fj, fi, {Tensor::randn({b, 32}, static_cast<std::uint64_t>(b)), y});
    s = fj.stats();
    CHECK(s.compiles == compiles);
    CHECK(s.guard_failures == 0);
    CHECK(s.calls_by_tier[1] == 5);
}

TEST_CASE("tier1: hot signatures move on to tier 2; a guard miss there runs tier 1 and counts a deopt") {
    if (test::lacks_tier(1) || test::lacks_tier(2)) return;
    Graph g = chain_and_rows();
    Function fj = Engine(ref::jit_options(1, 3, false)).load(g);
    Function fi = Engine(ref::interp_options()).load(g);
    Tensor y = Tensor::randn({32}, 2), x = Tensor::randn({8, 32}, 1);
    for (int i = 0; i < 6; ++i) check_same(fj, fi, {x, y});
    FunctionStats s = fj.stats();
    INFO(s.to_json());
    CHECK(s.calls_by_tier[1] >= 1);
    CHECK(s.calls_by_tier[2] >= 1);
    for (const auto& gr : s.groups) CHECK(gr.tier == 2);
    const std::uint64_t t1_calls = s.calls_by_tier[1];
    check_same(fj, fi, {Tensor::randn({5, 32}, 7), y});  // a batch size the specialisations do not cover
    s = fj.stats();
    CHECK(s.calls_by_tier[1] == t1_calls + 1);
    CHECK(s.guard_failures >= 1);
    CHECK(s.deopts == s.guard_failures);
}

TEST_CASE("compile queue: jobs run highest priority first, in order among equals; tickets wait and cancel") {
    jit::CompileQueue q(1);
    auto a = q.new_ticket(), b = q.new_ticket();
    std::mutex mu;
    std::vector<int> order;
    std::atomic<bool> release{false}, holding{false};
    // The first job holds the only worker until the others are queued (they are queued once it
    // runs: before that the worker could take one of them first).
    q.submit(a, 0.0, [&] {
        holding = true;
        while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    while (!holding.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    auto rec = [&](int v) {
        return [&, v] {
            std::lock_guard<std::mutex> lock(mu);
            order.push_back(v);
        };
    };
    q.submit(a, 0.1, rec(1));
    q.submit(a, 1.5, rec(2));  // a tier-1-like boost: first
    q.submit(a, 0.7, rec(3));
    q.submit(a, 0.7, rec(4));
    q.submit(b, 0.9, rec(99));
    q.cancel(b);  // b's queued job is removed (without waiting behind a's); nothing of b runs
    CHECK(b->pending() == 0);
    q.submit(b, 5.0, rec(100));  // dropped: b is cancelled
    release = true;
    a->wait_idle();
    CHECK(a->pending() == 0);
    CHECK(order == std::vector<int>{2, 3, 4, 1});
}

TEST_CASE("compile queue: calls do not wait for a slow compile; they run on the lower tier meanwhile") {
    if (test::lacks_tier(2)) return;
    // Every tier-2 compile sleeps kDelay first. A call that waited for the compile it queued would
    // return with tier-2 code published, and the calls after it would run that code; so it is
    // the counts that tell: the calls of a burst made right after the compiles were queued all ran
    // below tier 2 and no tier-2 compile had finished by its end; the call after them ran tier 2.
    constexpr auto kDelay = std::chrono::milliseconds(1500);
    constexpr std::uint64_t kCalls = 40;
    jit::set_compile_delay_for_testing(kDelay);
    Graph g = chain_and_rows();
    Function fj = Engine(ref::jit_options(1, 2, true)).load(g);
    Function fi = Engine(ref::interp_options()).load(g);
    Tensor x = Tensor::randn({8, 32}, 1), y = Tensor::randn({32}, 2);
    auto tier2_compiles = [](const FunctionStats& s) {
        std::uint64_t n = 0;
        for (const auto& gr : s.groups) n += gr.compiles_by_tier[2];
        return n;
    };
    for (std::uint64_t i = 0; i < kCalls; ++i) check_same(fj, fi, {x, y});  // the second call queues the tier-2 compiles
    const FunctionStats during = fj.stats();
    jit::set_compile_delay_for_testing(std::chrono::milliseconds(0));
    fj.wait_for_compiles();
    check_same(fj, fi, {x, y});
    const FunctionStats after = fj.stats();
    INFO("during: " << during.to_json());
    INFO("after: " << after.to_json());
    CHECK(during.calls == kCalls);
    CHECK(during.calls_by_tier[2] == 0);  // no call ran tier-2 code: none waited for its compile
    CHECK(tier2_compiles(during) == 0);   // the compiles were still in flight after the burst
    CHECK(tier2_compiles(after) >= 1);
    CHECK(after.calls_by_tier[2] == 1);
}

TEST_CASE("compile queue: a function destroyed with compiles queued or running is safe") {
    if (test::lacks_tier(2)) return;
    jit::set_compile_delay_for_testing(std::chrono::milliseconds(200));
    Engine e(ref::jit_options(1, 1, true));
    Graph g = chain_and_rows();
    Tensor y = Tensor::randn({32}, 2);
    for (int i = 0; i < 4; ++i) {
        Function f = e.load(g);
        for (std::int64_t b : {2, 3, 4}) f({Tensor::randn({b, 32}, static_cast<std::uint64_t>(b)), y});
        // f goes out of scope here with compiles queued behind a sleeping one.
    }
    jit::set_compile_delay_for_testing(std::chrono::milliseconds(0));
    Function f = e.load(g);
    f({Tensor::randn({2, 32}, 1), y});
    f.wait_for_compiles();
    CHECK(e.stats().functions >= 1);
}

TEST_CASE("code cache: two functions that need the same code at once compile it once (the second waits, then hits)") {
    if (test::lacks_tier(2)) return;
    // Each tier-2 compile sleeps first, so the two calls' compiles overlap for sure.
    jit::set_compile_delay_for_testing(std::chrono::milliseconds(300));
    Engine e(ref::jit_options(kNever, 1, false));  // compiles on the calling threads
    Graph g = chain_and_rows();
    Function f1 = e.load(g), f2 = e.load(g), fi = Engine(ref::interp_options()).load(g);
    const std::vector<Tensor> in{Tensor::randn({8, 32}, 1), Tensor::randn({32}, 2)};
    std::thread a([&] { (void)f1(in); }), b([&] { (void)f2(in); });
    a.join();
    b.join();
    jit::set_compile_delay_for_testing(std::chrono::milliseconds(0));
    check_same(f1, fi, in);
    check_same(f2, fi, in);
    const FunctionStats s1 = f1.stats(), s2 = f2.stats();
    INFO(s1.to_json());
    INFO(s2.to_json());
    const std::uint64_t groups = s1.groups.size();
    CHECK(groups >= 2);
    CHECK(s1.compiles + s2.compiles == groups);                    // each kernel compiled once
    CHECK(s1.code_cache_hits + s2.code_cache_hits == groups);      // and found once by the other
    CHECK(s1.calls_by_tier[2] + s2.calls_by_tier[2] >= 2);
}
