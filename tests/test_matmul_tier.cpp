// Matmul groups (a matmul with its fused epilogue) at tier 2: the naive KIR loop nest
// against the interpreter (kir::evaluate), and the LLVM tier's blocked GEMM through
// kiln::Engine against the interpreter: 2-D and batched (broadcast batch dims), odd sizes,
// zero-size batches, f32 and f64, constant and run-time B, bias / relu / gelu / residual
// epilogues, the same shape repeated and changing shapes. Plus a measured (not asserted)
// GFLOP/s of a 512^3 f32 matmul, tier 2 against the interpreter, one thread.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "have_tier.h"
#include "lowered.h"
#include "matmul_cases.h"
#include "reference.h"
#include "src/ir/ir.h"
#include "src/kir/eval.h"
#include "jit/exec/pipeline.h"
#include "src/passes/fuse.h"

#if defined(KILN_HAVE_LLVM)
#include "tiers/llvm/llvm_tier.h"
#include "tiers/tier.h"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <new>
#include <string>
#include <vector>

using namespace kiln;
using namespace kiln::test::matmul_cases;


TEST_CASE("matmul tier: the lowered naive loop nest (kir::evaluate) matches the interpreter") {
    struct Case {
        DType dt;
        std::vector<std::int64_t> a, b;
        Epi epi;
    };
    const std::vector<Case> cases{
        {DType::f32, {7, 17}, {17, 33}, Epi::bias_relu},  {DType::f64, {1, 3}, {3, 65}, Epi::bias_gelu},
        {DType::f32, {2, 5, 9}, {9, 4}, Epi::none},       {DType::f64, {3, 1, 4, 6}, {2, 6, 5}, Epi::none},
        {DType::f32, {2, 49, 7}, {2, 7, 3}, Epi::bias_relu}, {DType::f32, {5}, {5, 3}, Epi::none},
        {DType::f32, {4, 5}, {5}, Epi::none},             {DType::f64, {2, 3, 5}, {5}, Epi::none},
    };
    for (const Case& c : cases) {
        CAPTURE(ref::shape_str(c.a));
        CAPTURE(ref::shape_str(c.b));
        Tensor bias = Tensor::randn({c.b.size() >= 2 ? c.b.back() : 1}, 5, c.dt);
        std::vector<Dim> ad(c.a.begin(), c.a.end()), bd(c.b.begin(), c.b.end());
        Graph g = trace("mmk", {arg("a", c.dt, ad), arg("b", c.dt, bd)}, [&](const std::vector<Var>& in) -> std::vector<Var> {
            Var m = matmul(in[0], in[1]);
            if (c.epi == Epi::bias_relu) return {relu(m + bias)};
            if (c.epi == Epi::bias_gelu) return {gelu(m + bias)};
            return {m};
        });
        const ir::Graph& ig = *g.impl();
        const auto plan = jit::lower_function(g.impl());
        const passes::Partition& p = plan->partition;
        REQUIRE(p.groups.size() == 1);
        REQUIRE(p.groups[0].kind == passes::GroupKind::matmul);
        const auto& k = plan->groups[0]->kernel;
        REQUIRE_MESSAGE(k.has_value(), plan->groups[0]->lower_failure);
        REQUIRE(k->matmul.has_value());
        CHECK_NOTHROW(kir::verify(*k));
        INFO(kir::print(*k));
        Tensor a = Tensor::randn(c.a, 1, c.dt), b = Tensor::randn(c.b, 2, c.dt);
        Tensor want = ref::interp_engine().load(g)({a, b})[0];
        Tensor out = Tensor::empty(want.shape(), want.dtype());
        std::vector<void*> bufs;
        for (auto v : p.groups[0].inputs) {
            const auto& nd = ig.nodes[static_cast<std::size_t>(v)];
            if (nd.op == ir::Op::input) bufs.push_back(v == ig.inputs[0] ? a.data() : b.data());
            else bufs.push_back(const_cast<void*>(nd.value.data()));
        }
        bufs.push_back(out.data());
        std::vector<std::int64_t> params;
        for (const auto& src : k->param_sources) {
            const auto v = static_cast<std::size_t>(src.buffer) < p.groups[0].inputs.size()
                               ? p.groups[0].inputs[static_cast<std::size_t>(src.buffer)]
                               : p.groups[0].outputs[0];
            const auto& nd = ig.nodes[static_cast<std::size_t>(v)];
            const Tensor& t = nd.op == ir::Op::input ? (v == ig.inputs[0] ? a : b) : want;
            params.push_back(t.dim(src.dim));
        }
        const std::int64_t extent = kir::eval_index(k->extent, params.data());
        kir::evaluate(*k, bufs.data(), params.data(), 0, extent / 2);
        kir::evaluate(*k, bufs.data(), params.data(), extent / 2, extent);
        CHECK(ref::max_rel_diff(out, want) < tol(c.dt, c.a.back()));
    }
}

