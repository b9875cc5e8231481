// Runs of blocked-layout conv groups image by image (jit/exec/sample_runs.h): which groups
// form a run and at which batches, the memory plan's image-sized blocks and the live ranges of
// what a run touches, and random conv chains at batches 2-9 run image by image on tier 2
// against the interpreter (and with KILN_SAMPLE_RUNS=0, group by group).
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "jit/exec/memory_plan.h"
#include "jit/exec/run_plan.h"
#include "jit/exec/sample_runs.h"
#include "jit/exec/shape_plan.h"
#include "random_graphs.h"
#include "reference.h"

#include <memory>
#include <string>
#include <vector>

using namespace kiln;
namespace diff = kiln::test::diff;

namespace {

// x [B, 8, 12, 12]: a 1x1 conv to 32 channels, a depthwise 3x3 and a 1x1 conv with a
// residual of the first conv's output, then a global average pool (which ends the run) and a
// 1x1 conv after it.
Graph chain_graph() {
    const Tensor w1 = Tensor::rand({32, 8, 1, 1}, 1, DType::f32, -0.4, 0.4), b1 = Tensor::rand({32}, 2, DType::f32, -0.5, 0.5);
    const Tensor w2 = Tensor::rand({32, 1, 3, 3}, 3, DType::f32, -0.4, 0.4);
    const Tensor w3 = Tensor::rand({32, 32, 1, 1}, 4, DType::f32, -0.2, 0.2);
    const Tensor w4 = Tensor::rand({16, 32, 1, 1}, 5, DType::f32, -0.2, 0.2);
    return trace("chain", {arg("x", DType::f32, {dyn("B"), 8, 12, 12})}, [&](const std::vector<Var>& in) {
        const Var a = relu(conv2d(in[0], w1, Var(b1)));
        const Var d = clamp(conv2d(a, w2, Var(), {1, 1}, {1, 1}, {1, 1}, 32), 0.0, 6.0);
        const Var e = conv2d(d, w3) + a;
        const Var p = global_avg_pool2d(e);
        return std::vector<Var>{conv2d(p, w4)};
    });
}

struct Planned {
    std::shared_ptr<const jit::Executable> x;
    std::unique_ptr<jit::ShapePlan> sp;
    std::vector<bool> compilable;
};

// The plan of `g` at input shape `x` (its batch first). `min_bytes`:
// Executable::image_run_min_bytes (0: KILN_SAMPLE_RUNS=1, whatever the size).
Planned planned(const Graph& g, const Shape& x, bool sample_runs = true, std::int64_t min_bytes = 0) {
    jit::PipelineSettings s;
    s.nchwc = passes::NchwcMode::all;
    s.sample_runs = sample_runs;
    s.image_run_min_bytes = min_bytes;
    Planned p{jit::lower_function(g.impl(), s), nullptr, {}};
    p.sp = jit::make_shape_plan(*p.x, {x}, "test");
    for (const auto& gr : p.x->groups) p.compilable.push_back(gr->kernel.has_value());
    return p;
}

bool is_nchwc_conv(const jit::Executable& x, std::int32_t i) {
    const auto& k = x.groups[static_cast<std::size_t>(i)]->kernel;
    return k && k->nchwc;
}

}  // namespace

TEST_CASE("sample runs: consecutive blocked-layout conv groups at batch > 1, none at batch 1 or when turned off") {
    const Graph g = chain_graph();
    for (std::int64_t batch : {2, 3, 8}) {
        const Planned p = planned(g, {batch, 8, 12, 12});
        const std::vector<jit::SampleRun> runs = jit::find_sample_runs(*p.x, *p.sp, p.compilable);
        INFO("batch " << batch);
        REQUIRE(runs.size() == 1);
        const jit::SampleRun& r = runs[0];
        CHECK(r.batch == batch);
        CHECK(r.last - r.first + 1 >= 3);  // the three convs before the pool
        for (std::int32_t i = r.first; i <= r.last; ++i) CHECK(is_nchwc_conv(*p.x, i));
        // Maximal: the groups beside it are no blocked-layout convs of the same batch.
        if (r.first > 0) CHECK_FALSE(is_nchwc_conv(*p.x, r.first - 1));
        // A group left out of the compilable ones breaks the run there.
        std::vector<bool> some = p.compilable;
        some[static_cast<std::size_t>(r.first + 1)] = false;
        for (const jit::SampleRun& q : jit::find_sample_runs(*p.x, *p.sp, some))
            CHECK((q.last < r.first + 1 || q.first > r.first + 1));
    }
    const Planned one = planned(g, {1, 8, 12, 12});
    CHECK(jit::find_sample_runs(*one.x, *one.sp, one.compilable).empty());
    const Planned off = planned(g, {4, 8, 12, 12}, false);
    CHECK(jit::find_sample_runs(*off.x, *off.sp, off.compilable).empty());
}

