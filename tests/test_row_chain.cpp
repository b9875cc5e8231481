// Chains of row ops in one row_reduction group (src/passes/fuse.h, src/kir/lower_row.cpp):
// softmax(layer_norm(x)), log_softmax(rms_norm(x) * 2 + 1), layer_norm(layer_norm(x)), a
// chain whose intermediate is also a graph output, a chain ended by a reduction over the
// last axis, and chains over different rows that must not fuse. Partition checks; the
// lowering run through kir::evaluate against the interpreter on random shapes (odd and
// zero sizes) in every float dtype; and end to end through kiln::Engine at tier 2.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "jit/exec/shape_plan.h"
#include "have_tier.h"
#include "reference.h"
#include "reference_kir.h"
#include "src/ir/ir.h"
#include "src/kir/eval.h"
#include "src/kir/kir.h"
#include "jit/exec/pipeline.h"
#include "src/passes/fuse.h"
#include "tiers/interp/interp.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
using kiln::Var;
namespace ir = kiln::ir;
namespace kir = kiln::kir;
namespace passes = kiln::passes;

using Body = std::function<std::vector<Var>(const std::vector<Var>&)>;

// The graphs of these tests, over inputs x [.., N], gamma [N], beta [N], w [N].
struct Case {
    const char* name;
    int row_ops;            // row ops in the fused group (the graph is that one group)
    bool empty_rows = true;  // defined on zero-length rows (max is not: the interpreter throws)
    Body body;
};

std::vector<Case> chain_cases() {
    return {
        {"softmax(layer_norm)", 2, true,
         [](const std::vector<Var>& in) -> std::vector<Var> {
             Var y = kiln::softmax(kiln::layer_norm(in[0] * in[3] + 0.5, in[1], in[2], 1e-5), -1);
             return {kiln::relu(y) * 2.0};
         }},
        {"log_softmax(rms_norm*2+1)", 2, true,
         [](const std::vector<Var>& in) -> std::vector<Var> {
             return {kiln::log_softmax(kiln::rms_norm(in[0], in[1], 1e-6) * 2.0 + 1.0, -1)};
         }},
        {"layer_norm(layer_norm)", 2, true,
         [](const std::vector<Var>& in) -> std::vector<Var> {
             return {kiln::layer_norm(kiln::layer_norm(in[0], in[1], in[2], 1e-5) * in[3], in[2], in[1], 1e-3)};
         }},
        {"intermediate is an output", 2, true,
         [](const std::vector<Var>& in) -> std::vector<Var> {
             Var ln = kiln::layer_norm(in[0], in[1], in[2], 1e-5);
             return {kiln::softmax(ln, -1), ln, kiln::tanh(ln) + in[3]};
         }},
        {"softmax -> rms_norm -> log_softmax", 3, true,
         [](const std::vector<Var>& in) -> std::vector<Var> {
             Var s = kiln::softmax(in[0], -1);
             return {kiln::log_softmax(kiln::rms_norm(s * 4.0, in[1], 1e-6) - in[3], -1)};
         }},
        {"sum(softmax(layer_norm)) over the last axis", 3, true,
         [](const std::vector<Var>& in) -> std::vector<Var> {
             Var y = kiln::softmax(kiln::layer_norm(in[0], in[1], in[2], 1e-5), -1);
             return {kiln::sum(y * in[3], -1) * 3.0};
         }},
        {"max(rms_norm) keepdim, rms_norm also an output", 2, false,
         [](const std::vector<Var>& in) -> std::vector<Var> {
             Var r = kiln::rms_norm(in[0], in[1], 1e-6);
             return {kiln::max(r, -1, true) - 1.0, r};
         }},
    };
}

// Store statements in a loop nest (each runs once per element of its loop).
// Stores to `buffer` in a kernel body.
int count_stores(const std::vector<kir::StmtRef>& body, int buffer) {
    int n = 0;
    for (const auto& st : body)
        n += st->kind == kir::StmtKind::Store ? (st->buffer == buffer ? 1 : 0) : count_stores(st->body, buffer);
    return n;
}

