// Views: shape ops (permute, reshape, squeeze, unsqueeze, broadcast_to, slice) that join an
// elementwise group and are read through index arithmetic instead of being materialised
// (src/passes/fuse.h, src/kir/lower_view.cpp). On random shapes (a seeded generator; the seed is
// printed), static and symbolic dims, f32 and i32, every view op and chains of two:
// - the partition has one group and no opaque group left for the views;
// - the lowered kernel (kir::evaluate) matches the interpreter group by group;
// - compiled code through kiln::Engine (tier 2, LLVM; tier 1, asmjit) matches the
//   interpreter, and the stats show every group compiled.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "have_tier.h"
#include "reference.h"
#include "reference_kir.h"
#include "src/ir/ir.h"
#include "src/passes/fuse.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace kiln;

namespace {

constexpr std::uint64_t kSeed = 20250611;

enum class View {
    permute,
    reshape,
    squeeze,
    unsqueeze,
    broadcast_to,
    slice,
    // chains of two
    permute_of_reshape,
    reshape_of_permute,
    slice_of_permute,
    broadcast_of_unsqueeze,
    unsqueeze_of_squeeze,
};
constexpr View kViews[] = {View::permute, View::reshape, View::squeeze, View::unsqueeze, View::broadcast_to,
                           View::slice, View::permute_of_reshape, View::reshape_of_permute, View::slice_of_permute,
                           View::broadcast_of_unsqueeze, View::unsqueeze_of_squeeze};

const char* view_name(View v) {
    switch (v) {
    case View::permute: return "permute";
    case View::reshape: return "reshape";
    case View::squeeze: return "squeeze";
    case View::unsqueeze: return "unsqueeze";
    case View::broadcast_to: return "broadcast_to";
    case View::slice: return "slice";
    case View::permute_of_reshape: return "permute(reshape)";
    case View::reshape_of_permute: return "reshape(permute)";
    case View::slice_of_permute: return "slice(permute)";
    case View::broadcast_of_unsqueeze: return "broadcast_to(unsqueeze)";
    case View::unsqueeze_of_squeeze: return "unsqueeze(squeeze)";
    }
    return "?";
}

// The random choices of one case, drawn once, so the graph and its inputs agree.
struct Params {
    std::vector<std::int64_t> perm{0, 1, 2};
    int reshape_form = 0;  // 0: [A, B*C], 1: [A*B, C], 2: [A*B*C]
    std::int64_t unsqueeze_axis = 0;
    std::int64_t slice_axis = 0, start = 0, end = 0, step = 1;
};

Params draw(std::mt19937_64& rng) {
    Params p;
    std::shuffle(p.perm.begin(), p.perm.end(), rng);
    auto in = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
    p.reshape_form = static_cast<int>(in(0, 2));
    p.unsqueeze_axis = in(0, 3);
    p.slice_axis = in(0, 2);
    p.start = in(-8, 8);
    p.end = in(0, 3) == 0 ? std::numeric_limits<std::int64_t>::max() : in(-8, 8);
    p.step = in(1, 3);
    return p;
}

// The operand shape x and y take for a view (dims a, b, c of the case): squeeze and the
// broadcasts need a dim of size 1 in the middle.
bool middle_one(View v) {
    return v == View::squeeze || v == View::broadcast_to || v == View::unsqueeze_of_squeeze;
}

Var apply_view(View v, const Params& p, const Var& x, const Var& full) {
    auto reshaped = [&](const Var& t) {
        const Dim A = t.dim(0), B = t.dim(1), C = t.dim(2);
        if (p.reshape_form == 0) return reshape(t, {A, B * C});
        if (p.reshape_form == 1) return reshape(t, {A * B, C});
        return reshape(t, {A * B * C});
    };
    auto reversed = [](const Var& t) {
        std::vector<std::int64_t> perm;
        for (std::int64_t i = t.rank(); i-- > 0;) perm.push_back(i);
        return permute(t, perm);
    };
    switch (v) {
    case View::permute: return permute(x, p.perm);
    case View::reshape: return reshaped(x);
    case View::squeeze: return squeeze(x, {1});
    case View::unsqueeze: return unsqueeze(x, p.unsqueeze_axis);
    case View::broadcast_to: return broadcast_to(x, {full.dim(0), full.dim(1), full.dim(2)});
    case View::slice: return slice(x, p.slice_axis, p.start, p.end, p.step);
    case View::permute_of_reshape: return reversed(reshaped(x));
    case View::reshape_of_permute: return reshaped(permute(x, p.perm));
    case View::slice_of_permute: return slice(permute(x, p.perm), p.slice_axis, p.start, p.end, p.step);
    case View::broadcast_of_unsqueeze: return broadcast_to(unsqueeze(x, 0), {2, x.dim(0), x.dim(1), x.dim(2)});
    case View::unsqueeze_of_squeeze: return unsqueeze(squeeze(x, {1}), 0);
    }
    return x;
}

// f(view(x), view(y)) with elementwise ops around the views; when the view's shape is
// static, a constant of that shape joins too (a direct input next to the views). The
// broadcast case reads a third input `full` of the target shape directly.
Graph make_graph(View v, const Params& p, DType dt, const std::vector<Dim>& xdims, const std::vector<Dim>& fdims,
                 std::uint64_t seed) {
    std::vector<ArgSpec> args{arg("x", dt, xdims), arg("y", dt, xdims), arg("full", dt, fdims)};
    return trace("views", args, [&](const std::vector<Var>& in) -> std::vector<Var> {
        const Var vx = apply_view(v, p, in[0], in[2]), vy = apply_view(v, p, in[1], in[2]);
        Var out = dt == DType::f32 ? relu(vx) * vy + vx : vx * vy + vx;
        if (v == View::broadcast_to) out = out + in[2];
        Shape s;
        for (const Dim& d : vx.dims())
            if (d.is_static()) s.push_back(d.value());
        if (s.size() == static_cast<std::size_t>(vx.rank())) out = out - Tensor::rand(s, seed, dt, -50, 50);
        return {out};
    });
}

struct Case {
    View view;
    Params p;
    DType dt;
    bool symbolic;
    std::vector<std::array<std::int64_t, 3>> sizes;  // concrete (a, b, c) per call shape
    Graph g;