#if defined(KILN_HAVE_LLVM)


TEST_CASE("matmul tier: 2-D matmul + epilogues at odd sizes, f32 and f64, compiled at tier 2") {
    const std::vector<std::int64_t> sizes{1, 3, 7, 17, 33, 65, 129};
    const Epi epis[] = {Epi::bias_relu, Epi::bias_gelu, Epi::residual, Epi::none, Epi::gelu_tanh_scale};
    int n = 0;
    for (DType dt : {DType::f32, DType::f64}) {
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            const std::int64_t K = sizes[(i + 2) % sizes.size()], N = sizes[(i + 4) % sizes.size()];
            const Epi epi = epis[static_cast<std::size_t>(n++) % 5];
            const bool runtime_b = n % 3 == 0;
            CAPTURE(ref::dname(dt));
            CAPTURE(K);
            CAPTURE(N);
            CAPTURE(static_cast<int>(epi));
            CAPTURE(runtime_b);
            Graph g = make_graph(dt, {dyn("M"), K}, K, N, epi, runtime_b);
            Function fj = Engine(ref::tier2_options()).load(g), fi = Engine(ref::interp_options()).load(g);
            // The same shape several times, then changing shapes (M of every size).
            for (std::int64_t M : {sizes[i], sizes[i], sizes[i], sizes[(i + 1) % sizes.size()], std::int64_t{129}, std::int64_t{2}}) {
                CAPTURE(M);
                std::vector<Tensor> in{Tensor::randn({M, K}, 100 + static_cast<std::uint64_t>(M), dt)};
                if (runtime_b) in.push_back(Tensor::randn({K, N}, 200, dt));
                if (epi == Epi::residual) in.push_back(Tensor::randn({M, N}, 300, dt));
                compare(fj, fi, in, 3, tol(dt, K));
            }
            ref::check_tier2(fj.stats(), "matmul");
        }
    }
}

