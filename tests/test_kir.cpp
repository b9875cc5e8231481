// Kernel IR: the lowering of fusion groups (src/kir/lower.h) run through the KIR evaluator
// (src/kir/eval.h) against the interpreter, group by group and for whole graphs, on random
// seeded shapes (broadcasting, odd and zero sizes, symbolic dims) and every dtype the ops
// accept; kir::verify and kir::print on every lowered kernel; evaluator and verifier units.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "jit/exec/shape_plan.h"
#include "reference.h"
#include "reference_kir.h"
#include "src/ir/ir.h"
#include "src/kir/eval.h"
#include "src/kir/kir.h"
#include "jit/exec/pipeline.h"
#include "src/passes/fuse.h"
#include "tiers/interp/interp.h"

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
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

using RunStats = ref::GroupRunStats;

RunStats check_graph(const kiln::Graph& kg, const std::vector<Tensor>& inputs, double tol_scale = 4.0) {
    return ref::check_lowered_graph(kg, inputs, tol_scale);
}

// A shape broadcastable to `s`: some dims set to 1, maybe fewer leading dims.
Shape broadcast_variant(std::mt19937_64& rng, const Shape& s) {
    Shape v = s;
    for (auto& d : v)
        if (rng() % 3 == 0) d = 1;
    const std::size_t drop = v.empty() ? 0 : rng() % (v.size() + 1);
    return Shape(v.begin() + static_cast<std::ptrdiff_t>(drop), v.end());
}

// A random elementwise chain of `len` ops valid for `dt` over the inputs.
std::vector<Var> random_chain(std::mt19937_64& rng, DType dt, const std::vector<Var>& in, int len) {
    std::vector<Var> pool = in;
    auto pick = [&]() -> const Var& { return pool[rng() % pool.size()]; };
    const bool fl = kiln::is_floating(dt), bl = dt == DType::boolean;
    for (int i = 0; i < len; ++i) {
        const Var a = pick(), b = pick();
        const int what = static_cast<int>(rng() % 10);
        Var r;
        if (bl) {
            switch (what % 4) {
            case 0: r = kiln::logical_not(a); break;
            case 1: r = a == b; break;
            case 2: r = kiln::where(a < b, a, b); break;
            default: r = kiln::where(a != b, kiln::logical_not(b), a); break;
            }
        } else if (what < 4) {  // unary
            if (fl) {
                switch (rng() % 22) {
                case 0: r = kiln::neg(a); break;
                case 1: r = kiln::abs(a); break;
                case 2: r = kiln::exp(a); break;
                case 3: r = kiln::log(a); break;
                case 4: r = kiln::sqrt(a); break;
                case 5: r = kiln::rsqrt(a); break;
                case 6: r = kiln::reciprocal(a); break;
                case 7: r = kiln::sin(a); break;
                case 8: r = kiln::cos(a); break;
                case 9: r = kiln::tanh(a); break;
                case 10: r = kiln::sigmoid(a); break;
                case 11: r = kiln::relu(a); break;
                case 12: r = kiln::gelu(a); break;
                case 13: r = kiln::gelu(a, true); break;
                case 14: r = kiln::silu(a); break;
                case 15: r = kiln::erf(a); break;
                case 16: r = kiln::floor(a); break;
                case 17: r = kiln::ceil(a); break;
                case 18: r = kiln::round(a * 2.0); break;
                case 19: r = kiln::sign(a); break;
                case 20: r = kiln::clamp(a, -1.0, 1.5); break;
                default: r = kiln::cast(kiln::cast(a * 100.0, DType::i8), dt); break;
                }
            } else {
                switch (rng() % 6) {
                case 0: r = kiln::neg(a); break;
                case 1: r = kiln::abs(a); break;
                case 2: r = kiln::relu(a); break;
                case 3: r = kiln::sign(a); break;
                case 4: r = kiln::clamp(a, -5.0, 7.0); break;
                default: r = kiln::cast(kiln::cast(a, DType::f32) * 1.5, dt); break;
                }
            }
        } else if (what < 8) {  // binary
            switch (rng() % (fl ? 7 : 6)) {
            case 0: r = a + b; break;
            case 1: r = a - b; break;
            case 2: r = a * b; break;
            case 3: r = a / b; break;
            case 4: r = kiln::maximum(a, b); break;
            case 5: r = kiln::minimum(a, b); break;
            default: r = kiln::pow(kiln::abs(a), b); break;
            }
        } else {  // compare + where
            const Var c = pick();
            switch (rng() % 6) {
            case 0: r = kiln::where(a < b, c, a); break;
            case 1: r = kiln::where(a <= b, b, c); break;
            case 2: r = kiln::where(a > c, a, b); break;
            case 3: r = kiln::where(a >= b, c, b); break;
            case 4: r = kiln::where(a == b, a, c); break;
            default: r = kiln::where(a != c, b, a); break;
            }
        }
        pool.push_back(r);
    }
    // Two outputs: the last value and, sometimes, an earlier one (it may have another shape).
    std::vector<Var> out{pool.back()};
    if (pool.size() > in.size() + 1 && rng() % 2) out.push_back(pool[in.size() + rng() % (pool.size() - in.size() - 1)]);
    return out;
}

}  // namespace