TEST_CASE("sample runs: by default only groups whose largest activation is at least image_run_min_bytes an image") {
    // x [B, 16, 64, 64] (256 KB an image): a 1x1 conv to 48 channels (768 KB), a depthwise 3x3
    // and a 1x1 conv back to 16, then the small chain's sizes after a 4 x 4 average pool.
    const Tensor w1 = Tensor::rand({48, 16, 1, 1}, 1, DType::f32, -0.4, 0.4);
    const Tensor w2 = Tensor::rand({48, 1, 3, 3}, 2, DType::f32, -0.4, 0.4);
    const Tensor w3 = Tensor::rand({16, 48, 1, 1}, 3, DType::f32, -0.2, 0.2);
    const Tensor w4 = Tensor::rand({48, 16, 1, 1}, 4, DType::f32, -0.4, 0.4);
    const Tensor w5 = Tensor::rand({48, 1, 3, 3}, 5, DType::f32, -0.4, 0.4);
    const Graph g = trace("large", {arg("x", DType::f32, {dyn("B"), 16, 64, 64})}, [&](const std::vector<Var>& in) {
        const Var a = conv2d(relu(conv2d(relu(conv2d(in[0], w1)), w2, Var(), {1, 1}, {1, 1}, {1, 1}, 48)), w3);
        const Var p = avg_pool2d(a, {4, 4}, {4, 4});
        return std::vector<Var>{conv2d(relu(conv2d(p, w4)), w5, Var(), {1, 1}, {1, 1}, {1, 1}, 48)};
    });
    const Planned all = planned(g, {4, 16, 64, 64});
    const Planned sized = planned(g, {4, 16, 64, 64}, true, limits::image_run_min_bytes);
    const std::vector<jit::SampleRun> every = jit::find_sample_runs(*all.x, *all.sp, all.compilable);
    const std::vector<jit::SampleRun> large = jit::find_sample_runs(*sized.x, *sized.sp, sized.compilable);
    REQUIRE(every.size() == 2);  // before the pool and after it
    REQUIRE(large.size() == 1);  // 768 KB an image before the pool; 48 KB after it
    CHECK(large[0].first == every[0].first);
    CHECK(large[0].last == every[0].last);
}

