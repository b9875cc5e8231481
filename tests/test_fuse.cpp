// The fusion partitioning pass (src/passes/fuse.h) on hand-traced graphs: an MLP, softmax of
// layer_norm (one chained row group; more chains in test_row_chain.cpp), shared values, cycles through a matmul, ops that stay opaque, views
// (shape ops fused as index arithmetic; their lowering in test_view_fusion.cpp) and a transformer
// block; plus the invariants every partition must satisfy.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "src/ir/ir.h"
#include "src/passes/fuse.h"

#include <algorithm>
#include <string>
#include <vector>

namespace {

using kiln::DType;
using kiln::Var;
using kiln::passes::GroupKind;
using kiln::passes::Partition;

const kiln::ir::Graph& ir_of(const kiln::Graph& g) { return *g.impl(); }

// The invariants of fuse.h, checked on any graph.
void check_invariants(const kiln::ir::Graph& g, const Partition& p) {
    INFO(kiln::passes::to_string(p, g));
    const std::size_t n = g.nodes.size();
    REQUIRE(p.group_of.size() == n);
    std::vector<bool> needed(n, false);
    for (auto o : g.outputs) needed[static_cast<std::size_t>(o)] = true;
    for (std::size_t i = n; i-- > 0;)
        if (needed[i])
            for (auto in : g.nodes[i].inputs) needed[static_cast<std::size_t>(in)] = true;
    std::vector<int> seen(n, 0);
    for (std::size_t gi = 0; gi < p.groups.size(); ++gi) {
        const auto& gr = p.groups[gi];
        CHECK(!gr.nodes.empty());
        CHECK(std::is_sorted(gr.nodes.begin(), gr.nodes.end()));
        CHECK(gr.name.rfind("g" + std::to_string(gi) + ".", 0) == 0);
        for (auto v : gr.nodes) {
            ++seen[static_cast<std::size_t>(v)];
            CHECK(p.group_of[static_cast<std::size_t>(v)] == static_cast<int>(gi));
        }
        // Inputs: defined outside, by an earlier group or a source; no repeats.
        for (std::size_t i = 0; i < gr.inputs.size(); ++i) {
            const auto v = gr.inputs[i];
            const int def = p.group_of[static_cast<std::size_t>(v)];
            CHECK(def != static_cast<int>(gi));
            CHECK(def < static_cast<int>(gi));
            if (def >= 0) {
                const auto& outs = p.groups[static_cast<std::size_t>(def)].outputs;
                CHECK_MESSAGE(std::find(outs.begin(), outs.end(), v) != outs.end(), "%", v, " is read by ", gr.name,
                              " but not materialised");
            }
            CHECK(std::count(gr.inputs.begin(), gr.inputs.end(), v) == 1);
        }
        for (auto v : gr.nodes)
            for (auto in : g.nodes[static_cast<std::size_t>(v)].inputs)
                if (p.group_of[static_cast<std::size_t>(in)] != static_cast<int>(gi))
                    CHECK(std::find(gr.inputs.begin(), gr.inputs.end(), in) != gr.inputs.end());
        if (gr.kind == GroupKind::opaque) CHECK(gr.nodes.size() == 1);
        if (gr.kind == GroupKind::matmul || gr.kind == GroupKind::conv) {
            // The matmul (conv2d), then elementwise nodes of its shape, each reading a node of
            // the group before it; one output, the last node (nothing outside reads the others).
            CHECK(g.nodes[static_cast<std::size_t>(gr.nodes.front())].op ==
                  (gr.kind == GroupKind::matmul ? kiln::ir::Op::matmul : kiln::ir::Op::conv2d));
            REQUIRE(gr.outputs.size() == 1);
            CHECK(gr.outputs.front() == gr.nodes.back());
            for (std::size_t i = 1; i < gr.nodes.size(); ++i) {
                const auto& nd = g.nodes[static_cast<std::size_t>(gr.nodes[i])];
                CHECK(kiln::ir::is_elementwise(nd.op));
                CHECK(nd.type.dims == g.nodes[static_cast<std::size_t>(gr.nodes.front())].type.dims);
                CHECK(std::any_of(nd.inputs.begin(), nd.inputs.end(), [&](kiln::ir::ValueId in) {
                    return std::find(gr.nodes.begin(), gr.nodes.begin() + static_cast<std::ptrdiff_t>(i), in) !=
                           gr.nodes.begin() + static_cast<std::ptrdiff_t>(i);
                }));
            }
        }
        if (gr.kind == GroupKind::row_reduction) {
            // One row op, or a chain of them over the operand shape of the first, where only
            // the last may be a reduction (over the last axis only).
            std::vector<kiln::ir::ValueId> rows;
            for (auto v : gr.nodes)
                if (kiln::passes::is_row_op(g.nodes[static_cast<std::size_t>(v)])) rows.push_back(v);
            REQUIRE(!rows.empty());
            const auto& first = g.nodes[static_cast<std::size_t>(rows.front())];
            for (std::size_t i = 1; i < rows.size(); ++i) {
                const auto& nd = g.nodes[static_cast<std::size_t>(rows[i])];
                const auto& prev = g.nodes[static_cast<std::size_t>(rows[i - 1])];
                CHECK(g.nodes[static_cast<std::size_t>(nd.inputs[0])].type.dims ==
                      g.nodes[static_cast<std::size_t>(first.inputs[0])].type.dims);
                const bool reduce = prev.op == kiln::ir::Op::sum || prev.op == kiln::ir::Op::mean ||
                                    prev.op == kiln::ir::Op::max || prev.op == kiln::ir::Op::min;
                CHECK_FALSE(reduce);
            }
        }
        // Views: only in elementwise and row groups, read only by their group, not graph
        // outputs, reading a value computed outside the group (or another view of it).
        for (auto v : gr.nodes) {
            const auto& nd = g.nodes[static_cast<std::size_t>(v)];
            if (gr.kind == GroupKind::opaque || !kiln::passes::is_view_op(nd)) continue;
            CHECK((gr.kind == GroupKind::elementwise || gr.kind == GroupKind::row_reduction));
            CHECK(std::find(g.outputs.begin(), g.outputs.end(), v) == g.outputs.end());
            CHECK(std::find(gr.outputs.begin(), gr.outputs.end(), v) == gr.outputs.end());
            const auto x = nd.inputs[0];
            CHECK((p.group_of[static_cast<std::size_t>(x)] != static_cast<int>(gi) ||
                   kiln::passes::is_view_op(g.nodes[static_cast<std::size_t>(x)])));
            for (std::size_t u = 0; u < n; ++u)
                if (needed[u] && std::find(g.nodes[u].inputs.begin(), g.nodes[u].inputs.end(), v) != g.nodes[u].inputs.end())
                    CHECK(p.group_of[u] == static_cast<int>(gi));
        }
        if (gr.kind == GroupKind::elementwise)
            for (auto o : gr.outputs)
                CHECK(g.nodes[static_cast<std::size_t>(o)].type.dims ==
                      g.nodes[static_cast<std::size_t>(gr.outputs.front())].type.dims);
    }
    for (std::size_t i = 0; i < n; ++i) {
        const bool source = kiln::ir::op_kind(g.nodes[i].op) == kiln::ir::OpKind::Source;
        CHECK(seen[i] == (needed[i] && !source ? 1 : 0));
        if (!needed[i] || source) CHECK(p.group_of[i] == -1);
    }
    for (auto o : g.outputs) {
        const int def = p.group_of[static_cast<std::size_t>(o)];
        if (def >= 0) {
            const auto& outs = p.groups[static_cast<std::size_t>(def)].outputs;
            CHECK(std::find(outs.begin(), outs.end(), o) != outs.end());
        }
    }
}

std::vector<GroupKind> kinds(const Partition& p) {
    std::vector<GroupKind> k;
    for (const auto& g : p.groups) k.push_back(g.kind);
    return k;
}

std::vector<std::string> op_names(const kiln::ir::Graph& g, const kiln::passes::Group& gr) {
    std::vector<std::string> v;
    for (auto id : gr.nodes) v.emplace_back(kiln::ir::op_name(g.nodes[static_cast<std::size_t>(id)].op));
    return v;
}

// op_names of every group of `kind`, in group order.
std::vector<std::vector<std::string>> ops_of_kind(const kiln::ir::Graph& g, const Partition& p, GroupKind kind) {
    std::vector<std::vector<std::string>> v;
    for (const auto& gr : p.groups)
        if (gr.kind == kind) v.push_back(op_names(g, gr));
    return v;
}

}  // namespace