TEST_CASE("kir: random elementwise chains with broadcasting, every dtype, against the interpreter") {
    RunStats total;
    for (int rep = 0; rep < 90; ++rep) {
        const std::uint64_t seed = 700000 + static_cast<std::uint64_t>(rep);
        CAPTURE(seed);
        std::mt19937_64 r(seed);
        const DType dt = ref::all_dtypes()[static_cast<std::size_t>(rep) % ref::all_dtypes().size()];
        INFO("dtype ", ref::dname(dt));
        const int rank = static_cast<int>(r() % 5);
        Shape s = ref::random_shape(r, rank, {1, 2, 3, 5, 7});
        if (rep % 15 == 14 && rank > 0) s[r() % s.size()] = 0;  // zero-size
        std::vector<Tensor> ins{ref::random_input(s, seed, dt), ref::random_input(broadcast_variant(r, s), seed + 1, dt),
                                ref::random_input(broadcast_variant(r, s), seed + 2, dt)};
        std::vector<kiln::ArgSpec> args{ref::arg_like("a", ins[0]), ref::arg_like("b", ins[1]), ref::arg_like("c", ins[2])};
        INFO("shapes ", ref::shape_str(ins[0].shape()), " ", ref::shape_str(ins[1].shape()), " ", ref::shape_str(ins[2].shape()));
        const int len = 1 + static_cast<int>(r() % 6);
        kiln::Graph kg = kiln::trace("chain", args, [&](const std::vector<Var>& in) { return random_chain(r, dt, in, len); });
        const bool half = dt == DType::f16 || dt == DType::bf16;
        RunStats st = check_graph(kg, ins, half ? 16.0 : 4.0);
        total.groups += st.groups;
        total.lowered += st.lowered;
    }
    CHECK(total.lowered > 90);
    MESSAGE("elementwise: lowered ", total.lowered, " of ", total.groups, " groups");
}

TEST_CASE("kir: symbolic dims that broadcast at run time use one generic kernel") {
    // a: [?n, ?k], b: [?m, 1] with m = 1 or n, c: [?k]: every dim is a param.
    kiln::Graph kg = kiln::trace("dyn",
                                 {kiln::arg("a", DType::f32, {kiln::dyn("n"), kiln::dyn("k")}),
                                  kiln::arg("b", DType::f32, {kiln::dyn("m"), 1}), kiln::arg("c", DType::f32, {kiln::dyn("k")})},
                                 [](const std::vector<Var>& in) -> std::vector<Var> {
                                     return {kiln::tanh(in[0] * in[1] + in[2]), kiln::softmax(in[0] - in[1], -1)};
                                 });
    const auto plan = kiln::jit::lower_function(kg.impl());
    for (const auto& gr : plan->groups) {
        const auto& k = gr->kernel;
        REQUIRE_MESSAGE(k.has_value(), gr->lower_failure);
        const std::string text = kir::print(*k);
        INFO(text);
        CHECK(!k->params.empty());
        CHECK(text.find("== 1") != std::string::npos);  // select(p == 1, 0, stride)
    }
    std::uint64_t seed = 81000;
    for (auto [n, k, m] : std::vector<std::array<std::int64_t, 3>>{{3, 4, 1}, {3, 4, 3}, {1, 7, 1}, {5, 1, 5}, {0, 3, 1}, {2, 0, 2}}) {
        CAPTURE(++seed);
        INFO("n ", n, " k ", k, " m ", m);
        check_graph(kg, {ref::random_input({n, k}, seed, DType::f32), ref::random_input({m, 1}, seed + 1, DType::f32),
                         ref::random_input({k}, seed + 2, DType::f32)});
    }
}