TEST_CASE("matmul tier: batched matmul with broadcast batch dims, zero-size batch, f32 and f64") {
    for (DType dt : {DType::f32, DType::f64}) {
        CAPTURE(ref::dname(dt));
        // x [B, S, 33] @ W [33, 17] (constant) + bias, gelu.
        {
            Graph g = make_graph(dt, {dyn("B"), dyn("S"), 33}, 33, 17, Epi::bias_gelu, false);
            Function fj = Engine(ref::tier2_options()).load(g), fi = Engine(ref::interp_options()).load(g);
            for (auto [B, S] : std::vector<std::pair<std::int64_t, std::int64_t>>{{2, 7}, {2, 7}, {2, 7}, {3, 65}, {0, 5}, {1, 49}}) {
                CAPTURE(B);
                CAPTURE(S);
                compare(fj, fi, {Tensor::randn({B, S, 33}, 7, dt)}, 3, tol(dt, 33));
            }
            const GroupStats gs = ref::group_of_kind(fj.stats(), "matmul");
            CHECK(gs.tier == 2);
            CHECK(gs.compiled_calls > 0);
        }
        // x [B, 1, M, K] @ w [H, K, N] (run-time, broadcast both ways) + residual [B, H, M, N].
        {
            Graph g = trace("bmm", {arg("x", dt, {dyn("B"), 1, dyn("M"), 7}), arg("w", dt, {3, 7, dyn("N")}),
                                    arg("r", dt, {dyn("B"), 3, dyn("M"), dyn("N")})},
                            [](const std::vector<Var>& in) -> std::vector<Var> { return {relu(matmul(in[0], in[1]) + in[2])}; });
            Function fj = Engine(ref::tier2_options()).load(g), fi = Engine(ref::interp_options()).load(g);
            for (auto [B, M, N] : std::vector<std::array<std::int64_t, 3>>{{2, 5, 17}, {2, 5, 17}, {2, 5, 17}, {1, 50, 33}, {0, 3, 4}, {3, 1, 1}}) {
                CAPTURE(B);
                CAPTURE(M);
                CAPTURE(N);
                compare(fj, fi,
                        {Tensor::randn({B, 1, M, 7}, 1, dt), Tensor::randn({3, 7, N}, 2, dt), Tensor::randn({B, 3, M, N}, 3, dt)}, 3,
                        tol(dt, 7));
            }
            const FunctionStats s = fj.stats();
            INFO(s.to_json());
            const GroupStats gs = ref::group_of_kind(s, "matmul");
            CHECK(gs.tier == 2);
            CHECK(gs.compiled_calls > 0);
        }
    }
}

TEST_CASE("matmul tier: a dim that keeps changing gets a generic version (run-time M, N edge tiles)") {
    for (DType dt : {DType::f32, DType::f64}) {
        CAPTURE(ref::dname(dt));
        Graph g = make_graph(dt, {dyn("M"), 33}, 33, 45, Epi::bias_gelu, false);
        Function fj = Engine(ref::tier2_options()).load(g), fi = Engine(ref::interp_options()).load(g);
        for (std::int64_t M : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 47, 48, 49, 96, 97, 1, 13})
            compare(fj, fi, {Tensor::randn({M, 33}, 9 + static_cast<std::uint64_t>(M), dt)}, 3, tol(dt, 33));
        const FunctionStats s = fj.stats();
        INFO(s.to_json());
        const GroupStats gs = ref::group_of_kind(s, "matmul");
        CHECK(gs.tier == 2);
        CHECK(gs.versions >= 5);  // a specialisation, a generic version once M varies, then more specialisations
        CHECK(gs.compiled_calls >= 17 * 3 - 10);  // late shapes run the generic version at once
        CHECK(s.compile_failures == 0);
    }
}

TEST_CASE("matmul tier: 1-D operands (vector @ matrix, matrix @ vector, batched @ vector) and a bool epilogue") {
    for (DType dt : {DType::f32, DType::f64}) {
        CAPTURE(ref::dname(dt));
        Graph g = trace("vec", {arg("v", dt, {dyn("K")}), arg("m", dt, {dyn("K"), dyn("N")}), arg("x", dt, {2, dyn("M"), dyn("K")})},
                        [](const std::vector<Var>& in) -> std::vector<Var> {
                            return {sigmoid(matmul(in[0], in[1])), matmul(in[2], in[0]) + 1.0, matmul(in[2], in[1]) > 0.0};
                        });
        Function fj = Engine(ref::tier2_options()).load(g), fi = Engine(ref::interp_options()).load(g);
        for (auto [K, N, M] : std::vector<std::array<std::int64_t, 3>>{{17, 33, 5}, {17, 33, 5}, {17, 33, 5}, {300, 3, 50}, {300, 3, 50}, {300, 3, 50}}) {
            CAPTURE(K);
            CAPTURE(N);
            CAPTURE(M);
            std::vector<Tensor> in{Tensor::randn({K}, 1, dt), Tensor::randn({K, N}, 2, dt), Tensor::randn({2, M, K}, 3, dt)};
            const auto want = fi(in);
            const auto got = fj(in);
            CHECK(ref::max_rel_diff(got[0], want[0]) < tol(dt, K));
            CHECK(ref::max_rel_diff(got[1], want[1]) < tol(dt, K));
            // The comparison's result: equal except (rarely) where the product rounds near 0.
            CHECK(got[2].shape() == want[2].shape());
            const auto gb = got[2].to_doubles(), wb = want[2].to_doubles();
            std::size_t differ = 0;
            for (std::size_t i = 0; i < gb.size(); ++i) differ += gb[i] != wb[i];
            CHECK(differ <= gb.size() / 100);
        }
        int compiled = 0;
        for (const auto& gr : fj.stats().groups) compiled += gr.kind == "matmul" && gr.tier == 2 && gr.compiled_calls > 0;
        CHECK(compiled == 3);
    }
}