TEST_CASE("fuse: an MLP gives a matmul+bias+relu group, a matmul group and a bias+softmax row group") {
    kiln::Tensor W1 = kiln::Tensor::randn({16, 8}, 1), b1 = kiln::Tensor::zeros({8});
    kiln::Tensor W2 = kiln::Tensor::randn({8, 4}, 2), b2 = kiln::Tensor::zeros({4});
    kiln::Graph kg = kiln::trace("mlp", {kiln::arg("x", DType::f32, {kiln::dyn("batch"), 16})},
                                 [&](const std::vector<Var>& in) -> std::vector<Var> {
                                     Var h = kiln::relu(kiln::matmul(in[0], W1) + b1);
                                     return {kiln::softmax(kiln::matmul(h, W2) + b2, -1)};
                                 });
    const auto& g = ir_of(kg);
    Partition p = kiln::passes::partition(g);
    check_invariants(g, p);
    // The first bias + relu is the first matmul's epilogue; the second bias is reserved by
    // the softmax (a row op absorbs the producers of its operand), so the second matmul
    // stays alone.
    REQUIRE(kinds(p) == std::vector<GroupKind>{GroupKind::matmul, GroupKind::matmul, GroupKind::row_reduction});
    CHECK(op_names(g, p.groups[0]) == std::vector<std::string>{"matmul", "add", "relu"});
    CHECK(op_names(g, p.groups[1]) == std::vector<std::string>{"matmul"});
    CHECK(op_names(g, p.groups[2]) == std::vector<std::string>{"add", "softmax"});
    CHECK(p.groups[2].name == "g2.softmax");
    CHECK(p.groups[0].name == "g0.matmul_add_relu");
    CHECK(p.groups[0].outputs.size() == 1);
    CHECK(p.groups[0].inputs.size() == 3);  // x, W1 and b1
    // Deterministic.
    Partition q = kiln::passes::partition(g);
    REQUIRE(q.groups.size() == p.groups.size());
    for (std::size_t i = 0; i < p.groups.size(); ++i) {
        CHECK(q.groups[i].name == p.groups[i].name);
        CHECK(q.groups[i].nodes == p.groups[i].nodes);
        CHECK(q.groups[i].inputs == p.groups[i].inputs);
        CHECK(q.groups[i].outputs == p.groups[i].outputs);
    }
}