const ir::Graph& ir_of(const kiln::Graph& g) { return *g.impl(); }

int count_row_ops(const ir::Graph& g, const passes::Group& gr) {
    return static_cast<int>(std::count_if(gr.nodes.begin(), gr.nodes.end(),
                                          [&](auto v) { return passes::is_row_op(g.nodes[static_cast<std::size_t>(v)]); }));
}

std::vector<std::string> op_names(const ir::Graph& g, const passes::Group& gr) {
    std::vector<std::string> v;
    for (auto id : gr.nodes) v.emplace_back(ir::op_name(g.nodes[static_cast<std::size_t>(id)].op));
    return v;
}

kiln::Graph trace_case(const Body& body, const std::vector<kiln::Dim>& xs, DType dt) {
    const kiln::Dim n = xs.empty() ? kiln::Dim(1) : xs.back();
    return kiln::trace("chain",
                       {kiln::arg("x", dt, xs), kiln::arg("g", dt, {n}), kiln::arg("b", dt, {n}), kiln::arg("w", dt, {n})},
                       body);
}

// An engine that compiles every group at tier 2 on its second call, in the calling thread;
// and one that only interprets.
kiln::Options tier2_options() {
    kiln::Options o;
    o.jit = true;
    o.tier2_threshold = 2;
    o.async_compile = false;
    return o;
}
kiln::Options interp_options() {
    kiln::Options o;
    o.jit = false;
    return o;
}

// Lowers and evaluates every group of `kg` against the interpreter and the Engine
// (ref::check_lowered_graph); returns the number of groups.
std::size_t check_lowered(const kiln::Graph& kg, const std::vector<Tensor>& inputs, double tol_scale) {
    return static_cast<std::size_t>(ref::check_lowered_graph(kg, inputs, tol_scale).groups);
}

}  // namespace

TEST_CASE("row chain: softmax(layer_norm(x)) is one row group with its consumers; the intermediate is not stored") {
    kiln::Graph kg = trace_case(
        [](const std::vector<Var>& in) -> std::vector<Var> {
            return {kiln::relu(kiln::softmax(kiln::layer_norm(in[0], in[1], in[2]), -1)) * 2.0};
        },
        {kiln::dyn("n"), 32}, DType::f32);
    const ir::Graph& g = ir_of(kg);
    const passes::Partition p = passes::partition(g);
    REQUIRE(p.groups.size() == 1);
    CHECK(p.groups[0].kind == passes::GroupKind::row_reduction);
    CHECK(op_names(g, p.groups[0]) == std::vector<std::string>{"layer_norm", "softmax", "relu", "mul"});
    CHECK(p.groups[0].name == "g0.layer_norm_softmax");
    CHECK(p.groups[0].outputs.size() == 1);  // only the graph output is stored
}

TEST_CASE("row chain: log_softmax(rms_norm(x) * 2 + 1) and layer_norm(layer_norm(x)) fuse") {
    {
        kiln::Graph kg = trace_case(
            [](const std::vector<Var>& in) -> std::vector<Var> {
                return {kiln::log_softmax(kiln::rms_norm(in[0], in[1]) * 2.0 + 1.0, -1)};
            },
            {7, 3, 16}, DType::f32);
        const passes::Partition p = passes::partition(ir_of(kg));
        REQUIRE(p.groups.size() == 1);
        CHECK(op_names(ir_of(kg), p.groups[0]) == std::vector<std::string>{"rms_norm", "mul", "add", "log_softmax"});
        CHECK(p.groups[0].outputs.size() == 1);
    }
    {
        kiln::Graph kg = trace_case(
            [](const std::vector<Var>& in) -> std::vector<Var> {
                return {kiln::layer_norm(kiln::layer_norm(in[0], in[1], in[2]), in[1], in[2])};
            },
            {5, 16}, DType::f32);
        const passes::Partition p = passes::partition(ir_of(kg));
        REQUIRE(p.groups.size() == 1);
        CHECK(p.groups[0].name == "g0.layer_norm_layer_norm");
        CHECK(count_row_ops(ir_of(kg), p.groups[0]) == 2);
        CHECK(p.groups[0].outputs.size() == 1);
    }
}

