// The per-call dispatch path (issue 4): the shape-plan cache (lock-free lookups, bounded,
// plans owned per call past its capacity), the profile's signature counters (lock-free for a
// signature already kept; histograms derived when read; bounded), sampled group timing, and
// many threads calling one Function across more signatures than the caches keep. Run under
// ThreadSanitizer by `ctest -R thread`.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "jit/exec/shape_plan.h"
#include "jit/exec/run_plan.h"
#include "profiling/profile.h"
#include "src/ir/bindings.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

using namespace kiln;

namespace {

Graph scaled_rows() {
    return trace("scaled_rows", {arg("x", DType::f32, {dyn("B"), 4})},
                 [](const std::vector<Var>& in) { return std::vector<Var>{softmax(in[0] * 2.0, -1)}; });
}

// The concrete shapes of input 0 for batch `b`.
std::vector<Shape> batch_shapes(std::int64_t b) { return {{b, 4}}; }

}  // namespace

TEST_CASE("dispatch: the shape-plan cache keeps kCapacity plans, found by shapes or tensors; past that plans are owned") {
    Graph g = scaled_rows();
    const auto plan = jit::lower_function(g.impl());
    jit::ShapePlanCache cache;
    std::vector<const jit::ShapePlan*> kept;
    for (std::int64_t b = 0; b < static_cast<std::int64_t>(jit::ShapePlanCache::kCapacity); ++b) {
        jit::ShapePlanRef r = cache.insert(jit::make_shape_plan(*plan, batch_shapes(b), "test"));
        REQUIRE(r.cached());
        kept.push_back(r.get());
    }
    CHECK(cache.size() == jit::ShapePlanCache::kCapacity);
    for (std::int64_t b = 0; b < static_cast<std::int64_t>(kept.size()); ++b) {
        CHECK(cache.find(batch_shapes(b)) == kept[static_cast<std::size_t>(b)]);
        const Tensor x = Tensor::zeros({b, 4});
        CHECK(cache.find(std::span<const Tensor>(&x, 1)) == kept[static_cast<std::size_t>(b)]);
    }
    // The same shapes again (as a thread that lost a race would insert them): the kept plan.
    jit::ShapePlanRef again = cache.insert(jit::make_shape_plan(*plan, batch_shapes(3), "test"));
    CHECK(again.get() == kept[3]);
    // Full: a new signature's plan comes back owned by the caller, and is not found later.
    jit::ShapePlanRef extra = cache.insert(jit::make_shape_plan(*plan, batch_shapes(1000), "test"));
    CHECK_FALSE(extra.cached());
    REQUIRE(extra.get() != nullptr);
    CHECK(extra->output_shapes == std::vector<Shape>{{1000, 4}});
    CHECK(cache.find(batch_shapes(1000)) == nullptr);
    CHECK(cache.size() == jit::ShapePlanCache::kCapacity);
    // Shapes that differ only in rank or in the number of inputs are other keys.
    CHECK(cache.find(std::vector<Shape>{{4}}) == nullptr);
    CHECK(cache.find(std::vector<Shape>{{0, 4}, {0, 4}}) == nullptr);
}

TEST_CASE("dispatch: profile signatures count through their counters; past kMaxSignatures calls count as other") {
    Graph g = scaled_rows();
    profiling::FunctionProfile p(*g.impl(), 0);
    auto bind = [](std::int64_t b) {
        ir::Bindings bs;
        bs.bind("B", b);
        return bs;
    };
    // Planned but never called: kept, but listed nowhere.
    profiling::FunctionProfile::Signature* s7 = p.signature(batch_shapes(7), bind(7));
    REQUIRE(s7 != nullptr);
    CHECK(p.signatures().empty());
    CHECK(p.dim_histograms().empty());
    CHECK(p.signature(batch_shapes(7), bind(7)) == s7);  // found again, without a lock
    for (int i = 0; i < 3; ++i) p.record_call(s7, bind(7));
    p.record_call(batch_shapes(2), bind(2));
    auto sigs = p.signatures();
    REQUIRE(sigs.size() == 2);
    CHECK(sigs[0].shapes == batch_shapes(7));
    CHECK(sigs[0].calls == 3);
    CHECK(sigs[1].calls == 1);
    auto h = p.dim_histograms();
    CHECK(h.at("B").at(7) == 3);
    CHECK(h.at("B").at(2) == 1);
    // Fill the table; then new signatures are counted together, and still in the histograms.
    const auto max = static_cast<std::int64_t>(profiling::FunctionProfile::kMaxSignatures);
    for (std::int64_t b = 100; b < 100 + max; ++b) p.record_call(batch_shapes(b), bind(b));
    CHECK(p.signatures().size() == profiling::FunctionProfile::kMaxSignatures);
    CHECK(p.other_signatures() == 2);  // the two kept first left room for max - 2 of these
    CHECK(p.signature(batch_shapes(5000), bind(5000)) == nullptr);
    p.record_call(batch_shapes(5000), bind(5000));
    p.record_call(batch_shapes(7), bind(7));  // still kept
    CHECK(p.other_signatures() == 3);
    h = p.dim_histograms();
    CHECK(h.at("B").at(7) == 4);
    CHECK(h.at("B").size() == profiling::FunctionProfile::kMaxSignatures);  // bounded: later values dropped
    CHECK(h.at("B").count(5000) == 0);
}