TEST_CASE("kir: softmax and log_softmax rows with fused producers and consumers, every float dtype") {
    for (DType dt : ref::float_dtypes())
        for (int rep = 0; rep < 6; ++rep) {
            const std::uint64_t seed = 820000 + static_cast<std::uint64_t>(rep) * 10 + static_cast<std::uint64_t>(dt);
            CAPTURE(seed);
            INFO("dtype ", ref::dname(dt));
            std::mt19937_64 r(seed);
            const std::vector<Shape> shapes{{4, 9}, {1, 1}, {3, 33}, {2, 3, 17}, {0, 5}, {3, 0}, {7}, {2, 1000}};
            const Shape s = shapes[r() % shapes.size()];
            Shape bshape = s;
            if (!bshape.empty()) bshape.back() = 1;
            Tensor x = ref::random_input(s, seed, dt, -8, 8);
            Tensor b = ref::random_input(bshape, seed + 1, dt);
            Tensor w = ref::random_input({s.back()}, seed + 2, dt);
            if (rep == 3 && x.numel() > 2 && dt == DType::f32) x.data_as<float>()[1] = std::numeric_limits<float>::quiet_NaN();
            const bool log = rep % 2 == 1;
            kiln::Graph kg = kiln::trace("softmax", {ref::arg_like("x", x), ref::arg_like("b", b), ref::arg_like("w", w)},
                                         [&](const std::vector<Var>& in) -> std::vector<Var> {
                                             Var t = in[0] * in[2] + in[1];  // absorbed producers
                                             Var y = log ? kiln::log_softmax(t, -1) : kiln::softmax(t, -1);
                                             return {y, kiln::relu(y - 0.1) * in[2]};  // y shared: stored
                                         });
            RunStats st = check_graph(kg, {x, b, w}, 8.0);
            CHECK(st.lowered == st.groups);
        }
}

TEST_CASE("kir: softmax and log_softmax rows with NaN, infinities and all -inf (the row max skips NaN)") {
    // The lowering's row max skips NaN (src/kir/lower_row.cpp); the outputs must still be
    // the interpreter's: every element of a row with a NaN is NaN, +inf and all -inf rows too.
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    const std::int64_t C = 37;
    std::vector<std::vector<double>> rows(8);
    std::mt19937_64 rng(5150);
    std::uniform_real_distribution<double> u(-8.0, 8.0);
    for (auto& row : rows)
        for (std::int64_t j = 0; j < C; ++j) row.push_back(u(rng));
    rows[1][0] = nan;                                   // NaN first
    rows[2][C / 2] = nan;                               // inside
    rows[3][C - 1] = nan;                               // last
    rows[4].assign(C, nan);                             // all NaN
    rows[5][3] = inf;                                   // +inf: NaN at it (inf - inf), 0 elsewhere
    rows[6].assign(C, -inf);                            // all -inf: NaN (-inf - -inf)
    rows[7][4] = inf;                                   // +inf and NaN
    rows[7][9] = nan;
    std::vector<double> flat;
    for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
    for (DType dt : {DType::f32, DType::f64})
        for (bool log : {false, true}) {
            INFO("dtype ", ref::dname(dt), log ? " log_softmax" : " softmax");
            Tensor x = dt == DType::f32 ? Tensor::from_vector(std::vector<float>(flat.begin(), flat.end()), {8, C})
                                        : Tensor::from_vector(flat, {8, C});
            kiln::Graph kg = kiln::trace("softmax", {ref::arg_like("x", x)}, [&](const std::vector<Var>& in) -> std::vector<Var> {
                return {log ? kiln::log_softmax(in[0], -1) : kiln::softmax(in[0], -1)};
            });
            RunStats st = check_graph(kg, {x});
            CHECK(st.lowered == st.groups);
        }
}