    std::vector<Dim> dims(bool full) const {
        const bool one = middle_one(view) && !full;
        if (!symbolic) {
            const auto& s = sizes.front();
            return {s[0], one ? 1 : s[1], s[2]};
        }
        return {dyn("A"), one ? Dim(1) : dyn("B"), dyn("C")};
    }
    std::vector<Tensor> inputs(std::size_t i, std::uint64_t seed) const {
        const auto& s = sizes[i];
        const Shape xs{s[0], middle_one(view) ? 1 : s[1], s[2]}, fs{s[0], s[1], s[2]};
        return {Tensor::rand(xs, seed, dt, -50, 50), Tensor::rand(xs, seed + 1, dt, -50, 50), Tensor::rand(fs, seed + 2, dt, -50, 50)};
    }
    std::string describe() const {
        std::string s = std::string(view_name(view)) + " " + ref::dname(dt) + (symbolic ? " symbolic" : " static") + " perm ";
        for (auto q : p.perm) s += std::to_string(q);
        s += " reshape " + std::to_string(p.reshape_form) + " unsqueeze " + std::to_string(p.unsqueeze_axis) + " slice axis " +
             std::to_string(p.slice_axis) + " [" + std::to_string(p.start) + ":" +
             (p.end == std::numeric_limits<std::int64_t>::max() ? std::string("end") : std::to_string(p.end)) + ":" +
             std::to_string(p.step) + "] sizes";
        for (const auto& z : sizes) s += " " + std::to_string(z[0]) + "x" + std::to_string(z[1]) + "x" + std::to_string(z[2]);
        return s;
    }
};

// Every view op, f32 and i32, static and symbolic, with random sizes and parameters.
std::vector<Case> make_cases(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    auto dim = [&] { return std::uniform_int_distribution<std::int64_t>(1, 7)(rng); };
    std::vector<Case> cases;
    for (View v : kViews)
        for (DType dt : {DType::f32, DType::i32})
            for (bool symbolic : {false, true}) {
                Case c{v, draw(rng), dt, symbolic, {}, {}};
                for (int i = 0; i < (symbolic ? 3 : 1); ++i) c.sizes.push_back({dim(), dim(), dim()});
                c.g = make_graph(v, c.p, dt, c.dims(false), c.dims(true), seed);
                cases.push_back(std::move(c));
            }
    return cases;
}

void check_one_group_no_opaque(const Graph& g) {
    const ir::Graph& ig = *g.impl();
    const passes::Partition p = passes::partition(ig);
    INFO(passes::to_string(p, ig));
    CHECK(p.groups.size() == 1);
    for (const auto& gr : p.groups) CHECK(gr.kind == passes::GroupKind::elementwise);
    int views = 0;
    for (const auto& nd : ig.nodes) views += passes::is_view_op(nd) ? 1 : 0;
    CHECK(views >= 2);
}

Options tier_opts(int tier) { return ref::jit_options(tier == 1 ? 1 : ref::kNever, tier == 2 ? 2 : ref::kNever); }

// Calls the case's function on every size 3 times at `tier`, against the interpreter; then
// every group must be an elementwise group that ran compiled code at that tier.
void check_compiled(const Case& c, int tier, std::uint64_t seed) {
    Function f = Engine(tier_opts(tier)).load(c.g);
    bool ran = false;  // a call with an empty buffer runs no kernel
    for (std::size_t i = 0; i < c.sizes.size(); ++i) {
        const std::vector<Tensor> in = c.inputs(i, seed + i);
        const Tensor want = ref::run_graph(c.g, in)[0];
        ran = ran || want.numel() > 0;
        for (int rep = 0; rep < 3; ++rep) {
            const Tensor got = f(in)[0];
            REQUIRE(got.shape() == want.shape());
            CHECK(ref::max_rel_diff(got, want) < (c.dt == DType::f32 ? 1e-6 : 0.5));
        }
    }
    const FunctionStats s = f.stats();
    INFO(s.to_json());
    CHECK(s.compile_failures == 0);
    REQUIRE(s.groups.size() == 1);
    for (const GroupStats& gs : s.groups) {
        CHECK(gs.kind == "elementwise");
        if (!ran) continue;
        CHECK(gs.tier == tier);
        CHECK(gs.compiled_calls > 0);
    }
}

}  // namespace