TEST_CASE("fuse: softmax(layer_norm(x)) gives one chained row group; consumers join the write") {
    kiln::Tensor gamma = kiln::Tensor::ones({32}), beta = kiln::Tensor::zeros({32});
    kiln::Graph kg = kiln::trace("sln", {kiln::arg("x", DType::f32, {kiln::dyn("n"), 32})},
                                 [&](const std::vector<Var>& in) -> std::vector<Var> {
                                     return {kiln::relu(kiln::softmax(kiln::layer_norm(in[0], gamma, beta), -1)) * 2.0};
                                 });
    const auto& g = ir_of(kg);
    Partition p = kiln::passes::partition(g);
    check_invariants(g, p);
    // The softmax reads the layer_norm's result over the same rows: one group, whose only
    // output is the graph's (the layer_norm's result is recomputed, not stored).
    REQUIRE(kinds(p) == std::vector<GroupKind>{GroupKind::row_reduction});
    CHECK(op_names(g, p.groups[0]) == std::vector<std::string>{"layer_norm", "softmax", "relu", "mul"});
    CHECK(p.groups[0].name == "g0.layer_norm_softmax");
    CHECK(p.groups[0].outputs.size() == 1);
}

TEST_CASE("fuse: a value used by two groups is materialised; producers with other users are not absorbed") {
    kiln::Graph kg = kiln::trace("shared", {kiln::arg("x", DType::f32, {4, 8}), kiln::arg("b", DType::f32, {8})},
                                 [&](const std::vector<Var>& in) -> std::vector<Var> {
                                     Var y = kiln::exp(in[0]);
                                     Var z = in[0] * in[1];  // only used by the softmax: absorbed
                                     return {y + 1.0, kiln::softmax(y + z, -1), kiln::sum(y, 1) * 3.0};
                                 });
    const auto& g = ir_of(kg);
    Partition p = kiln::passes::partition(g);
    check_invariants(g, p);
    // y = exp(x) is read by the elementwise output, the softmax and the sum: materialised.
    int y_group = -1;
    for (std::size_t gi = 0; gi < p.groups.size(); ++gi)
        for (auto v : p.groups[gi].nodes)
            if (g.nodes[static_cast<std::size_t>(v)].op == kiln::ir::Op::exp) y_group = static_cast<int>(gi);
    REQUIRE(y_group >= 0);
    CHECK(p.groups[static_cast<std::size_t>(y_group)].kind == GroupKind::elementwise);
    CHECK(p.groups[static_cast<std::size_t>(y_group)].outputs.size() == 2);  // y and y + 1
    int rows = 0;
    for (const auto& gr : p.groups) {
        if (gr.kind != GroupKind::row_reduction) continue;
        ++rows;
        auto names = op_names(g, gr);
        if (std::find(names.begin(), names.end(), "softmax") != names.end())
            CHECK(names == std::vector<std::string>{"mul", "add", "softmax"});
        else
            CHECK(names == std::vector<std::string>{"sum", "mul"});
    }
    CHECK(rows == 2);
}

