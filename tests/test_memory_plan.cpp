// Memory planning (jit/exec/memory_plan.h): the layout of intermediates in one arena by liveness,
// which values may live there (graph outputs and anything they view stay out), the pool of
// arena blocks, compiled multi-group plans with views against the interpreter on changing
// shapes, and the allocations of a steady-state compiled call (counted by replacing the
// global operator new in this binary, and with core::host_alloc_count()).
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "jit/exec/shape_plan.h"
#include "jit/exec/memory_plan.h"
#include "jit/exec/sample_runs.h"
#include "jit/exec/run_plan.h"
#include "reference.h"
#include "src/core/allocator.h"
#include "src/passes/fuse.h"
#include "have_tier.h"
#if defined(KILN_HAVE_ASMJIT)
#include "tiers/asmjit/asmjit_tier.h"
#endif
#if defined(KILN_HAVE_LLVM)
#include "tiers/llvm/llvm_tier.h"
#endif

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <new>
#include <random>
#include <string>

// ---- allocation counting: every C++ allocation of the process, while g_counting is set ----
namespace {
std::atomic<bool> g_counting{false};
std::atomic<std::uint64_t> g_news{0};

void* counted_malloc(std::size_t n) {
    if (g_counting.load(std::memory_order_relaxed)) g_news.fetch_add(1, std::memory_order_relaxed);
    return std::malloc(n ? n : 1);
}
void* counted_aligned(std::size_t n, std::align_val_t al) {
    if (g_counting.load(std::memory_order_relaxed)) g_news.fetch_add(1, std::memory_order_relaxed);
    const auto a = std::max(static_cast<std::size_t>(al), sizeof(void*));
    return std::aligned_alloc(a, (std::max<std::size_t>(n, 1) + a - 1) / a * a);
}
// Out of line, so that the compiler does not pair operator new with free() and warn.
[[gnu::noinline]] void counted_free(void* p) noexcept { std::free(p); }
void* or_throw(void* p) {
    if (!p) throw std::bad_alloc();
    return p;
}
}  // namespace