TEST_CASE("views: every view op and chains of two fuse into one elementwise group; kir::evaluate matches the interpreter") {
    MESSAGE("seed ", kSeed);
    for (const Case& c : make_cases(kSeed)) {
        INFO(c.describe());
        check_one_group_no_opaque(c.g);
        for (std::size_t i = 0; i < c.sizes.size(); ++i) {
            const ref::GroupRunStats st = ref::check_lowered_graph(c.g, c.inputs(i, kSeed + i));
            CHECK(st.groups == 1);
            CHECK(st.lowered == 1);
        }
    }
}

TEST_CASE("views: compiled at tier 1 (asmjit) and tier 2 (LLVM) through kiln::Engine match the interpreter") {
    MESSAGE("seed ", kSeed);
    for (int tier : {1, 2}) {
        if (test::lacks_tier(tier)) continue;
        CAPTURE(tier);
        for (const Case& c : make_cases(kSeed)) {
            INFO(c.describe());
            check_compiled(c, tier, kSeed);
        }
    }
}

TEST_CASE("views: row groups read views of their operand (softmax, layer_norm, sum), evaluated and compiled") {
    const Tensor gamma = Tensor::rand({6}, 3, DType::f32, 0.5, 1.5), beta = Tensor::rand({6}, 4, DType::f32, -1, 1);
    Graph g = trace("rows", {arg("x", DType::f32, {dyn("n"), 6, 5}), arg("z", DType::f32, {dyn("n"), 30})},
                    [&](const std::vector<Var>& in) -> std::vector<Var> {
                        const Var t = transpose(in[0], 1, 2);  // [n, 5, 6]
                        return {softmax(t * 2.0, -1), layer_norm(reshape(in[1], {in[1].dim(0), 5, 6}), gamma, beta),
                                sum(permute(in[0], {0, 2, 1}), std::vector<std::int64_t>{2})};
                    });
    const ir::Graph& ig = *g.impl();
    const passes::Partition p = passes::partition(ig);
    INFO(passes::to_string(p, ig));
    REQUIRE(p.groups.size() == 3);
    for (const auto& gr : p.groups) CHECK(gr.kind == passes::GroupKind::row_reduction);
    for (std::int64_t n : {1, 3, 7}) {
        CAPTURE(n);
        const std::vector<Tensor> in{Tensor::rand({n, 6, 5}, 10 + static_cast<std::uint64_t>(n), DType::f32, -3, 3),
                                     Tensor::rand({n, 30}, 20 + static_cast<std::uint64_t>(n), DType::f32, -3, 3)};
        const ref::GroupRunStats st = ref::check_lowered_graph(g, in);
        CHECK(st.lowered == 3);
    }
    for (int tier : {1, 2}) {
        if (test::lacks_tier(tier)) continue;
        CAPTURE(tier);
        Function f = Engine(tier_opts(tier)).load(g);
        for (std::int64_t n : {2, 2, 2, 5, 5, 5}) {
            const std::vector<Tensor> in{Tensor::rand({n, 6, 5}, 30, DType::f32, -3, 3), Tensor::rand({n, 30}, 31, DType::f32, -3, 3)};
            const std::vector<Tensor> want = ref::run_graph(g, in), got = f(in);
            for (std::size_t i = 0; i < want.size(); ++i) CHECK(ref::max_rel_diff(got[i], want[i]) < 1e-5);
        }
        const FunctionStats s = f.stats();
        INFO(s.to_json());
        for (const GroupStats& gs : s.groups) {
            CHECK(gs.kind == "row_reduction");
            CHECK(gs.tier == tier);
            CHECK(gs.compiled_calls > 0);
        }
    }
}