TEST_CASE("fuse: a residual add read from an earlier group joins the matmul's epilogue") {
    kiln::Tensor W = kiln::Tensor::randn({8, 8}, 3);
    kiln::Graph kg = kiln::trace("cycle", {kiln::arg("x", DType::f32, {4, 8})},
                                 [&](const std::vector<Var>& in) -> std::vector<Var> {
                                     Var a = kiln::relu(in[0]);
                                     Var m = kiln::matmul(a, W);
                                     return {kiln::tanh(a + m)};
                                 });
    const auto& g = ir_of(kg);
    Partition p = kiln::passes::partition(g);
    check_invariants(g, p);
    // a + m joins m's group (a is materialised by its own group), so no cycle can form.
    REQUIRE(kinds(p) == std::vector<GroupKind>{GroupKind::elementwise, GroupKind::matmul});
    CHECK(op_names(g, p.groups[1]) == std::vector<std::string>{"matmul", "add", "tanh"});
    CHECK(p.groups[0].outputs.size() == 1);
}

TEST_CASE("fuse: matmul epilogues stop at a shared result, a graph output, or a growing broadcast") {
    kiln::Tensor W = kiln::Tensor::randn({8, 6}, 3), b = kiln::Tensor::randn({6}, 4), b2 = kiln::Tensor::randn({1, 6}, 5);
    kiln::Graph kg = kiln::trace(
        "epi", {kiln::arg("x", DType::f32, {kiln::dyn("n"), 8}), kiln::arg("r", DType::f32, {kiln::dyn("n"), 6}),
                kiln::arg("big", DType::f32, {3, kiln::dyn("n"), 6})},
        [&](const std::vector<Var>& in) -> std::vector<Var> {
            // 1: bias, gelu, clamp, residual, scalar: one group.
            Var y1 = kiln::clamp(kiln::gelu(kiln::matmul(in[0], W) + b2), -1.0, 1.0) + in[1] * 0.5;
            // 2: the matmul result is read twice, inside the epilogue: one group.
            Var m2 = kiln::matmul(in[0], W);
            Var r2 = kiln::relu(m2);
            Var y2 = r2 + kiln::sigmoid(m2);
            // 3: bias then an output in the middle of the chain: the chain stops at the output.
            Var h3 = kiln::matmul(in[0], W) + b;
            Var y3 = kiln::tanh(h3);
            // 4: a broadcast that grows the shape does not join.
            Var y4 = kiln::silu(kiln::matmul(in[0], W) * in[2]);
            return {y1, y2, h3, y3, y4};
        });
    const auto& g = ir_of(kg);
    Partition p = kiln::passes::partition(g);
    check_invariants(g, p);
    const auto mm = ops_of_kind(g, p, GroupKind::matmul);
    REQUIRE(mm.size() == 4);
    CHECK(mm[0] == std::vector<std::string>{"matmul", "add", "gelu", "clamp", "add"});
    CHECK(mm[1] == std::vector<std::string>{"matmul", "relu", "sigmoid", "add"});
    CHECK(mm[2] == std::vector<std::string>{"matmul", "add"});
    CHECK(mm[3] == std::vector<std::string>{"matmul"});
}