TEST_CASE("kir: layer_norm and rms_norm rows, every float dtype") {
    for (DType dt : ref::float_dtypes())
        for (const Shape& s : std::vector<Shape>{{4, 8}, {3, 5, 7}, {1, 1}, {2, 0}, {0, 4}, {6, 129}}) {
            const std::uint64_t seed = 830000 + static_cast<std::uint64_t>(s.back()) * 10 + static_cast<std::uint64_t>(dt);
            CAPTURE(seed);
            INFO("dtype ", ref::dname(dt), " shape ", ref::shape_str(s));
            Tensor x = ref::random_input(s, seed, dt, -4, 6), res = ref::random_input(s, seed + 1, dt);
            Tensor gamma = ref::random_input({s.back()}, seed + 2, dt), beta = ref::random_input({s.back()}, seed + 3, dt);
            kiln::Graph kg = kiln::trace(
                "norms", {ref::arg_like("x", x), ref::arg_like("r", res), ref::arg_like("g", gamma), ref::arg_like("b", beta)},
                [&](const std::vector<Var>& in) -> std::vector<Var> {
                    Var ln = kiln::layer_norm(in[0] + in[1], in[2], in[3], 1e-5);
                    return {kiln::gelu(ln, true) + 1.0, kiln::rms_norm(in[0], in[2], 1e-6) * 2.0};
                });
            RunStats st = check_graph(kg, {x, res, gamma, beta}, 8.0);
            CHECK(st.lowered == st.groups);
        }
}

TEST_CASE("kir: sum/mean/max/min over trailing axes with producers and consumers, float and integer dtypes") {
    for (int rep = 0; rep < 48; ++rep) {
        const std::uint64_t seed = 840000 + static_cast<std::uint64_t>(rep);
        CAPTURE(seed);
        std::mt19937_64 r(seed);
        const DType dt = ref::all_dtypes()[static_cast<std::size_t>(rep) % 8];  // no bool
        const bool fl = kiln::is_floating(dt);
        const int op = static_cast<int>(r() % 4);  // sum, mean, max, min
        if (op == 1 && !fl) continue;
        const int rank = 1 + static_cast<int>(r() % 4);
        Shape s = ref::random_shape(r, rank, {1, 2, 3, 5, 7, 11});
        const int k = 1 + static_cast<int>(r() % static_cast<std::uint64_t>(rank));
        if (rep % 8 == 7 && op < 2) s[static_cast<std::size_t>(rank - 1)] = 0;  // an empty row (sum 0, mean NaN)
        std::vector<std::int64_t> axes;
        for (int i = rank - k; i < rank; ++i) axes.push_back(i);
        const bool keep = r() % 2;
        INFO("dtype ", ref::dname(dt), " op ", op, " shape ", ref::shape_str(s), " k ", k, " keepdim ", keep);
        Tensor x = ref::random_input(s, seed, dt, -100, 100), y = ref::random_input(s, seed + 1, dt, -100, 100);
        if (fl && x.numel() > 3 && dt == DType::f64) x.data_as<double>()[2] = std::numeric_limits<double>::quiet_NaN();
        kiln::Graph kg = kiln::trace("reduce", {ref::arg_like("x", x), ref::arg_like("y", y)},
                                     [&](const std::vector<Var>& in) -> std::vector<Var> {
                                         Var t = kiln::maximum(in[0], in[1]) - in[1];  // absorbed producers
                                         Var red = op == 0   ? kiln::sum(t, axes, keep)
                                                   : op == 1 ? kiln::mean(t, axes, keep)
                                                   : op == 2 ? kiln::max(t, axes, keep)
                                                             : kiln::min(t, axes, keep);
                                         return {red, kiln::abs(red) * 3.0};
                                     });
        RunStats st = check_graph(kg, {x, y}, 8.0);
        CHECK(st.lowered == st.groups);
    }
}

