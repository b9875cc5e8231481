// Runs of blocked-layout conv groups image by image (jit/exec/sample_runs.h) under concurrent
// calls: threads calling one function at random batches while its groups tier up in the
// background, each image of a run a task of its own where the batch allows (the images of
// concurrent calls then share the kernel threads, each in its own image block), every output
// checked against the interpreter.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "random_graphs.h"
#include "reference.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

using namespace kiln;
namespace diff = kiln::test::diff;

TEST_CASE("threads: concurrent calls at random batches run conv chains image by image and match the interpreter") {
    // A chain with a residual inside the run and a global average pool after it.
    const Tensor w1 = Tensor::rand({24, 8, 1, 1}, 1, DType::f32, -0.4, 0.4), b1 = Tensor::rand({24}, 2, DType::f32, -0.5, 0.5);
    const Tensor w2 = Tensor::rand({24, 1, 3, 3}, 3, DType::f32, -0.4, 0.4);
    const Tensor w3 = Tensor::rand({24, 24, 1, 1}, 4, DType::f32, -0.2, 0.2);
    const Graph g = trace("images", {arg("x", DType::f32, {dyn("B"), 8, 10, 10})}, [&](const std::vector<Var>& in) {
        const Var a = relu(conv2d(in[0], w1, Var(b1)));
        const Var d = clamp(conv2d(a, w2, Var(), {1, 1}, {1, 1}, {1, 1}, 24), 0.0, 6.0);
        const Var e = conv2d(d, w3) + a;
        return std::vector<Var>{e, global_avg_pool2d(e)};
    });
    Options o = ref::jit_options(1, 2, /*async=*/true);
    o.nchwc = "1";
    o.sample_runs = "1";
    Function f = Engine(o).load(g);
    Function want = ref::interp_engine().load(g);
    // Each thread makes at least kCalls calls, and goes on (up to kMaxCalls) until some call has
    // run a run image by image: the background compiles may take a while on a busy host.
    constexpr int kThreads = 4, kCalls = 24, kMaxCalls = 4000;
    std::atomic<int> bad{0}, done{0};
    std::atomic<bool> imaged{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            for (int c = 0; c < kMaxCalls && (c < kCalls || !imaged.load()); ++c) {
                if (t == 0 && c % 8 == 7 && f.stats().image_by_image_calls > 0) imaged.store(true);
                const std::int64_t batch = 1 + (t * 7 + c * 3) % 6;
                const Tensor x = Tensor::rand({batch, 8, 10, 10}, static_cast<std::uint64_t>(t * 100 + c), DType::f32, -1.0, 1.0);
                const std::vector<Tensor> got = f({x}), ref = want({x});
                for (std::size_t i = 0; i < ref.size(); ++i)
                    if (!diff::compare(got[i], ref[i], 4.0).empty()) bad.fetch_add(1);
                done.fetch_add(1);
            }
        });
    for (auto& th : threads) th.join();
    CHECK(done.load() >= kThreads * kCalls);
    CHECK(bad.load() == 0);
    const FunctionStats s = f.stats();
    INFO(s.to_json());
    CHECK(s.image_by_image_calls > 0);
}