TEST_CASE("fuse: a conv's epilogue may read its result twice (SiLU, squeeze-excite), up to what is read outside") {
    kiln::Tensor W = kiln::Tensor::randn({8, 4, 3, 3}, 3), b = kiln::Tensor::randn({8}, 4);
    kiln::Graph kg = kiln::trace(
        "silu", {kiln::arg("x", DType::f32, {1, 4, 6, 6})}, [&](const std::vector<Var>& in) -> std::vector<Var> {
            // 1: SiLU as the ONNX exports write it; the result feeds a pool and a product
            // (squeeze-excite), both outside the group.
            Var y1 = kiln::conv2d(in[0], W, b, {1, 1}, {1, 1});
            Var s1 = y1 * kiln::sigmoid(y1);
            Var se = s1 * kiln::sigmoid(kiln::global_avg_pool2d(s1));
            // 2: the sigmoid is also a graph output: the epilogue cannot take it, nor the
            // product that reads it.
            Var y2 = kiln::conv2d(in[0], W, b, {1, 1}, {1, 1});
            Var g2 = kiln::sigmoid(y2);
            Var s2 = g2 * y2;
            // 3: the conv result is also read by another group (a pool): no epilogue.
            Var y3 = kiln::conv2d(in[0], W, b, {1, 1}, {1, 1});
            Var s3 = kiln::relu(y3) + kiln::tanh(y3);
            Var p3 = kiln::global_avg_pool2d(y3);
            return {se, s2, g2, s3, p3};
        });
    const auto& g = ir_of(kg);
    Partition p = kiln::passes::partition(g);
    check_invariants(g, p);
    const auto cv = ops_of_kind(g, p, GroupKind::conv);
    REQUIRE(cv.size() == 3);
    CHECK(cv[0] == std::vector<std::string>{"conv2d", "sigmoid", "mul"});
    CHECK(cv[1] == std::vector<std::string>{"conv2d"});
    CHECK(cv[2] == std::vector<std::string>{"conv2d"});
}

TEST_CASE("fuse: batched matmul with a broadcast weight takes its epilogue") {
    kiln::Tensor W = kiln::Tensor::randn({5, 7}, 3, DType::f64), b = kiln::Tensor::randn({7}, 4, DType::f64);
    kiln::Graph kg = kiln::trace("bmm", {kiln::arg("x", DType::f64, {2, kiln::dyn("s"), 5})},
                                 [&](const std::vector<Var>& in) -> std::vector<Var> {
                                     return {kiln::relu(kiln::matmul(in[0], W) + b)};
                                 });
    const auto& g = ir_of(kg);
    Partition p = kiln::passes::partition(g);
    check_invariants(g, p);
    REQUIRE(p.groups.size() == 1);
    const auto& last = p.groups.back();
    CHECK(last.kind == GroupKind::matmul);
    CHECK(op_names(g, last) == std::vector<std::string>{"matmul", "add", "relu"});
}

TEST_CASE("fuse: broadcasting chains, internal smaller values, and outputs of one shape") {
    kiln::Graph kg = kiln::trace("bcast",
                                 {kiln::arg("a", DType::f32, {5, 1}), kiln::arg("b", DType::f32, {5, 7}),
                                  kiln::arg("c", DType::f32, {3, 5, 7})},
                                 [&](const std::vector<Var>& in) -> std::vector<Var> {
                                     Var s = kiln::exp(in[0]) * 2.0;  // [5,1], used only below
                                     Var t = s + in[1];                // [5,7], also an output
                                     return {t, kiln::sigmoid(t * in[2])};  // [3,5,7]
                                 });
    const auto& g = ir_of(kg);
    Partition p = kiln::passes::partition(g);
    check_invariants(g, p);
    // s joins t (used only by t); t is an output of shape [5,7] so t*c ([3,5,7]) starts a new group.
    REQUIRE(kinds(p) == std::vector<GroupKind>{GroupKind::elementwise, GroupKind::elementwise});
    CHECK(op_names(g, p.groups[0]) == std::vector<std::string>{"exp", "mul", "add"});
    CHECK(op_names(g, p.groups[1]) == std::vector<std::string>{"mul", "sigmoid"});
}