TEST_CASE("matmul tier: every micro-kernel width (128/256/512-bit tiles), edge tiles and depth blocks") {
    for (int bytes : {16, 32, 64}) {
        CAPTURE(bytes);
        tiers::set_llvm_gemm_vector_bytes(bytes);
        for (DType dt : {DType::f32, DType::f64}) {
            CAPTURE(ref::dname(dt));
            Graph g = make_graph(dt, {dyn("M"), dyn("K")}, 300, 37, Epi::none, true, {dyn("K"), dyn("N")});
            Function fj = Engine(ref::tier2_options()).load(g), fi = Engine(ref::interp_options()).load(g);
            for (auto [M, K, N] : std::vector<std::array<std::int64_t, 3>>{
                     {13, 300, 37}, {13, 300, 37}, {13, 300, 37}, {5, 7, 9}, {5, 7, 9}, {100, 65, 129}, {100, 65, 129}}) {
                CAPTURE(M);
                CAPTURE(K);
                CAPTURE(N);
                compare(fj, fi, {Tensor::randn({M, K}, 1, dt), Tensor::randn({K, N}, 2, dt)}, 2, tol(dt, K));
            }
            CHECK(ref::group_of_kind(fj.stats(), "matmul").compiled_calls > 0);
        }
    }
    tiers::set_llvm_gemm_vector_bytes(0);
}

TEST_CASE("matmul tier: large K (several depth blocks) and large N (several column panels)") {
    for (DType dt : {DType::f32, DType::f64}) {
        CAPTURE(ref::dname(dt));
        // N generic (a run-time B of any width), no epilogue.
        Graph g = make_graph(dt, {dyn("M"), 600}, 600, 300, Epi::none, true, {600, dyn("N")});
        Function fj = Engine(ref::tier2_options()).load(g), fi = Engine(ref::interp_options()).load(g);
        for (auto [M, N] : std::vector<std::pair<std::int64_t, std::int64_t>>{
                 {61, 300}, {61, 300}, {61, 300}, {100, 513}, {7, 1000}, {130, 1}, {3, 257}, {50, 64}}) {
            CAPTURE(M);
            CAPTURE(N);
            compare(fj, fi, {Tensor::randn({M, 600}, 5, dt), Tensor::randn({600, N}, 6, dt)}, 2, tol(dt, 600));
        }
        CHECK(ref::group_of_kind(fj.stats(), "matmul").compiled_calls > 0);
        // K = 600 and N = 300 bound, bias + relu.
        Graph gb = make_graph(dt, {dyn("M"), 600}, 600, 300, Epi::bias_relu, false);
        Function fbj = Engine(ref::tier2_options()).load(gb), fbi = Engine(ref::interp_options()).load(gb);
        for (std::int64_t M : {97, 97, 97, 5, 200})
            compare(fbj, fbi, {Tensor::randn({M, 600}, 8, dt)}, 2, tol(dt, 600));
        CHECK(ref::group_of_kind(fbj.stats(), "matmul").compiled_calls > 0);
    }
}

