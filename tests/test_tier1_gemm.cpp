// Tier 1's matmul and conv kernels (tiers/asmjit/matmul.h: the host's GEMM plus the group's
// epilogue as asmjit code) through kiln::Engine, against the interpreter: 2-D, batched with
// broadcast batch dims, 1-D operands, odd sizes, several row / column / depth blocks, f32
// and f64, every epilogue, shapes that change on every call (one generic kernel serves
// them all), every GEMM instruction set, one and two threads, convolutions of every kind
// (strided, padded, dilated, grouped, depthwise, 1x1), a kernel without scratch memory,
// and the f16 operands tier 1 leaves to the other tiers.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "conv_cases.h"
#include "have_tier.h"
#include "matmul_cases.h"
#include "reference.h"

#if defined(KILN_HAVE_ASMJIT)
#include "tiers/asmjit/asmjit_tier.h"
#endif
#include "tiers/tier.h"

#include <array>
#include <new>
#include <random>
#include <string>
#include <vector>

using namespace kiln;
namespace mc = kiln::test::matmul_cases;
namespace cc = kiln::test::conv_cases;

#if defined(KILN_HAVE_ASMJIT)

namespace {

// A tier-1 function: compiles after the first call, never tier 2.
Function tier1(const Graph& g, std::int64_t threads = 1) {
    Options o = ref::tier1_options();
    o.num_threads = threads;
    return Engine(o).load(g);
}

// Each conv case at static shapes, compiled at tier 1 with every GEMM instruction set (the
// portable kernels, AVX2, AVX-512: capped to what the host runs; two threads with the
// widest), against the interpreter on inputs from `seed`.
void check_every_isa(const std::vector<cc::ConvCase>& cases, std::uint64_t seed) {
    for (int bytes : {0, 32, 64}) {
        CAPTURE(bytes);
        tiers::set_asmjit_vector_bytes(bytes);
        for (const cc::ConvCase& c : cases) {
            CAPTURE(cc::describe(c));
            Graph g = cc::make_graph(c, {c.n, c.c, c.h, c.w});
            Function fj = tier1(g, 1 + bytes / 64), fi = Engine(ref::interp_options()).load(g);
            const std::vector<Tensor> in = cc::make_inputs(c, seed);
            for (int i = 0; i < 2; ++i) CHECK(ref::max_rel_diff(fj(in)[0], fi(in)[0]) < cc::tol(c));
            ref::check_tier(fj.stats(), "conv", 1);
        }
    }
    tiers::set_asmjit_vector_bytes(-1);
}

}  // namespace

TEST_CASE("tier 1 matmul: 2-D matmul + epilogues at odd sizes, f32 and f64, one kernel for every M") {
    if (test::lacks_tier(1)) return;
    const std::vector<std::int64_t> sizes{1, 3, 7, 17, 33, 65, 129};
    const mc::Epi epis[] = {mc::Epi::bias_relu, mc::Epi::bias_gelu, mc::Epi::residual, mc::Epi::none, mc::Epi::gelu_tanh_scale};
    int n = 0;
    for (DType dt : {DType::f32, DType::f64}) {
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            const std::int64_t K = sizes[(i + 2) % sizes.size()], N = sizes[(i + 4) % sizes.size()];
            const mc::Epi epi = epis[static_cast<std::size_t>(n++) % 5];
            const bool runtime_b = n % 3 == 0;
            CAPTURE(ref::dname(dt));
            CAPTURE(K);
            CAPTURE(N);
            CAPTURE(static_cast<int>(epi));
            Graph g = mc::make_graph(dt, {dyn("M"), K}, K, N, epi, runtime_b);
            Function fj = tier1(g), fi = Engine(ref::interp_options()).load(g);
            for (std::int64_t M : {sizes[i], sizes[(i + 1) % sizes.size()], std::int64_t{129}, std::int64_t{2}, std::int64_t{200}}) {
                CAPTURE(M);
                std::vector<Tensor> in{Tensor::randn({M, K}, 100 + static_cast<std::uint64_t>(M), dt)};
                if (runtime_b) in.push_back(Tensor::randn({K, N}, 200, dt));
                if (epi == mc::Epi::residual) in.push_back(Tensor::randn({M, N}, 300, dt));
                mc::compare(fj, fi, in, 2, mc::tol(dt, K));
            }
            const FunctionStats s = fj.stats();
            ref::check_tier(s, "matmul", 1);
            CHECK(ref::group_of_kind(s, "matmul").versions == 1);  // generic: every M on one kernel
        }
    }
}