TEST_CASE("kir: a transformer block runs with its lowered groups chained through the interpreter") {
    const std::int64_t D = 16, H = 2, F = 32;
    auto w = [](Shape s, std::uint64_t seed) { return kiln::Tensor::rand(s, seed, DType::f32, -0.3, 0.3); };
    Tensor g1 = kiln::Tensor::ones({D}), b1 = kiln::Tensor::zeros({D}), Wqkv = w({3 * D, D}, 1), bqkv = w({3 * D}, 2),
           Wo = w({D, D}, 3), bo = w({D}, 4), g2 = w({D}, 9), b2 = w({D}, 10), W1 = w({F, D}, 5), bb1 = w({F}, 6),
           W2 = w({D, F}, 7), bb2 = w({D}, 8);
    kiln::Graph kg = kiln::trace(
        "block", {kiln::arg("x", DType::f32, {2, kiln::dyn("seq"), D})}, [&](const std::vector<Var>& in) -> std::vector<Var> {
            const Var& x = in[0];
            const kiln::Dim B = x.dim(0), S = x.dim(1);
            Var qkv = kiln::linear(kiln::layer_norm(x, g1, b1), Wqkv, bqkv);
            auto parts = kiln::split(qkv, 3, -1);
            auto heads = [&](const Var& t) { return kiln::permute(kiln::reshape(t, {B, S, H, D / H}), {0, 2, 1, 3}); };
            Var scores = kiln::matmul(heads(parts[0]), kiln::transpose(heads(parts[1]), -2, -1)) * 0.25;
            Var ctx = kiln::matmul(kiln::softmax(scores, -1), heads(parts[2]));
            ctx = kiln::reshape(kiln::permute(ctx, {0, 2, 1, 3}), {B, S, D});
            Var x1 = x + kiln::linear(ctx, Wo, bo);
            Var m = kiln::gelu(kiln::linear(kiln::rms_norm(x1, g2), W1, bb1));
            return {x1 + kiln::linear(m, W2, bb2)};
        });
    for (std::int64_t seq : {1, 5, 12}) {
        CAPTURE(seq);
        RunStats st = check_graph(kg, {ref::random_input({2, seq, D}, 850000 + static_cast<std::uint64_t>(seq), DType::f32)});
        CHECK(st.lowered >= 6);
    }
}

TEST_CASE("kir: matmul groups are lowered with a hint; opaque groups are not, with a reason") {
    kiln::Tensor W = kiln::Tensor::randn({4, 3}, 1);
    kiln::Graph kg = kiln::trace("mm", {kiln::arg("x", DType::f32, {2, 4})}, [&](const std::vector<Var>& in) -> std::vector<Var> {
        return {kiln::matmul(in[0], W), kiln::transpose(in[0], 0, 1)};
    });
    const auto plan = kiln::jit::lower_function(kg.impl());
    REQUIRE(plan->groups.size() == 2);
    const auto& mk = plan->groups[0]->kernel;
    REQUIRE_MESSAGE(mk.has_value(), plan->groups[0]->lower_failure);
    CHECK(mk->matmul.has_value());
    CHECK(kir::print(*mk).find("matmul hint") != std::string::npos);
    CHECK_FALSE(plan->groups[1]->kernel.has_value());
    CHECK(plan->groups[1]->lower_failure.find("opaque") != std::string::npos);
}

// An elementwise group's inner loop runs over the trailing dims on which each input is whole
// or broadcast: squeeze-excite's x[N,C,H,W] * s[N,C,1,1] in rows of H * W (one value of s per
// row), a bias over the last dim in rows of W; the values are checked against the interpreter
// by the random chains above.
TEST_CASE("kir: elementwise rows span the trailing dims that every input has whole or broadcast") {
    kiln::Graph kg = kiln::trace(
        "se", {kiln::arg("x", DType::f32, {kiln::dyn("n"), 6, 7, 7}), kiln::arg("s", DType::f32, {kiln::dyn("n"), 6, 1, 1}),
               kiln::arg("b", DType::f32, {7})},
        [&](const std::vector<Var>& in) -> std::vector<Var> { return {in[0] * in[1], in[0] + in[2]}; });
    const auto plan = kiln::jit::lower_function(kg.impl());
    REQUIRE(plan->groups.size() == 2);
    for (const auto& g : plan->groups) REQUIRE_MESSAGE(g->kernel.has_value(), g->lower_failure);
    const std::string se = kir::print(*plan->groups[0]->kernel), bias = kir::print(*plan->groups[1]->kernel);
    CAPTURE(se);
    CAPTURE(bias);
    CHECK(se.find("in [0, 49)") != std::string::npos);
    CHECK(bias.find("in [0, 7)") != std::string::npos);
}