TEST_CASE("matmul tier: f16 and bf16 operands (widened to f32 on packing, rounded once on store), compiled at tier 2") {
    // The interpreter multiplies in f32 and rounds once, but rounds after each epilogue op
    // too, where the fused epilogue rounds once: a few ulps of the 16-bit type apart.
    for (DType dt : {DType::f16, DType::bf16}) {
        CAPTURE(ref::dname(dt));
        const double tolerance = dt == DType::f16 ? 5e-3 : 4e-2;
        struct Shape2 {
            std::int64_t K, N;
            Epi epi;
            bool runtime_b;
        };
        for (const Shape2& s : {Shape2{600, 300, Epi::bias_relu, false}, Shape2{37, 45, Epi::residual, true},
                                Shape2{19, 70, Epi::bias_gelu, false}, Shape2{300, 5, Epi::none, true}}) {
            CAPTURE(s.K);
            CAPTURE(s.N);
            Graph g = make_graph(dt, {dyn("M"), s.K}, s.K, s.N, s.epi, s.runtime_b);
            Function fj = Engine(ref::tier2_options()).load(g), fi = Engine(ref::interp_options()).load(g);
            for (std::int64_t M : {1, 1, 1, 13, 13, 13, 64}) {  // 1 row, edge tiles, full tiles
                CAPTURE(M);
                std::vector<Tensor> in{Tensor::randn({M, s.K}, 5, dt)};
                if (s.runtime_b) in.push_back(Tensor::randn({s.K, s.N}, 6, dt));
                if (s.epi == Epi::residual) in.push_back(Tensor::randn({M, s.N}, 7, dt));
                compare(fj, fi, in, 1, tolerance);
            }
            ref::check_tier2(fj.stats(), "matmul");
        }
    }
}

TEST_CASE("matmul tier: a constant 2-D B is packed once in panels of 32 columns in slabs of 16 (kir::Derived), which tier 2 reads at every width") {
    // K = 300: two depth blocks; N = 75: two whole panels and one of 11 columns, zero padded.
    const std::int64_t K = 300, N = 75;
    Graph g = make_graph(DType::f32, {dyn("M"), K}, K, N, Epi::bias_relu, false);
    const test::Lowered low = test::lower_one_group(g);
    const kir::Kernel& k = *low.kernel;
    REQUIRE(k.derived.size() == 1);
    const kir::Derived& d = k.derived[0];
    CHECK(k.matmul->b_packed == 0);
    CHECK(k.matmul->a_packed == -1);
    CHECK(d.source == k.matmul->b);
    CHECK(d.transposed);
    CHECK(d.rows == N);
    CHECK(d.cols == K);
    CHECK(d.lanes == 32);
    CHECK(d.sub == 16);
    // The layout, against W element by element (panels of 32 columns, each two slabs of 16
    // columns x K), and the padding columns zero.
    const Tensor& w = low.constant(g, d.source);
    REQUIRE(w.numel() == K * N);
    std::vector<float> packed(static_cast<std::size_t>(d.elems()), -1.0f);
    REQUIRE(packed.size() == static_cast<std::size_t>(3 * 32 * K));
    kir::fill_derived(d, DType::f32, w.data(), packed.data());
    const auto* wp = static_cast<const float*>(w.data());
    int wrong = 0;
    for (std::int64_t n = 0; n < 96; ++n)
        for (std::int64_t kk = 0; kk < K; ++kk)
            wrong += packed[static_cast<std::size_t>(((n / 16) * K + kk) * 16 + n % 16)] != (n < N ? wp[kk * N + n] : 0.0f);
    CHECK(wrong == 0);
    // f64, and a run-time B: no copy.
    CHECK(jit::lower_function(make_graph(DType::f64, {dyn("M"), K}, K, N, Epi::none, false).impl())->groups[0]->kernel->derived.empty());
    CHECK(jit::lower_function(make_graph(DType::f32, {dyn("M"), K}, K, N, Epi::none, true).impl())->groups[0]->kernel->derived.empty());
    // Tier 2 reads the copy with every vector width, at batch sizes that stream B through the
    // rows kernel (1, 2) and that run register tiles (5 and up), against the interpreter.
    for (int bytes : {16, 32, 64}) {
        CAPTURE(bytes);
        tiers::set_llvm_gemm_vector_bytes(bytes);
        auto tier = tiers::make_llvm_tier();
        auto code = tier->compile(k, {});
        REQUIRE(code.kernel);
        CHECK(code.kernel->reads_derived());
        Function fj = Engine(ref::tier2_options()).load(g), fi = Engine(ref::interp_options()).load(g);
        for (std::int64_t M : {1, 2, 5, 8, 13, 40}) {
            CAPTURE(M);
            compare(fj, fi, {Tensor::randn({M, K}, 40 + static_cast<std::uint64_t>(M))}, 3, tol(DType::f32, K));
        }
        CHECK(ref::group_of_kind(fj.stats(), "matmul").compiled_calls > 0);
    }
    tiers::set_llvm_gemm_vector_bytes(0);
}