TEST_CASE("tier 1 matmul: batched with broadcast batch dims, zero-size batch, 1-D operands") {
    if (test::lacks_tier(1)) return;
    for (DType dt : {DType::f32, DType::f64}) {
        CAPTURE(ref::dname(dt));
        Graph g = trace("bmm", {arg("x", dt, {dyn("B"), 1, dyn("M"), 7}), arg("w", dt, {3, 7, dyn("N")}),
                                arg("r", dt, {dyn("B"), 3, dyn("M"), dyn("N")})},
                        [](const std::vector<Var>& in) -> std::vector<Var> { return {relu(matmul(in[0], in[1]) + in[2])}; });
        Function fj = tier1(g), fi = Engine(ref::interp_options()).load(g);
        for (auto [B, M, N] : std::vector<std::array<std::int64_t, 3>>{{2, 5, 17}, {2, 5, 17}, {1, 50, 33}, {0, 3, 4}, {3, 1, 1}, {2, 100, 600}}) {
            CAPTURE(B);
            CAPTURE(M);
            CAPTURE(N);
            mc::compare(fj, fi, {Tensor::randn({B, 1, M, 7}, 1, dt), Tensor::randn({3, 7, N}, 2, dt), Tensor::randn({B, 3, M, N}, 3, dt)},
                        2, mc::tol(dt, 7));
        }
        ref::check_tier(fj.stats(), "matmul", 1);

        Graph gv = trace("vec", {arg("v", dt, {dyn("K")}), arg("m", dt, {dyn("K"), dyn("N")}), arg("x", dt, {2, dyn("M"), dyn("K")})},
                         [](const std::vector<Var>& in) -> std::vector<Var> {
                             return {sigmoid(matmul(in[0], in[1])), matmul(in[2], in[0]) + 1.0};
                         });
        Function fvj = tier1(gv), fvi = Engine(ref::interp_options()).load(gv);
        for (auto [K, N, M] : std::vector<std::array<std::int64_t, 3>>{{17, 33, 5}, {17, 33, 5}, {300, 3, 50}, {1, 1, 1}}) {
            std::vector<Tensor> in{Tensor::randn({K}, 1, dt), Tensor::randn({K, N}, 2, dt), Tensor::randn({2, M, K}, 3, dt)};
            const auto want = fvi(in);
            const auto got = fvj(in);
            CHECK(ref::max_rel_diff(got[0], want[0]) < mc::tol(dt, K));
            CHECK(ref::max_rel_diff(got[1], want[1]) < mc::tol(dt, K));
        }
        int compiled = 0;
        for (const auto& gr : fvj.stats().groups) compiled += gr.kind == "matmul" && gr.tier == 1 && gr.compiled_calls > 0;
        CHECK(compiled == 2);
    }
}

TEST_CASE("tier 1 matmul: every GEMM instruction set, large K and N, two threads, random shapes (seeded)") {
    if (test::lacks_tier(1)) return;
    const std::uint64_t seed = std::random_device{}();
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
    for (int bytes : {0, 32, 64}) {  // portable kernels, AVX2, AVX-512 (capped to what the host runs)
        CAPTURE(bytes);
        tiers::set_asmjit_vector_bytes(bytes);
        for (DType dt : {DType::f32, DType::f64}) {
            CAPTURE(ref::dname(dt));
            Graph g = mc::make_graph(dt, {dyn("M"), dyn("K")}, 300, 37, mc::Epi::none, true, {dyn("K"), dyn("N")});
            for (std::int64_t threads : {1, 2}) {
                Function fj = tier1(g, threads), fi = Engine(ref::interp_options()).load(g);
                for (int call = 0; call < 5; ++call) {
                    // The first call crosses the GEMM's depth block (256) and a chunk of
                    // columns (1024); the sizes stay small enough for ThreadSanitizer builds.
                    const std::int64_t M = call == 0 ? 37 : pick(1, 160), K = call == 0 ? 300 : pick(1, 300),
                                       N = call == 0 ? 1100 : pick(1, 300);
                    CAPTURE(M);
                    CAPTURE(K);
                    CAPTURE(N);
                    mc::compare(fj, fi, {Tensor::randn({M, K}, 1, dt), Tensor::randn({K, N}, 2, dt)}, 1, mc::tol(dt, K));
                }
                ref::check_tier(fj.stats(), "matmul", 1);
            }
        }
    }
    tiers::set_asmjit_vector_bytes(-1);
}