TEST_CASE("dispatch: group timing is sampled, every call at first, then one in kTimingPeriod") {
    static_assert(jit::timing_weight(0) == 1);
    static_assert(jit::timing_weight(jit::kTimingPeriod - 1) == 1);
    static_assert(jit::timing_weight(jit::kTimingPeriod) == jit::kTimingPeriod);
    static_assert(jit::timing_weight(jit::kTimingPeriod + 1) == 0);
    static_assert(jit::timing_weight(5 * jit::kTimingPeriod) == jit::kTimingPeriod);
    // The weights of the first n calls add up to n within kTimingPeriod - 1.
    std::uint64_t sum = 0;
    for (std::uint64_t i = 0; i < 1000; ++i) {
        sum += jit::timing_weight(i);
        CHECK(sum + jit::kTimingPeriod > i + 1);
        CHECK(sum < i + 1 + jit::kTimingPeriod);
    }
    // Through the engine: groups have a time from their first call on, and timed_calls says
    // how many calls it stands for (the sum of the weights), so that a window's mean is the
    // change of total_ms over the change of timed_calls: after 1, then 2.5 periods of calls.
    Options o;
    o.jit = false;
    Function f = Engine(o).load(scaled_rows());
    f({Tensor::randn({3, 4}, 1)});
    FunctionStats s = f.stats();
    REQUIRE(!s.groups.empty());
    for (const auto& gr : s.groups) {
        CHECK(gr.total_ms > 0.0);
        CHECK(gr.timed_calls == 1);
    }
    const std::uint64_t n = 5 * jit::kTimingPeriod / 2;
    for (std::uint64_t i = 1; i < n; ++i) f({Tensor::randn({3, 4}, 1)});
    std::uint64_t weights = 0;
    for (std::uint64_t i = 0; i < n; ++i) weights += jit::timing_weight(i);
    CHECK(weights != n);  // the case where dividing by calls is off
    s = f.stats();
    for (const auto& gr : s.groups) {
        CHECK(gr.calls == n);
        CHECK(gr.timed_calls == weights);
    }
    CHECK(s.to_json().find("\"timed_calls\":" + std::to_string(weights)) != std::string::npos);
}

TEST_CASE("dispatch: threads call one Function across more signatures than the caches keep") {
    Options o;
    o.async_compile = true;
    o.tier1_threshold = 1;
    Function f = Engine(o).load(scaled_rows());
    Function ref = Engine([] {
                       Options r;
                       r.jit = false;
                       return r;
                   }()).load(scaled_rows());
    constexpr int kThreads = 6, kIters = 60;
    constexpr std::int64_t kBatches = jit::ShapePlanCache::kCapacity + 16;  // some plans owned per call
    std::vector<Tensor> xs, want;
    for (std::int64_t b = 0; b < kBatches; ++b) {
        xs.push_back(Tensor::randn({b, 4}, static_cast<std::uint64_t>(b)));
        want.push_back(ref({xs.back()})[0]);
    }
    std::atomic<bool> go{false};
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            while (!go.load()) std::this_thread::yield();
            std::vector<Tensor> out(1);
            for (int i = 0; i < kIters; ++i) {
                const auto k = static_cast<std::size_t>((t * 17 + i * 5) % kBatches);
                out[0] = Tensor::empty(want[k].shape());
                if (i % 2) f.run(std::span<const Tensor>(&xs[k], 1), out);
                else out = f({xs[k]});
                const float* a = out[0].data_as<float>();
                const float* e = want[k].data_as<float>();
                for (std::int64_t j = 0; j < want[k].numel(); ++j)
                    if (std::abs(a[j] - e[j]) > 1e-5f * (1.0f + std::abs(e[j]))) {
                        wrong.fetch_add(1);
                        break;
                    }
            }
        });
    go = true;
    for (auto& t : threads) t.join();
    f.wait_for_compiles();
    CHECK(wrong.load() == 0);
    FunctionStats s = f.stats();
    CHECK(s.calls == static_cast<std::uint64_t>(kThreads * kIters));
    std::uint64_t by_sig = 0, by_dim = 0;
    for (const auto& sig : s.signatures) by_sig += sig.calls;
    for (const auto& [value, n] : s.dim_histograms.at("B")) by_dim += n;
    CHECK(by_sig == s.calls);  // fewer than kMaxSignatures signatures: all kept
    CHECK(by_dim == s.calls);
    for (const auto& gr : s.groups) CHECK(gr.calls == s.calls);
}