TEST_CASE("kir::fill_derived: tiles in slabs (Derived::sub), from a source row-major or transposed") {
    // 2 groups of 11 rows x 3 cols in tiles of 8 rows, slabs of 4: the last tile holds rows
    // 8-10 in its first slab, the rest zero.
    for (bool transposed : {false, true}) {
        CAPTURE(transposed);
        kir::Derived d;
        d.source = 0;
        d.groups = 2;
        d.rows = 11;
        d.cols = 3;
        d.lanes = 8;
        d.sub = 4;
        d.transposed = transposed;
        const std::int64_t tiles = 2;
        std::vector<float> src(static_cast<std::size_t>(d.groups * d.rows * d.cols));
        for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i + 1);
        std::vector<float> got(static_cast<std::size_t>(d.elems()), -1.0f);
        REQUIRE(got.size() == static_cast<std::size_t>(d.groups * tiles * d.lanes * d.cols));
        kir::fill_derived(d, DType::f32, src.data(), got.data());
        int wrong = 0;
        for (std::int64_t g = 0; g < d.groups; ++g)
            for (std::int64_t t = 0; t < tiles; ++t)
                for (std::int64_t r = 0; r < d.lanes; ++r)
                    for (std::int64_t c = 0; c < d.cols; ++c) {
                        const std::int64_t row = t * d.lanes + r;
                        const std::int64_t at = transposed ? (g * d.cols + c) * d.rows + row : (g * d.rows + row) * d.cols + c;
                        const float want = row < d.rows ? src[static_cast<std::size_t>(at)] : 0.0f;
                        const std::int64_t i = (((g * tiles + t) * (d.lanes / d.sub) + r / d.sub) * d.cols + c) * d.sub + r % d.sub;
                        wrong += got[static_cast<std::size_t>(i)] != want;
                    }
        CHECK(wrong == 0);
    }
}

TEST_CASE("matmul tier: a GEMM that gets no scratch memory raises std::bad_alloc, and later calls are right") {
    // K = 600 > KC and N = 300, B a run-time input (packed on every call): the packed panels
    // do not fit the stack buffer, so the kernel asks for the thread's scratch; the hook
    // makes that fail.
    Graph g = make_graph(DType::f32, {dyn("M"), 600}, 600, 300, Epi::bias_relu, true);
    Function fj = Engine(ref::tier2_options()).load(g), fi = Engine(ref::interp_options()).load(g);
    Tensor x = Tensor::randn({97, 600}, 8), w = Tensor::randn({600, 300}, 9);
    compare(fj, fi, {x, w}, 3, tol(DType::f32, 600));
    REQUIRE(ref::group_of_kind(fj.stats(), "matmul").compiled_calls > 0);
    tiers::set_kernel_scratch_limit(0);
    CHECK_THROWS_AS(fj({x, w}), std::bad_alloc);
    tiers::set_kernel_scratch_limit(-1);
    const auto before = ref::group_of_kind(fj.stats(), "matmul").compiled_calls;
    compare(fj, fi, {x, w}, 2, tol(DType::f32, 600));
    CHECK(ref::group_of_kind(fj.stats(), "matmul").compiled_calls >= before + 2);
}

