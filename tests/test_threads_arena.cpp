// Arenas under concurrency: 8 threads call one compiled multi-group function whose
// intermediates live in arena blocks (views of them included), and 8 threads check blocks out
// of one ArenaPool. Each call must get a block of its own. Run under ThreadSanitizer by the
// CI (the test names contain "threads").
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "jit/exec/memory_plan.h"
#include "have_tier.h"
#include "reference.h"

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace kiln;

namespace {

constexpr int kThreads = 8;

[[maybe_unused]] Graph arena_graph() {  // used only with the LLVM tier
    Tensor w1 = Tensor::rand({32, 32}, 11, DType::f32, -0.3, 0.3), b1 = Tensor::randn({32}, 12);
    Tensor w2 = Tensor::rand({32, 32}, 13, DType::f32, -0.3, 0.3), b2 = Tensor::randn({32}, 14);
    Tensor gamma = Tensor::rand({32}, 15, DType::f32, 0.5, 1.5), beta = Tensor::randn({32}, 16);
    return trace("arena_threads", {arg("x", DType::f32, {dyn("B"), 32})}, [&](const std::vector<Var>& in) {
        Var x = in[0];
        Var h = relu(matmul(x, w1) + b1);                          // in the arena
        Var v = permute(reshape(h, {x.dim(0), 4, 8}), {0, 2, 1});  // views of it, read later
        Var a = softmax(matmul(h, w2) + b2, -1);                    // in the arena, lives with h
        Var n = layer_norm(a + h, gamma, beta);
        return std::vector<Var>{sum(softmax(v, -1), -1), n};
    });
}

}  // namespace

TEST_CASE("threads arena: 8 threads call one compiled multi-group function") {
    if (test::lacks_tier(2)) return;
    Options o;
    o.jit = true;
    o.async_compile = false;
    o.tier2_threshold = 1;
    Graph g = arena_graph();
    Function f = Engine(o).load(g);
    Function fi = Engine(ref::interp_options()).load(g);
    const std::vector<std::int64_t> batches{1, 2, 5, 8, 17, 33, 64};
    std::map<std::int64_t, Tensor> inputs;
    std::map<std::int64_t, std::vector<Tensor>> expected;
    std::vector<std::vector<Shape>> sets;
    for (auto b : batches) {
        inputs[b] = Tensor::randn({b, 32}, 300 + static_cast<std::uint64_t>(b));
        expected[b] = fi({inputs[b]});
        sets.push_back({{b, 32}});
    }
    f.warmup(sets);
    std::atomic<int> go{0};
    std::mutex mu;
    std::ostringstream problems;
    int count = 0;
    auto report = [&](const std::string& s) {
        std::lock_guard<std::mutex> lock(mu);
        if (count++ < 10) problems << s << "\n";
    };
    constexpr int kIters = 60;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            while (go.load() == 0) std::this_thread::yield();
            for (int i = 0; i < kIters; ++i) {
                const std::int64_t b = batches[static_cast<std::size_t>(t * 5 + i) % batches.size()];
                const auto& want = expected.at(b);
                std::vector<Tensor> in{inputs.at(b)};
                try {
                    std::vector<Tensor> got;
                    if (t % 2) {
                        for (const Tensor& w : want) got.push_back(Tensor::empty(w.shape(), w.dtype()));
                        f.run(in, got);
                    } else {
                        got = f(in);
                    }
                    for (std::size_t k = 0; k < want.size(); ++k)
                        if (!ref::same_values(got[k], want[k], 1e-4))
                            report("thread " + std::to_string(t) + " iter " + std::to_string(i) + " batch " +
                                   std::to_string(b) + ": output " + std::to_string(k) + " differs");
                } catch (const std::exception& e) {
                    report("thread " + std::to_string(t) + ": threw " + e.what());
                }
            }
        });
    go.store(1);
    for (auto& th : threads) th.join();
    CHECK_MESSAGE(count == 0, problems.str());
    FunctionStats s = f.stats();
    CHECK(s.calls == static_cast<std::uint64_t>(kThreads) * kIters);
    CHECK(s.calls_by_tier[2] == s.calls);
    CHECK(s.guard_failures == 0);
}

TEST_CASE("threads arena: concurrent checkouts of one arena pool are exclusive") {
    jit::ArenaPool pool;
    std::atomic<int> go{0}, bad{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            while (go.load() == 0) std::this_thread::yield();
            for (int i = 0; i < 500; ++i) {
                const std::size_t bytes = 256 + static_cast<std::size_t>((t * 131 + i * 17) % 4096);
                auto lease = pool.acquire(bytes);
                std::memset(lease.data(), t + 1, bytes);
                std::this_thread::yield();
                for (std::size_t k = 0; k < bytes; k += 61)
                    if (lease.data()[k] != static_cast<std::byte>(t + 1)) bad.fetch_add(1);
            }
        });
    go.store(1);
    for (auto& th : threads) th.join();
    CHECK(bad.load() == 0);
    CHECK(pool.pooled_blocks() <= jit::ArenaPool::kSlots);
}