TEST_CASE("kir: print shows buffers, params, temps and loops") {
    kiln::Graph kg = kiln::trace("p", {kiln::arg("x", DType::f16, {kiln::dyn("n"), 8}), kiln::arg("b", DType::f16, {8})},
                                 [](const std::vector<Var>& in) -> std::vector<Var> { return {kiln::softmax(in[0] + in[1], -1)}; });
    const auto plan = kiln::jit::lower_function(kg.impl());
    REQUIRE(plan->groups.size() == 1);
    const auto& k = plan->groups[0]->kernel;
    REQUIRE(k.has_value());
    const std::string text = kir::print(*k);
    INFO(text);
    for (const char* want : {"kernel g0.softmax", "buffer b0 in0: f16", "buffer b2 out0: f16 (output)", "param p0 in0.d0 = dim 0 of b0",
                             "temp t0: f32", "for outer in [0, p0)", "for v0 in [0, 8)", "exp(", "b2[((outer * 8) + v2)] = t"})
        CHECK_MESSAGE(text.find(want) != std::string::npos, "missing: ", want);
}

TEST_CASE("kir: the evaluator follows the interpreter's scalar semantics") {
    using kir::BinaryOp;
    auto run1 = [](DType out_dt, kir::ExprRef value) {
        kir::Kernel k;
        k.name = "unit";
        k.buffers = {{"out0", out_dt, true}};
        k.extent = kir::index_const(1);
        k.body = {kir::store(0, kir::outer(), std::move(value))};
        kir::verify(k);
        Tensor out = Tensor::empty({1}, out_dt);
        void* ptrs[] = {out.data()};
        kir::evaluate(k, ptrs, nullptr, 0, 1);
        return out.to_doubles()[0];
    };
    auto i32 = [](std::int64_t v) { return kir::constant(kir::Type::i32, static_cast<double>(v)); };
    CHECK(run1(DType::i32, kir::binary(BinaryOp::div, i32(7), i32(0))) == 0);
    CHECK(run1(DType::i32, kir::binary(BinaryOp::div, i32(INT32_MIN), i32(-1))) == INT32_MIN);
    CHECK(run1(DType::i32, kir::binary(BinaryOp::add, i32(INT32_MAX), i32(1))) == INT32_MIN);
    CHECK(run1(DType::i32, kir::binary(BinaryOp::div, i32(-7), i32(2))) == -3);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    auto f32 = [](double v) { return kir::constant(kir::Type::f32, v); };
    CHECK(std::isnan(run1(DType::f32, kir::binary(BinaryOp::max, f32(1), f32(nan)))));
    CHECK(std::isnan(run1(DType::f32, kir::binary(BinaryOp::min, f32(nan), f32(1)))));
    CHECK(run1(DType::f32, kir::unary(kir::UnaryOp::round, f32(2.5))) == 2.0);
    CHECK(run1(DType::f32, kir::unary(kir::UnaryOp::round, f32(-3.5))) == -4.0);
    CHECK(std::isnan(run1(DType::f32, kir::unary(kir::UnaryOp::relu, f32(nan)))));
    CHECK(run1(DType::i8, kir::cast(kir::Type::i8, f32(1000.0))) == 127);
    CHECK(run1(DType::i8, kir::cast(kir::Type::i8, f32(nan))) == 0);
    CHECK(run1(DType::i8, kir::cast(kir::Type::i8, i32(300))) == 44);  // wraps
    CHECK(run1(DType::boolean, kir::cast(kir::Type::boolean, f32(nan))) == 1);
    CHECK(run1(DType::f16, f32(65520.0)) == std::numeric_limits<double>::infinity());  // f16 rounding on store
    CHECK(run1(DType::i8, kir::unary(kir::UnaryOp::abs, kir::constant(kir::Type::i8, -128))) == -128);
}