TEST_CASE("row chain: an intermediate that is also a graph output is a group output") {
    kiln::Graph kg = trace_case(
        [](const std::vector<Var>& in) -> std::vector<Var> {
            Var ln = kiln::layer_norm(in[0], in[1], in[2]);
            return {kiln::softmax(ln, -1), ln};
        },
        {6, 16}, DType::f32);
    const ir::Graph& g = ir_of(kg);
    const passes::Partition p = passes::partition(g);
    REQUIRE(p.groups.size() == 1);
    CHECK(count_row_ops(g, p.groups[0]) == 2);
    REQUIRE(p.groups[0].outputs.size() == 2);
    CHECK(g.nodes[static_cast<std::size_t>(p.groups[0].outputs[0])].op == ir::Op::layer_norm);
    CHECK(g.nodes[static_cast<std::size_t>(p.groups[0].outputs[1])].op == ir::Op::softmax);
    // The layer_norm is stored once (in the softmax's write pass); the softmax's f32 output
    // row is also its scratch: the operand, then exp(v - max), then the result.
    const auto plan = kiln::jit::lower_function(kg.impl());
    const auto& k = plan->groups[0]->kernel;
    REQUIRE_MESSAGE(k.has_value(), plan->groups[0]->lower_failure);
    const std::string text = kir::print(*k);
    INFO(text);
    const int ln_buf = 3, softmax_buf = 4;  // buffers: 3 inputs, then the outputs in order
    REQUIRE(k->buffers.size() == 5);
    CHECK(count_stores(k->body, ln_buf) == 1);
    CHECK(count_stores(k->body, softmax_buf) == 3);
    check_lowered(kg, {ref::random_input({6, 16}, 1, DType::f32), ref::random_input({16}, 2, DType::f32),
                       ref::random_input({16}, 3, DType::f32), ref::random_input({16}, 4, DType::f32)},
                  8.0);
}

TEST_CASE("row chain: row ops over different rows do not fuse") {
    // A reduction over the last two axes runs over longer rows than the layer_norm.
    {
        kiln::Graph kg = trace_case(
            [](const std::vector<Var>& in) -> std::vector<Var> {
                return {kiln::mean(kiln::layer_norm(in[0], in[1], in[2]), std::vector<std::int64_t>{1, 2})};
            },
            {4, 3, 8}, DType::f32);
        const passes::Partition p = passes::partition(ir_of(kg));
        REQUIRE(p.groups.size() == 2);
        for (const auto& gr : p.groups) CHECK(count_row_ops(ir_of(kg), gr) == 1);
    }
    // The softmax's operand is broadcast to a bigger shape: more rows than the layer_norm's.
    {
        kiln::Graph kg = kiln::trace("bigger", {kiln::arg("x", DType::f32, {4, 1, 8}), kiln::arg("y", DType::f32, {4, 3, 8})},
                                     [](const std::vector<Var>& in) -> std::vector<Var> {
                                         Var ln = kiln::layer_norm(in[0], Tensor::ones({8}), Tensor::zeros({8}));
                                         return {kiln::softmax(ln + in[1], -1)};
                                     });
        const passes::Partition p = passes::partition(ir_of(kg));
        REQUIRE(p.groups.size() == 2);
        for (const auto& gr : p.groups) CHECK(count_row_ops(ir_of(kg), gr) == 1);
        check_lowered(kg, {ref::random_input({4, 1, 8}, 5, DType::f32), ref::random_input({4, 3, 8}, 6, DType::f32)}, 8.0);
    }
    // Joining would close a cycle: the softmax also reads a matmul of the layer_norm's result.
    {
        Tensor W = Tensor::randn({8, 8}, 7);
        kiln::Graph kg = kiln::trace("cycle", {kiln::arg("x", DType::f32, {4, 8})},
                                     [&](const std::vector<Var>& in) -> std::vector<Var> {
                                         Var ln = kiln::layer_norm(in[0], Tensor::ones({8}), Tensor::zeros({8}));
                                         return {kiln::softmax(ln + kiln::matmul(ln, W), -1)};
                                     });
        const passes::Partition p = passes::partition(ir_of(kg));
        REQUIRE(p.groups.size() == 3);
        for (const auto& gr : p.groups) CHECK(count_row_ops(ir_of(kg), gr) <= 1);
        check_lowered(kg, {ref::random_input({4, 8}, 8, DType::f32)}, 8.0);
    }
    // A reduction ends a chain: a softmax over its result (other rows) is a group of its own.
    {
        kiln::Graph kg = trace_case(
            [](const std::vector<Var>& in) -> std::vector<Var> {
                return {kiln::softmax(kiln::sum(kiln::layer_norm(in[0], in[1], in[2]), -1), -1)};
            },
            {4, 3, 8}, DType::f32);
        const passes::Partition p = passes::partition(ir_of(kg));
        REQUIRE(p.groups.size() == 2);
        CHECK(count_row_ops(ir_of(kg), p.groups[0]) == 2);  // layer_norm, sum over its rows
        CHECK(count_row_ops(ir_of(kg), p.groups[1]) == 1);
    }
}