TEST_CASE("fuse: non-trailing reductions, softmax on another axis, prod, shape ops stay opaque; dead nodes skipped") {
    kiln::Graph kg = kiln::trace("opaque", {kiln::arg("x", DType::f32, {4, 6, 5})},
                                 [&](const std::vector<Var>& in) -> std::vector<Var> {
                                     const Var& x = in[0];
                                     Var dead = kiln::exp(x) * 3.0;
                                     (void)dead;
                                     return {kiln::sum(x, 0), kiln::softmax(x, 1), kiln::prod(x, 2),
                                             kiln::transpose(x, 0, 1), kiln::mean(x, std::vector<std::int64_t>{1, 2}, true),
                                             kiln::max(x, 1), kiln::argmax(x, 2)};
                                 });
    const auto& g = ir_of(kg);
    Partition p = kiln::passes::partition(g);
    check_invariants(g, p);
    std::vector<GroupKind> want{GroupKind::opaque, GroupKind::opaque,        GroupKind::opaque, GroupKind::opaque,
                                GroupKind::row_reduction, GroupKind::opaque, GroupKind::opaque};
    CHECK(kinds(p) == want);
    for (std::size_t i = 0; i < g.nodes.size(); ++i)
        if (g.nodes[i].op == kiln::ir::Op::exp) CHECK(p.group_of[i] == -1);
}

TEST_CASE("fuse: a transformer block partitions into valid, ordered groups") {
    const std::int64_t D = 32, H = 4, F = 64;
    auto w = [](kiln::Shape s, std::uint64_t seed) { return kiln::Tensor::randn(s, seed); };
    kiln::Tensor g1 = kiln::Tensor::ones({D}), b1 = kiln::Tensor::zeros({D}), Wqkv = w({3 * D, D}, 1), bqkv = w({3 * D}, 2),
                 Wo = w({D, D}, 3), bo = w({D}, 4), g2 = kiln::Tensor::ones({D}), b2 = kiln::Tensor::zeros({D}),
                 W1 = w({F, D}, 5), bb1 = w({F}, 6), W2 = w({D, F}, 7), bb2 = w({D}, 8);
    kiln::Graph kg = kiln::trace(
        "block", {kiln::arg("x", DType::f32, {2, kiln::dyn("seq"), D})}, [&](const std::vector<Var>& in) -> std::vector<Var> {
            const Var& x = in[0];
            const kiln::Dim B = x.dim(0), S = x.dim(1);
            Var h = kiln::layer_norm(x, g1, b1);
            Var qkv = kiln::linear(h, Wqkv, bqkv);
            auto parts = kiln::split(qkv, 3, -1);
            auto heads = [&](const Var& t) { return kiln::permute(kiln::reshape(t, {B, S, H, D / H}), {0, 2, 1, 3}); };
            Var q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);
            Var scores = kiln::matmul(q, kiln::transpose(k, -2, -1)) * 0.25;
            Var ctx = kiln::matmul(kiln::softmax(scores, -1), v);
            ctx = kiln::reshape(kiln::permute(ctx, {0, 2, 1, 3}), {B, S, D});
            Var x1 = x + kiln::linear(ctx, Wo, bo);
            Var m = kiln::gelu(kiln::linear(kiln::layer_norm(x1, g2, b2), W1, bb1));
            return {x1 + kiln::linear(m, W2, bb2)};
        });
    const auto& g = ir_of(kg);
    Partition p = kiln::passes::partition(g);
    check_invariants(g, p);
    int matmuls = 0, matmul_groups = 0, rows = 0;
    for (const auto& nd : g.nodes) matmuls += nd.op == kiln::ir::Op::matmul;
    for (const auto& gr : p.groups) {
        matmul_groups += gr.kind == GroupKind::matmul;
        if (gr.kind != GroupKind::row_reduction) continue;
        ++rows;
        auto names = op_names(g, gr);
        if (std::find(names.begin(), names.end(), "softmax") != names.end())
            CHECK(names == std::vector<std::string>{"mul", "softmax"});  // the scale is absorbed
    }
    CHECK(matmul_groups == matmuls);
    CHECK(rows == 3);  // two layer_norms and the softmax
    // x1 is read by the second layer_norm and by the final residual add: materialised.
    const std::string text = kiln::passes::to_string(p, g);
    CHECK(text.find("[row_reduction]") != std::string::npos);
}