TEST_CASE("views: a reshape to a symbol inferred at run time, read through a slice (its size is known from no buffer)") {
    // m = 2n is bound by no buffer of the group: the lowering derives it as numel(x) / 3.
    Graph g = trace("inferred", {arg("x", DType::f32, {dyn("n"), 6})}, [](const std::vector<Var>& in) -> std::vector<Var> {
        return {slice(reshape(in[0], {dyn("m"), 3}), 0, 1, -1, 2) * 2.0 + 1.0};
    });
    const ir::Graph& ig = *g.impl();
    const passes::Partition p = passes::partition(ig);
    INFO(passes::to_string(p, ig));
    REQUIRE(p.groups.size() == 1);
    CHECK(p.groups[0].kind == passes::GroupKind::elementwise);
    for (std::int64_t n : {1, 2, 5}) {
        CAPTURE(n);
        CHECK(ref::check_lowered_graph(g, {Tensor::rand({n, 6}, 5, DType::f32, -3, 3)}).lowered == 1);
    }
    if (test::lacks_tier(2)) return;
    Function f = Engine(tier_opts(2)).load(g);
    for (std::int64_t n : {3, 3, 3, 4, 4, 4}) {
        const std::vector<Tensor> in{Tensor::rand({n, 6}, 6, DType::f32, -3, 3)};
        CHECK(ref::max_rel_diff(f(in)[0], ref::run_graph(g, in)[0]) < 1e-6);
    }
    const FunctionStats s = f.stats();
    INFO(s.to_json());
    REQUIRE(s.groups.size() == 1);
    CHECK(s.groups[0].tier == 2);
    CHECK(s.groups[0].compiled_calls > 0);
}