TEST_CASE("row chain: lowered chains agree with the interpreter on random shapes, every float dtype") {
    const std::vector<Case> cases = chain_cases();
    int rep = 0;
    for (const Case& c : cases)
        for (DType dt : ref::float_dtypes())
            for (const Shape& s : std::vector<Shape>{{4, 9}, {1, 1}, {3, 5, 17}, {0, 7}, {3, 0}, {2, 129}, {7}}) {
                const std::uint64_t seed = 910000 + static_cast<std::uint64_t>(rep++) * 10;
                if (!c.empty_rows && s.back() == 0) continue;
                CAPTURE(seed);
                INFO("case ", c.name, " dtype ", ref::dname(dt), " shape ", ref::shape_str(s));
                const std::int64_t n = s.back();
                std::vector<Tensor> ins{ref::random_input(s, seed, dt, -4, 4), ref::random_input({n}, seed + 1, dt, 0.5, 1.5),
                                        ref::random_input({n}, seed + 2, dt), ref::random_input({n}, seed + 3, dt)};
                kiln::Graph kg = trace_case(c.body, std::vector<kiln::Dim>(s.begin(), s.end()), dt);
                const passes::Partition p = passes::partition(ir_of(kg));
                REQUIRE(p.groups.size() == 1);
                CHECK(p.groups[0].kind == passes::GroupKind::row_reduction);
                CHECK(count_row_ops(ir_of(kg), p.groups[0]) == c.row_ops);
                const bool half = dt == DType::f16 || dt == DType::bf16;
                check_lowered(kg, ins, half ? 32.0 : 16.0);
            }
}

TEST_CASE("row chain: fused chains reach tier 2 through the Engine and agree with the interpreter") {
    if (kiln::test::lacks_tier(2)) return;
    const kiln::Options oj = tier2_options(), oi = interp_options();
    const std::vector<Case> cases = chain_cases();
    std::uint64_t seed = 920000;
    for (const Case& c : cases)
        for (DType dt : {DType::f32, DType::f64, DType::bf16})
            for (const Shape& s : std::vector<Shape>{{33, 100}, {2, 3, 1024}, {5, 1}}) {
                CAPTURE(++seed);
                INFO("case ", c.name, " dtype ", ref::dname(dt), " shape ", ref::shape_str(s));
                kiln::Graph kg = trace_case(c.body, std::vector<kiln::Dim>(s.begin(), s.end()), dt);
                kiln::Function fj = kiln::Engine(oj).load(kg);
                kiln::Function fi = kiln::Engine(oi).load(kg);
                const std::int64_t n = s.back();
                std::vector<Tensor> ins{ref::random_input(s, seed, dt, -4, 4), ref::random_input({n}, seed + 1, dt, 0.5, 1.5),
                                        ref::random_input({n}, seed + 2, dt), ref::random_input({n}, seed + 3, dt)};
                if (!c.empty_rows && n == 0) continue;
                for (int call = 0; call < 4; ++call) {
                    const std::vector<Tensor> a = fj(ins), b = fi(ins);
                    REQUIRE(a.size() == b.size());
                    const double scale = dt == DType::bf16 ? 32.0 : 16.0;
                    for (std::size_t k = 0; k < a.size(); ++k)
                        ref::check_close(a[k], ref::from_kiln(b[k]), dt, ref::tol_for(dt, scale), "output " + std::to_string(k));
                }
                const kiln::FunctionStats st = fj.stats();
                INFO(st.to_json());
                CHECK(st.groups.size() == 1);
                bool fused_tier2 = false;
                for (const auto& gs : st.groups)
                    if (gs.kind == "row_reduction" && gs.tier == 2 && gs.compiled_calls > 0) fused_tier2 = true;
                CHECK(fused_tier2);
                CHECK(st.compile_failures == 0);
            }
}