TEST_CASE("fuse: relu(permute(x)) + y is one elementwise group with the permute inside, reading x") {
    kiln::Graph kg = kiln::trace("perm", {kiln::arg("x", DType::f32, {kiln::dyn("a"), 5, 3}), kiln::arg("y", DType::f32, {3, kiln::dyn("a"), 5})},
                                 [&](const std::vector<Var>& in) -> std::vector<Var> {
                                     return {kiln::relu(kiln::permute(in[0], {2, 0, 1})) + in[1]};
                                 });
    const auto& g = ir_of(kg);
    Partition p = kiln::passes::partition(g);
    check_invariants(g, p);
    REQUIRE(kinds(p) == std::vector<GroupKind>{GroupKind::elementwise});
    CHECK(op_names(g, p.groups[0]) == std::vector<std::string>{"permute", "relu", "add"});
    CHECK(p.groups[0].inputs == std::vector<kiln::ir::ValueId>{g.inputs[0], g.inputs[1]});
    CHECK(p.groups[0].name == "g0.permute_relu_add");
}

TEST_CASE("fuse: chains of views join together; views of another group's output join their reader") {
    kiln::Graph kg = kiln::trace("chain", {kiln::arg("x", DType::f32, {4, 6}), kiln::arg("y", DType::f32, {1, 3, 6})},
                                 [&](const std::vector<Var>& in) -> std::vector<Var> {
                                     Var a = kiln::unsqueeze(kiln::slice(in[0], 0, 1, 4), 0) * in[1];  // [1, 3, 6]
                                     Var e = kiln::exp(in[0]);                                          // [4, 6]
                                     return {a, e + kiln::transpose(kiln::reshape(e, {6, 4}), 0, 1)};
                                 });
    const auto& g = ir_of(kg);
    Partition p = kiln::passes::partition(g);
    check_invariants(g, p);
    // exp(x) is read by the add and by the reshape: the reshape cannot join exp's group
    // (its operand is computed there), so e is materialised and the add's group reads it
    // through reshape and transpose.
    REQUIRE(kinds(p) == std::vector<GroupKind>{GroupKind::elementwise, GroupKind::elementwise, GroupKind::elementwise});
    CHECK(op_names(g, p.groups[0]) == std::vector<std::string>{"slice", "unsqueeze", "mul"});
    CHECK(op_names(g, p.groups[1]) == std::vector<std::string>{"exp"});
    CHECK(op_names(g, p.groups[2]) == std::vector<std::string>{"reshape", "permute", "add"});
    CHECK(p.groups[2].inputs.size() == 1);  // e, read directly and through the views
}

TEST_CASE("fuse: a view that is a graph output, is read by two groups, or feeds a matmul stays opaque") {
    kiln::Tensor W = kiln::Tensor::randn({4, 4}, 1);
    kiln::Graph kg = kiln::trace("stay", {kiln::arg("x", DType::f32, {4, 4})}, [&](const std::vector<Var>& in) -> std::vector<Var> {
        Var t = kiln::transpose(in[0], 0, 1);                   // read by an elementwise group and a matmul
        Var r = kiln::reshape(in[0], {16});                      // a graph output, also read by exp
        return {kiln::exp(t) + 1.0, kiln::matmul(t, W), r, kiln::exp(r)};
    });
    const auto& g = ir_of(kg);
    Partition p = kiln::passes::partition(g);
    check_invariants(g, p);
    int opaque = 0;
    for (const auto& gr : p.groups) {
        if (gr.kind != GroupKind::opaque) continue;
        ++opaque;
        CHECK(kiln::passes::is_view_op(g.nodes[static_cast<std::size_t>(gr.nodes.front())]));
    }
    CHECK(opaque == 2);
}

TEST_CASE("fuse: a view of a row op's operand joins the row group") {
    kiln::Graph kg = kiln::trace("rowview", {kiln::arg("x", DType::f32, {kiln::dyn("n"), 8, 5})},
                                 [&](const std::vector<Var>& in) -> std::vector<Var> {
                                     return {kiln::softmax(kiln::transpose(in[0], 1, 2) * 2.0, -1)};
                                 });
    const auto& g = ir_of(kg);
    Partition p = kiln::passes::partition(g);
    check_invariants(g, p);
    REQUIRE(kinds(p) == std::vector<GroupKind>{GroupKind::row_reduction});
    CHECK(op_names(g, p.groups[0]) == std::vector<std::string>{"permute", "mul", "softmax"});
}