namespace {

// One graph of the edge cases below and the input shapes of its calls.
struct EdgeCase {
    const char* name;
    Graph g;
    std::vector<std::vector<Shape>> calls;
};

std::vector<EdgeCase> edge_cases() {
    const DType f = DType::f32;
    std::vector<EdgeCase> cs;
    auto add = [&](const char* name, std::vector<ArgSpec> args, std::function<std::vector<Var>(const std::vector<Var>&)> fn,
                   std::vector<std::vector<Shape>> calls) {
        cs.push_back({name, trace(name, args, fn), std::move(calls)});
    };
    // A broadcast to a symbol (M) that no buffer of the add's group would hold: the
    // broadcast_to stays opaque (materialised), so the add's group still lowers.
    add("broadcast_to an unbound symbol", {arg("x", f, {1}), arg("y", f, {5}), arg("w", f, {dyn("M")})},
        [](const std::vector<Var>& in) -> std::vector<Var> {
            return {broadcast_to(in[0], {in[2].dim(0)}) + in[1], in[2] * 2.0};
        },
        {{{1}, {5}, {5}}, {{1}, {5}, {5}}, {{1}, {5}, {5}}});
    add("unsqueeze of a broadcast_to an unbound symbol", {arg("x", f, {1}), arg("y", f, {1, 5}), arg("w", f, {dyn("M")})},
        [](const std::vector<Var>& in) -> std::vector<Var> {
            return {unsqueeze(broadcast_to(in[0], {in[2].dim(0)}), 0) + in[1], in[2] * 2.0};
        },
        {{{1}, {1, 5}, {5}}, {{1}, {1, 5}, {5}}, {{1}, {1, 5}, {5}}});
    add("sum over a broadcast to an unbound symbol", {arg("x", f, {dyn("B"), 1}), arg("w", f, {dyn("M")})},
        [](const std::vector<Var>& in) -> std::vector<Var> {
            return {sum(broadcast_to(in[0], {in[0].dim(0), in[1].dim(0)}), std::vector<std::int64_t>{1}), in[1] + 1.0};
        },
        {{{3, 1}, {4}}, {{3, 1}, {4}}, {{3, 1}, {4}}, {{2, 1}, {7}}});
    // A symbolic dim that is 1 at run time, broadcast by the view.
    add("broadcast_to from a symbolic 1", {arg("x", f, {dyn("A")}), arg("z", f, {dyn("B")})},
        [](const std::vector<Var>& in) -> std::vector<Var> { return {broadcast_to(in[0], {in[1].dim(0)}) * 3.0 + in[1]}; },
        {{{1}, {4}}, {{1}, {4}}, {{1}, {4}}, {{4}, {4}}, {{4}, {4}}, {{4}, {4}}});
    // Slices whose lengths no buffer holds (the run-time branch of the slice length).
    add("sum over a strided slice of a symbolic row", {arg("x", f, {dyn("n"), dyn("N")})},
        [](const std::vector<Var>& in) -> std::vector<Var> {
            return {sum(slice(in[0], 1, 1, -1, 2), std::vector<std::int64_t>{1})};
        },
        {{{3, 9}}, {{3, 9}}, {{3, 9}}, {{2, 4}}, {{2, 4}}, {{2, 4}}});
    add("slice of a slice", {arg("x", f, {dyn("N")})},
        [](const std::vector<Var>& in) -> std::vector<Var> {
            return {slice(slice(in[0], 0, 1, std::numeric_limits<std::int64_t>::max(), 1), 0, -3,
                          std::numeric_limits<std::int64_t>::max(), 2) + 1.0};
        },
        {{{7}}, {{7}}, {{7}}, {{3}}, {{3}}, {{3}}});
    // Views broadcast into a bigger iteration space.
    add("permute broadcast into rank 3", {arg("x", f, {3, 4}), arg("y", f, {2, 4, 3})},
        [](const std::vector<Var>& in) -> std::vector<Var> { return {permute(in[0], {1, 0}) + in[1]}; },
        {{{3, 4}, {2, 4, 3}}, {{3, 4}, {2, 4, 3}}, {{3, 4}, {2, 4, 3}}});
    add("unsqueeze of a slice broadcast into rank 3", {arg("x", f, {4, 6}), arg("y", f, {2, 3, 6})},
        [](const std::vector<Var>& in) -> std::vector<Var> { return {unsqueeze(slice(in[0], 0, 1, 4, 1), 0) * in[1]}; },
        {{{4, 6}, {2, 3, 6}}, {{4, 6}, {2, 3, 6}}, {{4, 6}, {2, 3, 6}}});
    // Views read after a row reduction (the write pass of a row group) and as its parameters.
    add("softmax times a reshaped row", {arg("x", f, {dyn("B"), 8}), arg("c", f, {8})},
        [](const std::vector<Var>& in) -> std::vector<Var> { return {softmax(in[0], -1) * reshape(in[1], {1, 8})}; },
        {{{3, 8}, {8}}, {{3, 8}, {8}}, {{3, 8}, {8}}});
    add("layer_norm with viewed gamma and beta", {arg("x", f, {dyn("B"), 8}), arg("g", f, {1, 8}), arg("b", f, {8, 1})},
        [](const std::vector<Var>& in) -> std::vector<Var> {
            return {layer_norm(in[0], reshape(in[1], {8}), squeeze(in[2], {1}))};
        },
        {{{3, 8}, {1, 8}, {8, 1}}, {{3, 8}, {1, 8}, {8, 1}}, {{3, 8}, {1, 8}, {8, 1}}});
    add("row sum plus a squeezed column", {arg("x", f, {dyn("B"), 8}), arg("c", f, {dyn("B"), 1})},
        [](const std::vector<Var>& in) -> std::vector<Var> {
            return {sum(in[0], std::vector<std::int64_t>{1}) + squeeze(in[1], {1})};
        },
        {{{3, 8}, {3, 1}}, {{3, 8}, {3, 1}}, {{3, 8}, {3, 1}}});
    // Rank 0.
    add("squeeze to rank 0", {arg("x", f, {1}), arg("y", f, {3, 4})},
        [](const std::vector<Var>& in) -> std::vector<Var> { return {squeeze(in[0], {0}) + in[1]}; },
        {{{1}, {3, 4}}, {{1}, {3, 4}}, {{1}, {3, 4}}});
    add("broadcast_to from rank 0", {arg("s", f, {}), arg("y", f, {3, 4})},
        [](const std::vector<Var>& in) -> std::vector<Var> { return {broadcast_to(in[0], {3, 4}) * in[1]}; },
        {{{}, {3, 4}}, {{}, {3, 4}}, {{}, {3, 4}}});
    // A chain of three views.
    add("reshape(slice(permute))", {arg("x", f, {dyn("n"), 4, 6}), arg("z", f, {dyn("n"), 8})},
        [](const std::vector<Var>& in) -> std::vector<Var> {
            return {reshape(slice(permute(in[0], {0, 2, 1}), 1, 1, 5, 2), {in[0].dim(0), 8}) - in[1]};
        },
        {{{2, 4, 6}, {2, 8}}, {{2, 4, 6}, {2, 8}}, {{2, 4, 6}, {2, 8}}, {{5, 4, 6}, {5, 8}}});
    return cs;
}

}  // namespace