TEST_CASE("matmul tier: blocked GEMM vs naive loops vs interpreter, GFLOP/s of a 512^3 f32 matmul (measured)") {
    const std::int64_t n = 512;
    Tensor W = Tensor::randn({n, n}, 1), x = Tensor::randn({n, n}, 2);
    Graph g = trace("mm512", {arg("x", DType::f32, {dyn("M"), n})},
                    [&](const std::vector<Var>& in) -> std::vector<Var> { return {matmul(in[0], W)}; });
    auto time_of = [&](Function& f, const Tensor& in) {
        for (int r = 0; r < 3; ++r) f({in});  // past the tier-2 threshold
        double best = 1e30;
        for (int r = 0; r < 5; ++r) {
            auto t0 = std::chrono::steady_clock::now();
            f({in});
            best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        return 2.0 * static_cast<double>(in.dim(0) * n * n) / best * 1e-9;
    };
    Options oj = ref::tier2_options(), oi = ref::interp_options();
    oj.num_threads = 1;
    oi.num_threads = 1;
    // Named engines: each holds its thread limit while it lives.
    Engine ei(oi), eb(oj), en(oj);
    Function fi = ei.load(g);
    Function fb = eb.load(g);
    for (int i = 0; i < 3; ++i) fb({x});
    CHECK(ref::group_of_kind(fb.stats(), "matmul").compiled_calls > 0);
    const Tensor want = fi({x})[0];
    CHECK(ref::max_rel_diff(fb({x})[0], want) < tol(DType::f32, n));
    const double gi = time_of(fi, x), gb = time_of(fb, x);
    // Few rows (the MLP at small batch): GEMV-like, bound by reading B.
    for (std::int64_t m : {1, 8, 64}) {
        Tensor xm = Tensor::randn({m, n}, 3);
        CHECK(ref::max_rel_diff(fb({xm})[0], fi({xm})[0]) < tol(DType::f32, n));
        const double a = time_of(fb, xm), b = time_of(fi, xm);
        MESSAGE(m << "x512x512 f32 matmul, 1 thread: tier 2 blocked GEMM " << a << " GFLOP/s, interpreter " << b << " GFLOP/s");
    }
    tiers::set_llvm_blocked_gemm(false);
    Function fn = en.load(g);
    for (int i = 0; i < 3; ++i) fn({x});
    tiers::set_llvm_blocked_gemm(true);
    CHECK(ref::max_rel_diff(fn({x})[0], want) < tol(DType::f32, n));
    const double gn = time_of(fn, x);
    MESSAGE("512x512x512 f32 matmul, 1 thread: tier 2 blocked GEMM " << gb << " GFLOP/s, tier 2 naive KIR loops " << gn
                                                                       << " GFLOP/s, interpreter " << gi << " GFLOP/s ("
                                                                       << gb / gi << "x the interpreter); compile "
                                                                       << fb.stats().compile_ms / static_cast<double>(std::max<std::uint64_t>(1, fb.stats().compiles))
                                                                       << " ms per matmul kernel");
}

#else

// The tier-2 cases need the LLVM tier's test hooks: in a build without it, one case stands for them.
TEST_CASE("matmul tier: tier-2 cases skipped") { kiln::test::lacks_tier(2); }

#endif