TEST_CASE("tier 1 matmul: a GEMM that gets no scratch memory raises std::bad_alloc, and later calls are right") {
    if (test::lacks_tier(1)) return;
    Graph g = mc::make_graph(DType::f32, {dyn("M"), 600}, 600, 300, mc::Epi::bias_relu, false);
    Function fj = tier1(g), fi = Engine(ref::interp_options()).load(g);
    Tensor x = Tensor::randn({97, 600}, 8);
    mc::compare(fj, fi, {x}, 2, mc::tol(DType::f32, 600));
    REQUIRE(ref::group_of_kind(fj.stats(), "matmul").compiled_calls > 0);
    tiers::set_kernel_scratch_limit(0);
    CHECK_THROWS_AS(fj({x}), std::bad_alloc);
    tiers::set_kernel_scratch_limit(-1);
    const auto before = ref::group_of_kind(fj.stats(), "matmul").compiled_calls;
    mc::compare(fj, fi, {x}, 2, mc::tol(DType::f32, 600));
    CHECK(ref::group_of_kind(fj.stats(), "matmul").compiled_calls >= before + 2);
}

TEST_CASE("tier 1 matmul: f16 operands stay below tier 1 (a counted bail-out) and are still right") {
    if (test::lacks_tier(1)) return;
    Graph g = mc::make_graph(DType::f16, {dyn("M"), 33}, 33, 17, mc::Epi::bias_relu, false);
    Function fj = tier1(g), fi = Engine(ref::interp_options()).load(g);
    for (std::int64_t M : {5, 5, 9}) mc::compare(fj, fi, {Tensor::randn({M, 33}, 4, DType::f16)}, 1, 2e-2);
    const FunctionStats s = fj.stats();
    INFO(s.to_json());
    CHECK(ref::group_of_kind(s, "matmul").tier == 0);
    CHECK(s.compile_failures >= 1);
}

TEST_CASE("tier 1 conv: every case at static shapes and every GEMM instruction set") {
    if (test::lacks_tier(1)) return;
    std::vector<cc::ConvCase> cases;
    for (const cc::ConvCase& c : cc::cases())
        if (c.dt == DType::f32 || c.dt == DType::f64) cases.push_back(c);
    check_every_isa(cases, 5);
}

TEST_CASE("tier 1 conv: depthwise convolutions on the direct row kernels (strides 1 to 3, multipliers, any filter)") {
    if (test::lacks_tier(1)) return;
    std::vector<cc::ConvCase> cases;
    auto add = [&](auto f) {
        cc::ConvCase c;
        c.c = 6;
        c.o = 6;
        c.groups = 6;
        c.h = 23;
        c.w = 37;
        f(c);
        cases.push_back(c);
    };
    add([](cc::ConvCase& c) { c.pad = {1, 1}; c.epi = 1; });                                   // 3x3, stride 1
    add([](cc::ConvCase& c) { c.pad = {1, 1}; c.stride = {2, 2}; c.epi = 2; });                // 3x3, stride 2
    add([](cc::ConvCase& c) { c.kh = 5; c.kw = 5; c.pad = {2, 2}; c.dt = DType::f64; });        // 5x5
    add([](cc::ConvCase& c) { c.kh = 3; c.kw = 2; c.stride = {3, 3}; c.dil = {2, 1}; });       // stride 3: scalar rows
    add([](cc::ConvCase& c) { c.o = 12; c.pad = {0, 1}; c.stride = {1, 2}; c.epi = 3; });      // multiplier 2
    add([](cc::ConvCase& c) { c.h = 40; c.w = 45; c.pad = {1, 1}; c.n = 2; c.bias = false; });  // several pixel blocks
    check_every_isa(cases, 9);
}

TEST_CASE("tier 1 conv: symbolic batch and image size, a new shape on every call (seeded)") {
    if (test::lacks_tier(1)) return;
    const std::uint64_t seed = std::random_device{}();
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
    for (int round = 0; round < 4; ++round) {
        cc::ConvCase c = cc::random_case(pick, round);
        Graph g = cc::make_graph(c, {dyn("N"), c.c, dyn("H"), dyn("W")});
        Function fj = tier1(g, round == 3 ? 2 : 1), fi = Engine(ref::interp_options()).load(g);
        for (int call = 0; call < 10; ++call) {
            c.n = pick(1, 3);
            c.h = pick(c.dil[0] * (c.kh - 1) + 1, 40);
            c.w = pick(c.dil[1] * (c.kw - 1) + 1, 40);
            CAPTURE(cc::describe(c));
            const std::vector<Tensor> in = cc::make_inputs(c, static_cast<std::uint64_t>(call));
            CHECK(ref::max_rel_diff(fj(in)[0], fi(in)[0]) < cc::tol(c));
        }
        const FunctionStats s = fj.stats();
        ref::check_tier(s, "conv", 1);
        CHECK(ref::group_of_kind(s, "conv").versions == 1);
    }
}

#else

TEST_CASE("tier 1 matmul and conv: skipped") { test::lacks_tier(1); }

#endif
