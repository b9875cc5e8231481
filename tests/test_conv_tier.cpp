// Conv groups (a conv2d with its fused epilogue) lowered to an implicit GEMM: the naive KIR
// loop nest (kir::evaluate) and the LLVM tier's blocked GEMM with im2col packing, both
// against the interpreter, over strides, padding, dilation, groups, bias, odd sizes,
// several output-pixel blocks, f32 and f64, epilogues (bias, relu, per-channel scale and
// shift, residual), changing shapes (specialised and generic versions), every vector width,
// and an empty padded input plane (run on the interpreter, never read by compiled code).
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "have_tier.h"
#include "reference.h"
#include "src/ir/ir.h"
#include "src/kir/eval.h"
#include "jit/exec/pipeline.h"
#include "src/passes/fuse.h"

#if defined(KILN_HAVE_LLVM)
#include "tiers/llvm/llvm_tier.h"
#endif

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace kiln;

namespace {

struct ConvCase {
    DType dt = DType::f32;
    std::int64_t n = 1, c = 3, h = 9, w = 9, o = 4, kh = 3, kw = 3;
    Pair stride{1, 1}, pad{0, 0}, dil{1, 1};
    std::int64_t groups = 1;
    bool bias = true;
    int epi = 0;  // 0 none, 1 relu, 2 per-channel scale/shift + relu, 3 residual + tanh
};

std::string describe(const ConvCase& c) {
    return ref::dname(c.dt) + " x[" + std::to_string(c.n) + "," + std::to_string(c.c) + "," + std::to_string(c.h) + "," +
           std::to_string(c.w) + "] w[" + std::to_string(c.o) + "," + std::to_string(c.c / c.groups) + "," +
           std::to_string(c.kh) + "," + std::to_string(c.kw) + "] stride " + std::to_string(c.stride[0]) + "x" +
           std::to_string(c.stride[1]) + " pad " + std::to_string(c.pad[0]) + "x" + std::to_string(c.pad[1]) + " dil " +
           std::to_string(c.dil[0]) + "x" + std::to_string(c.dil[1]) + " groups " + std::to_string(c.groups) +
           " bias " + std::to_string(c.bias) + " epi " + std::to_string(c.epi);
}

std::int64_t out_size(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

// The graph of case c; x's dims are `xdims` (static or symbolic); the weight, bias and
// epilogue constants are fixed tensors; a residual is a second input.
Graph make_graph(const ConvCase& c, std::vector<Dim> xdims) {
    Tensor W = Tensor::randn({c.o, c.c / c.groups, c.kh, c.kw}, 21, c.dt);
    Tensor B = Tensor::randn({c.o}, 22, c.dt);
    Tensor scale = Tensor::randn({c.o, 1, 1}, 23, c.dt), shift = Tensor::randn({c.o, 1, 1}, 24, c.dt);
    std::vector<ArgSpec> args{arg("x", c.dt, xdims)};
    if (c.epi == 3) {
        const bool fixed = xdims[2].is_static() && xdims[3].is_static();
        std::vector<Dim> rd{xdims[0], c.o, fixed ? Dim(out_size(c.h, c.kh, c.stride[0], c.pad[0], c.dil[0])) : dyn("OH"),
                            fixed ? Dim(out_size(c.w, c.kw, c.stride[1], c.pad[1], c.dil[1])) : dyn("OW")};
        args.push_back(arg("r", c.dt, rd));
    }
    return trace("conv", args, [&](const std::vector<Var>& in) -> std::vector<Var> {
        Var y = conv2d(in[0], W, c.bias ? Var(B) : Var(), c.stride, c.pad, c.dil, c.groups);
        switch (c.epi) {
        case 1: return {relu(y)};
        case 2: return {relu(y * scale + shift)};
        case 3: return {tanh(y) + in[1]};
        default: return {y};
        }
    });
}

std::vector<Tensor> make_inputs(const ConvCase& c, std::uint64_t seed) {
    std::vector<Tensor> in{Tensor::randn({c.n, c.c, c.h, c.w}, seed, c.dt)};
    if (c.epi == 3)
        in.push_back(Tensor::randn({c.n, c.o, out_size(c.h, c.kh, c.stride[0], c.pad[0], c.dil[0]),
                                    out_size(c.w, c.kw, c.stride[1], c.pad[1], c.dil[1])},
                                   seed + 1, c.dt));
    return in;
}

double tol(const ConvCase& c) {
    // f16/bf16: the interpreter rounds after each epilogue op, the fused epilogue once.
    if (c.dt == DType::f16) return 2e-2;
    if (c.dt == DType::bf16) return 1e-1;
    const double eps = c.dt == DType::f32 ? 1.2e-7 : 2.3e-16;
    return 32.0 * eps * std::sqrt(static_cast<double>(std::max<std::int64_t>(1, c.c / c.groups * c.kh * c.kw)));
}

std::vector<ConvCase> cases() {
    std::vector<ConvCase> v;
    auto add = [&](auto f) {
        ConvCase c;
        f(c);
        v.push_back(c);
    };
    add([](ConvCase&) {});
    add([](ConvCase& c) { c.pad = {1, 1}; c.epi = 1; });
    add([](ConvCase& c) { c.stride = {2, 2}; c.pad = {1, 1}; c.h = 11; c.w = 8; c.epi = 2; });
    add([](ConvCase& c) { c.dil = {2, 1}; c.pad = {2, 0}; c.kh = 3; c.kw = 2; c.bias = false; });
    add([](ConvCase& c) { c.c = 8; c.o = 6; c.groups = 2; c.pad = {1, 1}; c.epi = 3; });
    add([](ConvCase& c) { c.c = 4; c.o = 4; c.groups = 4; c.pad = {1, 1}; c.n = 2; c.epi = 1; });  // depthwise
    add([](ConvCase& c) { c.kh = 1; c.kw = 1; c.h = 7; c.w = 5; c.o = 13; c.c = 17; c.dt = DType::f64; });
    add([](ConvCase& c) { c.h = 40; c.w = 33; c.pad = {1, 1}; c.o = 20; c.n = 2; c.epi = 2; });  // several pixel blocks
    add([](ConvCase& c) { c.h = 5; c.w = 6; c.kh = 5; c.kw = 1; c.pad = {3, 2}; c.stride = {3, 1}; c.dt = DType::f64; c.epi = 3; });
    add([](ConvCase& c) { c.o = 150; c.c = 2; c.h = 6; c.w = 6; c.pad = {1, 1}; });  // two row blocks
    add([](ConvCase& c) { c.c = 70; c.o = 9; c.h = 6; c.w = 7; c.pad = {1, 1}; c.epi = 1; });  // k = 630: depth blocks
    add([](ConvCase& c) { c.h = 3; c.w = 3; c.pad = {4, 4}; c.stride = {2, 3}; c.dil = {2, 2}; });  // mostly padding
    return v;
}

}  // namespace

TEST_CASE("conv tier: fusion keeps the epilogue with the conv") {
    ConvCase c;
    c.epi = 2;
    Graph g = make_graph(c, {1, 3, 9, 9});
    passes::Partition p = passes::partition(*g.impl());
    REQUIRE(p.groups.size() == 1);
    CHECK(p.groups[0].kind == passes::GroupKind::conv);
    CHECK(p.groups[0].nodes.size() == 4);  // conv2d, mul, add, relu: nothing materialised between them
}

TEST_CASE("conv tier: the lowered naive loop nest (kir::evaluate) matches the interpreter") {
    for (const ConvCase& c : cases()) {
        CAPTURE(describe(c));
        Graph g = make_graph(c, {c.n, c.c, c.h, c.w});
        const ir::Graph& ig = *g.impl();
        const auto plan = jit::lower_function(g.impl());
        REQUIRE(plan->groups.size() == 1);
        const passes::Partition& p = plan->partition;
        const auto& k = plan->groups[0]->kernel;
        REQUIRE_MESSAGE(k.has_value(), plan->groups[0]->lower_failure);
        REQUIRE(k->matmul.has_value());
        REQUIRE(k->matmul->im2col.has_value());
        CHECK_NOTHROW(kir::verify(*k));
        INFO(kir::print(*k));
        const std::vector<Tensor> in = make_inputs(c, 7);
        const Tensor want = ref::run_graph(g, in)[0];
        Tensor out = Tensor::empty(want.shape(), want.dtype());
        std::vector<void*> bufs;
        for (auto v : p.groups[0].inputs) {
            const auto& nd = ig.nodes[static_cast<std::size_t>(v)];
            if (nd.op == ir::Op::input) bufs.push_back(in[v == ig.inputs[0] ? 0 : 1].data());
            else bufs.push_back(const_cast<void*>(nd.value.data()));
        }
        bufs.push_back(out.data());
        std::vector<std::int64_t> params;  // every dim is static here
        CHECK(k->params.empty());
        const std::int64_t extent = kir::eval_index(k->extent, params.data());
        kir::evaluate(*k, bufs.data(), params.data(), 0, extent / 2);
        kir::evaluate(*k, bufs.data(), params.data(), extent / 2, extent);
        CHECK(ref::max_rel_diff(out, want) < tol(c));
    }
}

#if defined(KILN_HAVE_LLVM)

TEST_CASE("conv tier: static shapes compiled at tier 2 match the interpreter (f32/f64 cases, and every f32 case in f16 and bf16)") {
    std::vector<ConvCase> all = cases();
    for (DType dt : {DType::f16, DType::bf16})
        for (ConvCase c : cases())
            if (c.dt == DType::f32) {
                c.dt = dt;
                all.push_back(c);
            }
    for (const ConvCase& c : all) {
        CAPTURE(describe(c));
        Graph g = make_graph(c, {c.n, c.c, c.h, c.w});
        Function fj = Engine(ref::tier2_options()).load(g), fi = Engine(ref::interp_options()).load(g);
        for (std::uint64_t seed : {1, 2, 3, 4}) {
            const std::vector<Tensor> in = make_inputs(c, seed);
            CHECK(ref::max_rel_diff(fj(in)[0], fi(in)[0]) < tol(c));
        }
        ref::check_tier2(fj.stats(), "conv");
    }
}

TEST_CASE("conv tier: symbolic batch and image size, specialised then generic, random shapes (seeded)") {
    const std::uint64_t seed = std::random_device{}();
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
    for (int round = 0; round < 3; ++round) {
        ConvCase c;
        c.dt = round == 1 ? DType::f64 : DType::f32;
        c.c = pick(1, 6);
        c.groups = round == 2 ? c.c : 1;
        c.o = c.groups * pick(1, 9);
        c.kh = pick(1, 3);
        c.kw = pick(1, 3);
        c.pad = {pick(0, 2), pick(0, 2)};
        c.stride = {pick(1, 2), pick(1, 2)};
        c.dil = {pick(1, 2), 1};
        c.epi = static_cast<int>(pick(0, 3));
        Graph g = make_graph(c, {dyn("N"), c.c, dyn("H"), dyn("W")});
        Function fj = Engine(ref::tier2_options()).load(g), fi = Engine(ref::interp_options()).load(g);
        // The same shape repeated (a specialisation), then a new shape on every call (the
        // specialisation limit, then the generic version).
        for (int call = 0; call < 24; ++call) {
            if (call < 4 || call >= 6) {
                c.n = pick(1, 3);
                c.h = pick(c.dil[0] * (c.kh - 1) + 1, 20);
                c.w = pick(c.dil[1] * (c.kw - 1) + 1, 40);
            }
            CAPTURE(describe(c));
            const std::vector<Tensor> in = make_inputs(c, static_cast<std::uint64_t>(call));
            CHECK(ref::max_rel_diff(fj(in)[0], fi(in)[0]) < tol(c));
        }
        ref::check_tier2(fj.stats(), "conv");
    }
}

TEST_CASE("conv tier: every micro-kernel width") {
    for (int bytes : {16, 32, 64}) {
        CAPTURE(bytes);
        tiers::set_llvm_gemm_vector_bytes(bytes);
        for (const ConvCase& c : cases()) {
            CAPTURE(describe(c));
            Graph g = make_graph(c, {c.n, c.c, c.h, c.w});
            Function fj = Engine(ref::tier2_options()).load(g), fi = Engine(ref::interp_options()).load(g);
            const std::vector<Tensor> in = make_inputs(c, 5);
            for (int i = 0; i < 3; ++i) CHECK(ref::max_rel_diff(fj(in)[0], fi(in)[0]) < tol(c));
            CHECK(ref::group_of_kind(fj.stats(), "conv").compiled_calls > 0);
        }
    }
    tiers::set_llvm_gemm_vector_bytes(0);
}

TEST_CASE("conv tier: a padded conv of an empty input plane runs without reading it") {
    // 1x1 kernel, padding 1: an input of height 0 still has a 2-row output (bias only).
    ConvCase c;
    c.kh = c.kw = 1;
    c.pad = {1, 1};
    c.epi = 1;
    Graph g = make_graph(c, {dyn("N"), c.c, dyn("H"), dyn("W")});
    Function fj = Engine(ref::tier2_options()).load(g), fi = Engine(ref::interp_options()).load(g);
    for (auto [h, w] : std::vector<std::array<std::int64_t, 2>>{{4, 4}, {4, 4}, {4, 4}, {0, 3}, {0, 3}, {3, 0}, {0, 0}, {4, 4}}) {
        c.h = h;
        c.w = w;
        CAPTURE(describe(c));
        const std::vector<Tensor> in = make_inputs(c, 3);
        CHECK(ref::max_rel_diff(fj(in)[0], fi(in)[0]) < tol(c));
    }
    const FunctionStats s = fj.stats();
    INFO(s.to_json());
    const GroupStats gs = ref::group_of_kind(s, "conv");
    CHECK(gs.compiled_calls == 2);  // the 4x4 calls after the tier-2 compile (on the second call)
    CHECK(s.calls_by_tier[0] == 6);  // the empty planes ran on the interpreter, as every zero-size group does
    CHECK(s.compile_failures == 0);
}

#else
// The tier-2 cases need the LLVM tier's test hooks: in a build without it, one case stands for them.
TEST_CASE("conv tier: tier-2 cases skipped") { kiln::test::lacks_tier(2); }
#endif