TEST_CASE("sample runs: the memory plan gives a run's own values one image's bytes and keeps the rest live across it") {
    const Graph g = chain_graph();
    const std::int64_t batch = 4;
    const Planned p = planned(g, {batch, 8, 12, 12});
    const std::vector<jit::SampleRun> runs = jit::find_sample_runs(*p.x, *p.sp, p.compilable);
    REQUIRE(runs.size() == 1);
    const jit::SampleRun r = runs[0];
    const ir::Graph& ig = *p.x->graph;
    const jit::MemoryPlan flat = jit::plan_memory(ig, p.x->partition, p.compilable, p.sp->shapes);
    const jit::MemoryPlan mp = jit::plan_memory(ig, p.x->partition, p.compilable, p.sp->shapes, runs);
    REQUIRE(mp.runs.size() == 1);
    int inside = 0, across = 0;
    for (std::size_t v = 0; v < ig.nodes.size(); ++v) {
        CHECK(flat.image_bytes[v] == 0);
        if (mp.offset[v] < 0) continue;
        const jit::LiveBuffer& f = flat.live[v];
        const jit::LiveBuffer& b = mp.live[v];
        CAPTURE(v);
        if (f.first >= r.first && f.last <= r.last) {  // computed and read inside the run
            ++inside;
            CHECK(mp.image_bytes[v] * batch == static_cast<std::int64_t>(f.bytes));
            CHECK(b.bytes == f.bytes / static_cast<std::size_t>(batch));
            CHECK((b.first == f.first && b.last == f.last));
        } else if (f.last >= r.first && f.first <= r.last) {  // touches the run: live across all of it
            ++across;
            CHECK(mp.image_bytes[v] == 0);
            CHECK(b.bytes == f.bytes);
            CHECK(b.first <= r.first);
            CHECK(b.last >= r.last);
        }
    }
    CHECK(inside >= 2);  // the depthwise conv's output and the first conv's (read again by the residual)
    CHECK(across >= 1);  // the run's last output, which the pool reads
    // No two values of one region (the arena, the image region) live at once share memory.
    for (std::size_t a = 0; a < mp.offset.size(); ++a)
        for (std::size_t c = a + 1; c < mp.offset.size(); ++c) {
            if (mp.offset[a] < 0 || mp.offset[c] < 0 || (mp.image_bytes[a] > 0) != (mp.image_bytes[c] > 0)) continue;
            const jit::LiveBuffer &la = mp.live[a], &lc = mp.live[c];
            const auto oa = static_cast<std::size_t>(mp.offset[a]), oc = static_cast<std::size_t>(mp.offset[c]);
            const bool together = la.first <= lc.last && lc.first <= la.last;
            CHECK_FALSE((together && oa < oc + lc.bytes && oc < oa + la.bytes));
        }
    for (std::size_t v = 0; v < mp.offset.size(); ++v)
        if (mp.offset[v] >= 0)
            CHECK(static_cast<std::size_t>(mp.offset[v]) + mp.live[v].bytes <=
                  (mp.image_bytes[v] > 0 ? mp.image_region_bytes : mp.arena_bytes));
    CHECK(mp.image_region_bytes > 0);
    CHECK(mp.arena_bytes + mp.image_region_bytes < flat.arena_bytes);
}

TEST_CASE("sample runs: random conv chains at batches 2-9 image by image on tier 2 match the interpreter") {
    Options on = ref::tier2_options(), off = on;
    on.nchwc = off.nchwc = "1";
    on.sample_runs = "1";
    off.sample_runs = "0";
    std::uint64_t images = 0;
    int graphs = 0;
    for (std::uint64_t seed : diff::seeds(7600, 20)) {
        const diff::Case c = diff::nchwc_case(seed);
        Function want = ref::interp_engine().load(c.graph);
        Function f = Engine(on).load(c.graph), fo = Engine(off).load(c.graph);
        const std::vector<Tensor>& x = c.calls.front();
        for (std::int64_t batch : {2, 3, 5, 9}) {
            std::vector<Tensor> in;
            for (const Tensor& t : x) {
                Shape s = t.shape();
                s[0] = batch;
                in.push_back(Tensor::rand(s, seed * 10 + static_cast<std::uint64_t>(batch), t.dtype(), -1.0, 1.0));
            }
            const std::vector<Tensor> w = want(in);
            for (int call = 0; call < 4; ++call) {  // tier 2 from the third call
                const std::vector<Tensor> got = f(in), got_off = fo(in);
                REQUIRE(got.size() == w.size());
                for (std::size_t i = 0; i < w.size(); ++i) {
                    const std::string d = diff::compare(got[i], w[i], c.tol_scale);
                    CHECK_MESSAGE(d.empty(), "batch " << batch << " call " << call << " output " << i << ": " << d << "\n"
                                                      << diff::describe(c));
                    const std::string d_off = diff::compare(got_off[i], w[i], c.tol_scale);
                    CHECK_MESSAGE(d_off.empty(), "KILN_SAMPLE_RUNS=0, batch " << batch << " output " << i << ": " << d_off);
                }
            }
        }
        images += f.stats().image_by_image_calls;
        CHECK(fo.stats().image_by_image_calls == 0);
        ++graphs;
    }
    MESSAGE("nchwc chains: " << graphs << " graphs; group calls run image by image: " << images);
    CHECK(images > 0);
}