void* operator new(std::size_t n) { return or_throw(counted_malloc(n)); }
void* operator new[](std::size_t n) { return or_throw(counted_malloc(n)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
void* operator new(std::size_t n, std::align_val_t a) { return or_throw(counted_aligned(n, a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return or_throw(counted_aligned(n, a)); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept { return counted_aligned(n, a); }
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept { return counted_aligned(n, a); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { counted_free(p); }

using namespace kiln;

namespace {

struct Counts {
    std::uint64_t news = 0;   // operator new calls
    std::uint64_t blocks = 0;  // tensor memory blocks (core::host_alloc)
};
template <class Fn> Counts count_allocations(Fn&& fn) {
    const std::uint64_t b0 = core::host_alloc_count();
    g_news.store(0);
    g_counting.store(true);
    fn();
    g_counting.store(false);
    return {g_news.load(), core::host_alloc_count() - b0};
}

bool overlap(const jit::LiveBuffer& a, std::size_t oa, const jit::LiveBuffer& b, std::size_t ob) {
    const bool live_together = a.first <= b.last && b.first <= a.last;
    const bool share_memory = oa < ob + b.bytes && ob < oa + a.bytes;
    return live_together && share_memory && a.bytes > 0 && b.bytes > 0;
}

// The memory plan the engine makes for `g` at `shapes`, with every group compilable.
// `images`: with the groups that run image by image (jit::image_major_groups), as a call plans.
jit::MemoryPlan plan_for(const Graph& g, const std::vector<Shape>& shapes, passes::Partition* out = nullptr, bool images = false) {
    const auto plan = jit::lower_function(g.impl());
    auto sp = jit::make_shape_plan(*plan, shapes, "test");
    passes::Partition p = plan->partition;
    std::vector<bool> compilable(p.groups.size(), true);
    const std::vector<std::int64_t> group_images = images ? jit::image_major_groups(*plan, *sp, compilable) : std::vector<std::int64_t>{};
    jit::MemoryPlan mp = jit::plan_memory(*g.impl(), p, compilable, sp->shapes, {}, group_images);
    if (out) *out = std::move(p);
    return mp;
}

// Checks the layout invariants of a plan: alignment, and no two values that live at the
// same time share memory.
void check_layout(const jit::MemoryPlan& mp) {
    std::size_t placed = 0;
    for (std::size_t a = 0; a < mp.offset.size(); ++a) {
        if (mp.offset[a] < 0) continue;
        ++placed;
        const auto oa = static_cast<std::size_t>(mp.offset[a]);
        CHECK(oa % jit::kArenaAlign == 0);
        CHECK(oa + mp.live[a].bytes <= mp.arena_bytes);
        for (std::size_t b = a + 1; b < mp.offset.size(); ++b)
            if (mp.offset[b] >= 0 && mp.joined_into[a] != static_cast<std::int64_t>(b) &&
                mp.joined_into[b] != static_cast<std::int64_t>(a)) {
                CAPTURE(a);
                CAPTURE(b);
                CHECK_FALSE(overlap(mp.live[a], oa, mp.live[b], static_cast<std::size_t>(mp.offset[b])));
            }
    }
    CHECK(placed == mp.placed);
    CHECK(mp.arena_bytes % jit::kArenaAlign == 0);
    CHECK(mp.arena_bytes <= mp.placed_bytes);
}

// x [B, 64] through `layers` matmul+bias+relu groups, then softmax: a chain of groups whose
// intermediates each live for two steps.
Graph chain_graph(int layers) {
    std::vector<Tensor> w, b;
    for (int i = 0; i < layers; ++i) {
        w.push_back(Tensor::rand({64, 64}, 100 + static_cast<std::uint64_t>(i), DType::f32, -0.2, 0.2));
        b.push_back(Tensor::randn({64}, 200 + static_cast<std::uint64_t>(i)));
    }
    return trace("chain" + std::to_string(layers), {arg("x", DType::f32, {dyn("B"), 64})},
                 [&](const std::vector<Var>& in) {
                     Var h = in[0];
                     for (int i = 0; i < layers; ++i)
                         h = relu(matmul(h, w[static_cast<std::size_t>(i)]) + b[static_cast<std::size_t>(i)]);
                     return std::vector<Var>{softmax(h, -1)};
                 });
}

// Intermediates viewed by interpreted shape ops, a view that outlives other intermediates,
// a graph output that views an intermediate, and a graph output read by a later group.
Graph views_graph() {
    Tensor w1 = Tensor::rand({64, 64}, 1, DType::f32, -0.2, 0.2), b1 = Tensor::randn({64}, 2);
    Tensor w2 = Tensor::rand({64, 64}, 3, DType::f32, -0.2, 0.2), b2 = Tensor::randn({64}, 4);
    Tensor w3 = Tensor::rand({64, 64}, 5, DType::f32, -0.2, 0.2), b3 = Tensor::randn({64}, 6);
    Tensor gamma = Tensor::rand({64}, 7, DType::f32, 0.5, 1.5), beta = Tensor::randn({64}, 8);
    return trace("views", {arg("x", DType::f32, {dyn("B"), 64})}, [&](const std::vector<Var>& in) {
        Var x = in[0];
        Var h1 = relu(matmul(x, w1) + b1);               // intermediate, viewed below
        Var r = reshape(h1, {x.dim(0), 8, 8});           // view of h1
        Var a = relu(matmul(x, w2) + b2);                // intermediates that live while r does
        Var c = softmax(a, -1);
        Var d = relu(matmul(c, w3) + b3);                // a graph output, also read below
        Var t = permute(r, {0, 2, 1});                   // a strided view of the view
        Var s = softmax(t, -1) * 2.0;                    // reads h1 through two views
        Var e = layer_norm(d, gamma, beta);              // intermediate ...
        Var ev = reshape(e, {x.dim(0), 2, 32});          // ... that a graph output views
        Var f = sum(e * 0.5, -1);
        Var u = r * 3.0;  // a second group reads r, so r stays a materialised view (fuse.h)
        return std::vector<Var>{s, ev, d, f, u};
    });
}

}  // namespace

TEST_CASE("memory plan: offsets are aligned and buffers that live together never overlap") {
    std::mt19937_64 rng(42);
    for (int round = 0; round < 200; ++round) {
        CAPTURE(round);
        std::vector<jit::LiveBuffer> bufs(static_cast<std::size_t>(1 + rng() % 24));
        std::size_t sum = 0;
        for (auto& b : bufs) {
            b.bytes = rng() % 5 == 0 ? 0 : 1 + rng() % 5000;
            b.first = static_cast<std::int32_t>(rng() % 12);
            b.last = b.first + static_cast<std::int32_t>(rng() % 5);
            sum += (b.bytes + 63) / 64 * 64;
        }
        std::vector<std::size_t> off;
        std::size_t arena = jit::assign_offsets(bufs, off);
        REQUIRE(off.size() == bufs.size());
        CHECK(arena % 64 == 0);
        CHECK(arena <= sum);
        for (std::size_t i = 0; i < bufs.size(); ++i) {
            CHECK(off[i] % 64 == 0);
            CHECK(off[i] + bufs[i].bytes <= arena);
            for (std::size_t j = i + 1; j < bufs.size(); ++j) CHECK_FALSE(overlap(bufs[i], off[i], bufs[j], off[j]));
        }
    }
}

TEST_CASE("memory plan: a chain of groups reuses memory") {
    // Buffers of 1000 bytes, each live from its group to the next: two slots suffice.
    std::vector<jit::LiveBuffer> chain;
    for (std::int32_t i = 0; i < 6; ++i) chain.push_back({1000, i, i + 1});
    std::vector<std::size_t> off;
    CHECK(jit::assign_offsets(chain, off) == 2 * 1024);
    // Disjoint lifetimes share one slot.
    std::vector<jit::LiveBuffer> apart{{4096, 0, 0}, {4096, 1, 1}, {100, 2, 2}};
    CHECK(jit::assign_offsets(apart, off) == 4096);
    CHECK(off[0] == 0);
    CHECK(off[1] == 0);
    CHECK(off[2] == 0);

    // A traced chain of 6 matmul groups: every intermediate placed, the arena far smaller
    // than their sum.
    Graph g = chain_graph(6);
    jit::MemoryPlan mp = plan_for(g, {{32, 64}});
    check_layout(mp);
    CHECK(mp.placed >= 5);
    CHECK(mp.placed_bytes == mp.placed * 32 * 64 * 4);
    CHECK(mp.arena_bytes <= 2 * 32 * 64 * 4);
    CHECK(mp.arena_bytes < mp.placed_bytes);
    // The layout follows the shapes.
    jit::MemoryPlan big = plan_for(g, {{100, 64}});
    check_layout(big);
    CHECK(big.arena_bytes == mp.arena_bytes / 32 * 100);
    // Zero-size values need no memory.
    CHECK(plan_for(g, {{0, 64}}).arena_bytes == 0);
}

TEST_CASE("memory plan: graph outputs and the values they view stay out of the arena; views extend lifetimes") {
    Graph g = views_graph();
    passes::Partition part;
    jit::MemoryPlan mp = plan_for(g, {{16, 64}}, &part);
    INFO(passes::to_string(part, *g.impl()));
    check_layout(mp);
    const ir::Graph& ig = *g.impl();
    // Find values by their op and role.
    auto find = [&](auto pred) {
        for (std::size_t id = 0; id < ig.nodes.size(); ++id)
            if (pred(id, ig.nodes[id])) return id;
        FAIL("node not found");
        return std::size_t{0};
    };
    auto is_output = [&](std::size_t id) {
        for (auto o : ig.outputs)
            if (static_cast<std::size_t>(o) == id) return true;
        return false;
    };
    for (auto o : ig.outputs) CHECK(mp.offset[static_cast<std::size_t>(o)] < 0);
    // e = layer_norm(d): a graph output is a reshape of it, so it must not be in the arena.
    const std::size_t e = find([](std::size_t, const ir::Node& n) { return n.op == ir::Op::layer_norm; });
    CHECK(mp.offset[e] < 0);
    // h1 (the first matmul group's output) is viewed by reshape -> permute, read by the
    // softmax at the end: it is placed, and lives until that softmax's group.
    const std::size_t reshape1 = find([](std::size_t, const ir::Node& n) { return n.op == ir::Op::reshape; });
    const std::size_t h1 = static_cast<std::size_t>(ig.nodes[reshape1].inputs[0]);
    REQUIRE(part.group_of[h1] >= 0);
    CHECK(mp.offset[h1] >= 0);
    const std::size_t permute = find([](std::size_t, const ir::Node& n) { return n.op == ir::Op::permute; });
    const std::size_t last_softmax = find([&](std::size_t, const ir::Node& n) {
        return n.op == ir::Op::softmax && static_cast<std::size_t>(n.inputs[0]) == permute;
    });
    CHECK(mp.live[h1].last >= part.group_of[last_softmax]);
    // And so some value made while the views were alive (the second matmul's) lives with it.
    bool lives_with_h1 = false;
    for (std::size_t id = 0; id < ig.nodes.size(); ++id)
        if (id != h1 && mp.offset[id] >= 0 && mp.live[id].first > mp.live[h1].first &&
            mp.live[id].first < mp.live[h1].last)
            lives_with_h1 = true;
    CHECK(lives_with_h1);
    // d is a graph output and read by later groups: not placed.
    const std::size_t d = static_cast<std::size_t>(ig.nodes[e].inputs[0]);
    CHECK(is_output(d));
    CHECK(mp.offset[d] < 0);
}

TEST_CASE("memory plan: the arena pool gives each checkout its own block and stays bounded") {
    jit::ArenaPool pool;
    std::vector<jit::ArenaPool::Lease> leases;
    for (std::size_t i = 0; i < jit::ArenaPool::kSlots + 4; ++i) {
        leases.push_back(pool.acquire(4096));
        REQUIRE(leases.back().data() != nullptr);
        CHECK(reinterpret_cast<std::uintptr_t>(leases.back().data()) % 64 == 0);
        for (std::size_t j = 0; j < i; ++j) CHECK(leases[j].data() != leases[i].data());
    }
    CHECK(pool.blocks_allocated() == jit::ArenaPool::kSlots + 4);
    leases.clear();  // kSlots go back to the pool, the rest are freed
    CHECK(pool.pooled_blocks() == jit::ArenaPool::kSlots);
    for (std::size_t i = 0; i < jit::ArenaPool::kSlots; ++i) leases.push_back(pool.acquire(1000));
    CHECK(pool.blocks_allocated() == jit::ArenaPool::kSlots + 4);  // all reused
    CHECK(pool.pooled_blocks() == 0);
    leases.clear();
    // A larger arena replaces a block that is too small.
    { auto big = pool.acquire(1 << 20); }
    CHECK(pool.blocks_allocated() == jit::ArenaPool::kSlots + 5);
    CHECK(pool.pooled_blocks() == jit::ArenaPool::kSlots);
    pool.trim();
    CHECK(pool.pooled_blocks() == 0);
}

namespace {

Options compiled_options() {
    Options o;
    o.jit = true;
    o.async_compile = false;
    o.tier2_threshold = 1;
    return o;
}

// Every group that has a kernel ran compiled in the last calls.
void check_all_compiled(const Function& f) {
    FunctionStats s = f.stats();
    INFO(s.to_json());
    int compiled = 0;
    for (const auto& gr : s.groups) {
        if (gr.kind == "opaque") continue;
        CHECK(gr.compiled_calls > 0);
        compiled += gr.compiled_calls > 0;
    }
    CHECK(compiled >= 3);
}


// Two convs of x concatenated along the channels, then a conv of the concat: at batch 1 the
// concat is joined (memory_plan.h), its operands written in their places inside it. `c1`
// channels in the first operand; `shared`: the first operand is also a graph output's
// operand (read by two nodes: not joined).
Graph concat_graph(std::int64_t c1, bool shared) {
    Tensor w1 = Tensor::rand({c1, 8, 3, 3}, 11, DType::f32, -0.2, 0.2), b1 = Tensor::randn({c1}, 12);
    Tensor w2 = Tensor::rand({16, 8, 1, 1}, 13, DType::f32, -0.2, 0.2), b2 = Tensor::randn({16}, 14);
    Tensor w3 = Tensor::rand({8, c1 + 16, 1, 1}, 15, DType::f32, -0.2, 0.2);
    return trace("concat", {arg("x", DType::f32, {dyn("B"), 8, 10, 10})}, [&](const std::vector<Var>& in) {
        Var a = relu(conv2d(in[0], w1, b1, {1, 1}, {1, 1}));
        Var c = relu(conv2d(in[0], w2, b2));
        Var y = conv2d(concat({a, c}, 1), w3);
        if (shared) return std::vector<Var>{y, a * 2.0};
        return std::vector<Var>{y};
    });
}

// The concats of `mp` whose operands sit inside them, and checks that each operand's offset
// is its place in the concat (in image 0's part of it, `images` parts of the concat's bytes
// each, which are its pieces' distance: MemoryPlan::join_pitch).
int joined_concats(const Graph& g, const jit::MemoryPlan& mp, std::int64_t images = 1) {
    const ir::Graph& ig = *g.impl();
    int joined = 0;
    for (std::size_t v = 0; v < ig.nodes.size(); ++v) {
        if (ig.nodes[v].op != ir::Op::concat) continue;
        std::int64_t at = mp.offset[v];
        bool all = true;
        for (auto in : ig.nodes[v].inputs) {
            const auto id = static_cast<std::size_t>(in);
            all = all && mp.joined_into[id] == static_cast<std::int64_t>(v);
            if (mp.joined_into[id] == static_cast<std::int64_t>(v)) {
                CHECK(mp.offset[id] == at);
                CHECK(mp.join_pitch[id] == (images > 1 ? static_cast<std::int64_t>(mp.live[v].bytes) / images : 0));
            }
            at += static_cast<std::int64_t>(mp.live[id].bytes);
        }
        if (all) CHECK(at - mp.offset[v] == static_cast<std::int64_t>(mp.live[v].bytes) / images);
        joined += all;
    }
    CHECK(static_cast<std::size_t>(joined) == mp.joined);
    return joined;
}
}  // namespace

TEST_CASE("memory plan: compiled multi-group plans with views match the interpreter on changing shapes") {
    if (test::lacks_tier(2)) return;
    for (const Graph& g : {views_graph(), chain_graph(4)}) {
        CAPTURE(g.name());
        Function fj = Engine(compiled_options()).load(g);
        Function fi = Engine(ref::interp_options()).load(g);
        const std::vector<std::int64_t> batches{3, 16, 1, 40, 16, 7, 40, 3, 0, 16};
        std::vector<std::vector<Shape>> sets;
        for (auto b : batches) sets.push_back({{b, 64}});
        fj.warmup(sets);
        for (int round = 0; round < 2; ++round)
            for (std::size_t i = 0; i < batches.size(); ++i) {
                const std::int64_t b = batches[i];
                CAPTURE(b);
                Tensor x = Tensor::randn({b, 64}, 1000 + i);
                auto want = fi({x});
                auto got = fj({x});
                REQUIRE(got.size() == want.size());
                for (std::size_t k = 0; k < got.size(); ++k) {
                    CAPTURE(k);
                    CHECK(got[k].shape() == want[k].shape());
                    CHECK(ref::max_rel_diff(got[k], want[k]) < 1e-4);
                }
                // The same through run() into the caller's buffers.
                std::vector<Tensor> outs;
                for (const Tensor& w : want) outs.push_back(Tensor::full(w.shape(), -7.0, w.dtype()));
                fj.run(std::vector<Tensor>{x}, outs);
                for (std::size_t k = 0; k < outs.size(); ++k) CHECK(ref::max_rel_diff(outs[k], want[k]) < 1e-4);
            }
        check_all_compiled(fj);
        CHECK(fj.stats().guard_failures == 0);
    }
}

TEST_CASE("memory plan: results returned by earlier calls are not overwritten by later ones") {
    if (test::lacks_tier(2)) return;
    // Outputs escape the call; the arena does not: an output held across calls keeps its values.
    Graph g = views_graph();
    Function fj = Engine(compiled_options()).load(g);
    fj.warmup({{{16, 64}}});
    Tensor x1 = Tensor::randn({16, 64}, 1), x2 = Tensor::randn({16, 64}, 2);
    auto first = fj({x1});
    std::vector<Tensor> copies;
    for (const Tensor& t : first) copies.push_back(t.clone());
    for (int i = 0; i < 5; ++i) fj({x2});
    for (std::size_t k = 0; k < first.size(); ++k) CHECK(ref::same_values(first[k], copies[k], 0));
}

TEST_CASE("memory plan: a steady-state compiled call allocates only its outputs") {
    if (test::lacks_tier(2)) return;
    const Shape xs{256, 64};
    Tensor x = Tensor::randn(xs, 5);
    auto measure = [&](int layers, Counts* call, Counts* run) {
        Function f = Engine(compiled_options()).load(chain_graph(layers));
        f.warmup({{xs}});
        std::vector<Tensor> in{x};
        std::vector<Tensor> outs{Tensor::empty(xs)};
        for (int i = 0; i < 3; ++i) {  // warm: shape plan, memory plan, arena, per-thread scratch
            f({x});
            f.run(in, outs);
        }
        check_all_compiled(f);
        *call = count_allocations([&] { f(in); });
        *run = count_allocations([&] { f.run(in, outs); });
    };
    Counts call2, run2, call6, run6;
    measure(2, &call2, &run2);
    measure(6, &call6, &run6);
    INFO("call: " << call6.news << " new, " << call6.blocks << " blocks; run: " << run6.news << " new, " << run6.blocks << " blocks");
    // run() into the caller's buffers: nothing at all.
    CHECK(run2.news == 0);
    CHECK(run2.blocks == 0);
    CHECK(run6.news == 0);
    CHECK(run6.blocks == 0);
    // operator(): one tensor block, the output's; five intermediates cost no more than one.
    CHECK(call6.blocks == 1);
    CHECK(call2.blocks == 1);
    CHECK(call6.news == call2.news);
    // The result vector, and the output tensor: its Storage, data block, shape and strides.
    CHECK(call6.news <= 5);
}

// The dispatch path itself (shape-plan lookup, profile counters, sampled timing, version
// selection) allocates nothing, on the calls whose time is sampled as on the others.
TEST_CASE("memory plan: steady-state tier-1 calls through run() allocate nothing, timed or not") {
    if (test::lacks_tier(1)) return;
    Options o;
    o.jit = true;
    o.async_compile = false;
    o.tier1_threshold = 1;
    o.tier2_threshold = std::numeric_limits<std::int64_t>::max();
    Function f = Engine(o).load(trace("dispatch_rows", {arg("x", DType::f32, {dyn("B"), 64})}, [](const std::vector<Var>& in) {
        return std::vector<Var>{sigmoid(in[0] * 2.0 + 1.0)};
    }));
    std::vector<Tensor> in{Tensor::randn({32, 64}, 3)};
    std::vector<Tensor> outs{Tensor::empty({32, 64})};
    for (int i = 0; i < 3; ++i) f.run(in, outs);  // warm: compile, shape plan, per-thread scratch
    REQUIRE(f.stats().calls_by_tier[1] > 0);
    const std::uint64_t calls = 2 * jit::kTimingPeriod + 1;  // sampled and unsampled calls
    Counts c = count_allocations([&] {
        for (std::uint64_t i = 0; i < calls; ++i) f.run(in, outs);
    });
    INFO(c.news << " new, " << c.blocks << " blocks");
    CHECK(c.news == 0);
    CHECK(c.blocks == 0);
    CHECK(f.stats().calls_by_tier[1] >= calls);
}

// Blocks from 128 KiB up (where malloc may map and unmap pages per block) come back from the
// host cache once freed, so an output of ~1 MB made on every call takes no fresh pages; a
// small block is not cached; the cache drops its blocks on host_trim().
TEST_CASE("memory plan: freed host blocks of 128 KiB and more are reused, smaller ones are not cached") {
    core::host_trim();
    std::size_t cap = 0;
    for (std::size_t bytes : {(std::size_t{128} << 10) + 5000, std::size_t{1024000}, std::size_t{3} << 20}) {
        void* p = core::host_alloc(bytes, &cap);
        CHECK(cap >= bytes);
        CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
        core::host_free(p, cap);
        CHECK(core::host_cached_bytes() == cap);
        std::size_t cap2 = 0;
        void* q = core::host_alloc(bytes - 100, &cap2);  // a nearby size takes the same block
        CHECK(q == p);
        CHECK(cap2 == cap);
        CHECK(core::host_cached_bytes() == 0);
        core::host_free(q, cap2);
        core::host_trim();
    }
    void* s = core::host_alloc(100000, &cap);
    core::host_free(s, cap);
    CHECK(core::host_cached_bytes() == 0);
}

TEST_CASE("memory plan: a concat of compiled values is joined: its operands are computed in place") {
    // The plan without the groups that run image by image: joined at batch 1 only (an axis of
    // size > 1 before the channels cuts each operand into pieces), when the first operand's
    // bytes are whole arena lines (16 channels of 10 x 10: 6400 bytes; 3 channels: 1200, not),
    // and when the concat alone reads its operands.
    struct Case {
        std::int64_t c1, batch;
        bool shared;
        int joined;
    };
    for (const Case& c : {Case{16, 1, false, 1}, Case{16, 2, false, 0}, Case{3, 1, false, 0}, Case{16, 1, true, 0}}) {
        CAPTURE(c.c1);
        CAPTURE(c.batch);
        CAPTURE(c.shared);
        Graph g = concat_graph(c.c1, c.shared);
        jit::MemoryPlan mp = plan_for(g, {{c.batch, 8, 10, 10}});
        check_layout(mp);
        CHECK(joined_concats(g, mp) == c.joined);
    }
    // Across images, as a call plans (its convs run image by image): joined at batch 2 and 3 too,
    // each operand in pieces (16 channels of 10 x 10 an image: whole lines; 3 channels: not).
    for (const Case& c : {Case{16, 1, false, 1}, Case{16, 2, false, 1}, Case{16, 3, false, 1}, Case{3, 2, false, 0},
                          Case{16, 2, true, 0}}) {
        CAPTURE(c.c1);
        CAPTURE(c.batch);
        CAPTURE(c.shared);
        Graph g = concat_graph(c.c1, c.shared);
        jit::MemoryPlan mp = plan_for(g, {{c.batch, 8, 10, 10}}, nullptr, true);
        check_layout(mp);
        CHECK(joined_concats(g, mp, c.batch) == c.joined);
    }
    // The results, compiled (joined at every batch) against the interpreter, batches changing
    // (and at the first calls, while operands come from the interpreter, the concat copies).
    if (test::lacks_tier(2)) return;
    for (bool shared : {false, true}) {
        Graph g = concat_graph(16, shared);
        Function fj = Engine(compiled_options()).load(g);
        Function fi = Engine(ref::interp_options()).load(g);
        const std::vector<std::int64_t> batches{1, 1, 2, 1, 3, 1};
        for (int round = 0; round < 3; ++round)
            for (std::size_t i = 0; i < batches.size(); ++i) {
                CAPTURE(round);
                CAPTURE(batches[i]);
                Tensor x = Tensor::randn({batches[i], 8, 10, 10}, 300 + i);
                auto want = fi({x});
                auto got = fj({x});
                REQUIRE(got.size() == want.size());
                for (std::size_t k = 0; k < got.size(); ++k) CHECK(ref::max_rel_diff(got[k], want[k]) < 1e-4);
            }
        fj.warmup({{{1, 8, 10, 10}}});
        for (int i = 0; i < 3; ++i) {
            Tensor x = Tensor::randn({1, 8, 10, 10}, 400 + static_cast<std::uint64_t>(i));
            auto want = fi({x});
            auto got = fj({x});
            for (std::size_t k = 0; k < got.size(); ++k) CHECK(ref::max_rel_diff(got[k], want[k]) < 1e-4);
        }
    }
    // Compiles in the background, every call checked: while one operand's group has code and
    // the other's not yet, the concat copies one operand from its pieces in place (a strided
    // view of them) and the other from the interpreter's tensor.
    Options async = compiled_options();
    async.async_compile = true;
    Graph g = concat_graph(16, false);
    Function fj = Engine(async).load(g);
    Function fi = Engine(ref::interp_options()).load(g);
    auto all_compiled = [&] {
        int compiled = 0;
        for (const auto& gr : fj.stats().groups) compiled += gr.kind != "opaque" && gr.compiled_calls > 0;
        return compiled >= 3;
    };
    // Until every group ran compiled and 20 calls more (at most 20 s: compiles on a busy host).
    const auto start = std::chrono::steady_clock::now();
    int after = 0;
    for (int i = 0; after < 20 && std::chrono::steady_clock::now() - start < std::chrono::seconds(20); ++i) {
        CAPTURE(i);
        Tensor x = Tensor::randn({2 + i % 3, 8, 10, 10}, 500 + static_cast<std::uint64_t>(i % 64));
        auto want = fi({x});
        auto got = fj({x});
        REQUIRE(got.size() == want.size());
        CHECK(ref::max_rel_diff(got[0], want[0]) < 1e-4);
        if (after > 0 || all_compiled()) ++after;
    }
    check_all_compiled(fj);
    // The same with the first compiles failing (the first group's, tier 1 and 2): calls with
    // the other operand's code but not the first's, whose concat copies from both.
    auto fail_next = [](int n) {
#if defined(KILN_HAVE_ASMJIT)
        tiers::set_asmjit_fail_next_compiles(n);
#endif
#if defined(KILN_HAVE_LLVM)
        tiers::set_llvm_fail_next_compiles(n);
#endif
    };
    fail_next(1);
    Function ff = Engine(compiled_options()).load(g);
    for (int i = 0; i < 12; ++i) {
        CAPTURE(i);
        Tensor x = Tensor::randn({2 + i % 2, 8, 10, 10}, 600 + static_cast<std::uint64_t>(i));
        CHECK(ref::max_rel_diff(ff({x})[0], fi({x})[0]) < 1e-4);
    }
    fail_next(0);
    INFO(ff.stats().to_json());
    // The concat's operands (its first two groups) ran compiled at different numbers of calls.
    const FunctionStats fs = ff.stats();
    REQUIRE(fs.groups.size() >= 2);
    CHECK(fs.groups[0].compiled_calls != fs.groups[1].compiled_calls);
}