TEST_CASE("kir: verify rejects malformed kernels") {
    auto base = [] {
        kir::Kernel k;
        k.name = "bad";
        k.buffers = {{"in0", DType::f32, false}, {"out0", DType::f32, true}};
        k.extent = kir::index_const(4);
        k.num_vars = 1;
        k.temps = {kir::Type::f32};
        return k;
    };
    const auto x = kir::load(0, kir::Type::f32, kir::outer());
    kir::Kernel ok = base();
    ok.body = {kir::assign(0, x), kir::store(1, kir::outer(), kir::temp(0, kir::Type::f32))};
    CHECK_NOTHROW(kir::verify(ok));

    kir::Kernel to_input = base();
    to_input.body = {kir::store(0, kir::outer(), x)};
    CHECK_THROWS_WITH_AS(kir::verify(to_input), doctest::Contains("store to input buffer b0"), std::logic_error);

    kir::Kernel temp_first = base();
    temp_first.body = {kir::store(1, kir::outer(), kir::temp(0, kir::Type::f32))};
    CHECK_THROWS_WITH_AS(kir::verify(temp_first), doctest::Contains("t0 used before it is assigned"), std::logic_error);

    kir::Kernel scoped = base();  // a temp assigned in a loop is not visible after it
    scoped.body = {kir::loop(0, kir::index_const(0), kir::index_const(2), {kir::assign(0, x)}),
                   kir::store(1, kir::outer(), kir::temp(0, kir::Type::f32))};
    CHECK_THROWS_WITH_AS(kir::verify(scoped), doctest::Contains("t0 used before it is assigned"), std::logic_error);

    kir::Kernel var_outside = base();
    var_outside.body = {kir::store(1, kir::var(0), x)};
    CHECK_THROWS_WITH_AS(kir::verify(var_outside), doctest::Contains("v0 used outside its loop"), std::logic_error);

    kir::Kernel wrong_type = base();
    wrong_type.body = {kir::store(1, kir::outer(), kir::cast(kir::Type::f64, x))};
    CHECK_THROWS_WITH_AS(kir::verify(wrong_type), doctest::Contains("store of a f64 value into b1"), std::logic_error);

    kir::Kernel bad_param = base();
    bad_param.extent = kir::param(0);
    CHECK_THROWS_WITH_AS(kir::verify(bad_param), doctest::Contains("param p0 out of range"), std::logic_error);

    kir::Kernel outer_extent = base();
    outer_extent.extent = kir::outer();
    CHECK_THROWS_WITH_AS(kir::verify(outer_extent), doctest::Contains("outer in the extent"), std::logic_error);

    // A param may take a symbol's value (then it names no buffer), or a dim of a buffer.
    kir::Kernel symbol = ok;
    symbol.params = {"?past"};
    symbol.param_sources = {kir::ParamSource::of_symbol("past")};
    symbol.extent = kir::param(0);
    CHECK_NOTHROW(kir::verify(symbol));
    CHECK(kir::print(symbol).find("param p0 ?past = ?past\n") != std::string::npos);
    symbol.param_sources[0].buffer = 1;
    CHECK_THROWS_WITH_AS(kir::verify(symbol), doctest::Contains("the param source ?past also names buffer 1 dim -1"), std::logic_error);
    kir::Kernel bad_source = ok;
    bad_source.params = {"in2.d0"};
    bad_source.param_sources = {{2, 0}};
    CHECK_THROWS_WITH_AS(kir::verify(bad_source), doctest::Contains("a param source names buffer 2 dim 0"), std::logic_error);
}

TEST_CASE("kir: uses_var finds a loop variable at any depth, and only that one") {
    namespace k = kiln::kir;
    const k::ExprRef idx = k::binary(k::BinaryOp::add, k::binary(k::BinaryOp::mul, k::var(0), k::param(1)), k::var(2));
    CHECK(k::uses_var(idx, 0));
    CHECK(k::uses_var(idx, 2));
    CHECK_FALSE(k::uses_var(idx, 1));  // param 1 is not loop variable 1
    CHECK(k::uses_var(k::load(3, k::Type::f32, idx), 2));
    CHECK_FALSE(k::uses_var(k::outer(), 0));
    CHECK_FALSE(k::uses_var(nullptr, 0));
}