// global_avg_pool2d is the mean over H and W of [N, C, H, W]: a row reduction that takes
// its elementwise producers (efficientnet's squeeze-excite pools a SiLU) and consumers.
TEST_CASE("row chain: global_avg_pool2d fuses its producers and consumers, lowers, and reaches tier 2") {
    auto body = [](const std::vector<Var>& in) -> Var {
        Var y = in[0] * kiln::sigmoid(in[0]);
        return kiln::global_avg_pool2d(y) * 2.0 + 1.0;
    };
    std::uint64_t seed = 930000;
    for (DType dt : ref::float_dtypes())
        for (const Shape& s : std::vector<Shape>{{1, 3, 5, 7}, {2, 4, 1, 1}, {1, 2, 0, 3}, {3, 5, 14, 14}, {1, 2, 33, 17}}) {
            CAPTURE(++seed);
            INFO("dtype ", ref::dname(dt), " shape ", ref::shape_str(s));
            kiln::Graph kg = kiln::trace("gap", {kiln::arg("x", dt, std::vector<kiln::Dim>(s.begin(), s.end()))}, body);
            const passes::Partition p = passes::partition(ir_of(kg));
            REQUIRE(p.groups.size() == 1);
            CHECK(p.groups[0].kind == passes::GroupKind::row_reduction);
            CHECK(count_row_ops(ir_of(kg), p.groups[0]) == 1);
            const bool half = dt == DType::f16 || dt == DType::bf16;
            check_lowered(kg, {ref::random_input(s, seed, dt, -4, 4)}, half ? 32.0 : 16.0);
        }
    if (kiln::test::lacks_tier(2)) return;
    const kiln::Options oj = tier2_options(), oi = interp_options();
    for (DType dt : {DType::f32, DType::f64})
        for (const Shape& s : std::vector<Shape>{{1, 32, 112, 112}, {2, 7, 9, 5}}) {
            CAPTURE(++seed);
            INFO("dtype ", ref::dname(dt), " shape ", ref::shape_str(s));
            kiln::Graph kg = kiln::trace("gap", {kiln::arg("x", dt, std::vector<kiln::Dim>(s.begin(), s.end()))}, body);
            kiln::Function fj = kiln::Engine(oj).load(kg);
            kiln::Function fi = kiln::Engine(oi).load(kg);
            const std::vector<Tensor> ins{ref::random_input(s, seed, dt, -4, 4)};
            for (int call = 0; call < 4; ++call)
                ref::check_close(fj(ins)[0], ref::from_kiln(fi(ins)[0]), dt, ref::tol_for(dt, 16.0), "output");
            const kiln::FunctionStats st = fj.stats();
            INFO(st.to_json());
            REQUIRE(st.groups.size() == 1);
            CHECK(st.groups[0].kind == "row_reduction");
            CHECK(st.groups[0].tier == 2);
            CHECK(st.groups[0].compiled_calls > 0);
            CHECK(st.compile_failures == 0);
        }
}