TEST_CASE("views: edge cases (unbound broadcast symbols, symbolic 1s, slice lengths, rank 0, row write passes, chains of three)") {
    for (EdgeCase& c : edge_cases()) {
        INFO("case: ", std::string(c.name));
        std::uint64_t seed = 40;
        auto inputs = [&](const std::vector<Shape>& shapes) {
            std::vector<Tensor> in;
            for (const Shape& s : shapes) in.push_back(Tensor::rand(s, ++seed, DType::f32, -2, 2));
            return in;
        };
        ref::check_lowered_graph(c.g, inputs(c.calls.front()));  // every elementwise and row group lowers
        for (int tier : {1, 2}) {
            if (test::lacks_tier(tier)) continue;
            CAPTURE(tier);
            Function f = Engine(tier_opts(tier)).load(c.g);
            for (const auto& shapes : c.calls) {
                const std::vector<Tensor> in = inputs(shapes);
                const std::vector<Tensor> want = ref::run_graph(c.g, in), got = f(in);
                REQUIRE(got.size() == want.size());
                for (std::size_t i = 0; i < want.size(); ++i) CHECK(ref::max_rel_diff(got[i], want[i]) < 1e-5);
            }
            if (tier == 2) {
                const FunctionStats s = f.stats();
                INFO(s.to_json());
                for (const GroupStats& gs : s.groups)
                    if (gs.kind == "elementwise" || gs.kind == "row_reduction") CHECK(gs.compiled_calls > 0);
            }
        }
    }
}
