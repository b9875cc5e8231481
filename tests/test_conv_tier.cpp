// Conv groups (a conv2d with its fused epilogue) lowered to an implicit GEMM: the naive KIR
// loop nest (kir::evaluate) and the LLVM tier's blocked GEMM with im2col packing, both
// against the interpreter, over strides, padding, dilation, groups, bias, odd sizes,
// several output-pixel blocks, f32 and f64, epilogues (bias, relu, per-channel scale and
// shift, residual), changing shapes (specialised and generic versions), every vector width,
// and an empty padded input plane (run on the interpreter, never read by compiled code).
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "have_tier.h"
#include "lowered.h"
#include "conv_cases.h"
#include "reference.h"
#include "src/ir/ir.h"
#include "src/kir/eval.h"
#include "jit/exec/pipeline.h"
#include "src/passes/fuse.h"
#include "src/cpu/gemm.h"
#include "src/cpu/winograd.h"

#if defined(KILN_HAVE_LLVM)
#include "tiers/llvm/llvm_tier.h"
#endif

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace kiln;
using namespace kiln::test::conv_cases;

#if defined(KILN_HAVE_LLVM)
// Whether tier 2's code for k with vectors of `bytes` (0: the host's) reads its derived buffers.
static bool tier2_reads_derived(const kir::Kernel& k, int bytes) {
    auto tier = tiers::make_llvm_tier();
    tiers::set_llvm_gemm_vector_bytes(bytes);
    auto code = tier->compile(k, {});
    tiers::set_llvm_gemm_vector_bytes(0);
    REQUIRE(code.kernel);
    return code.kernel->reads_derived();
}
#endif

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
    // The evaluator walks the nest's expression trees per multiply-add: cases of more than
    // kMaxMacs (whose nests are those of smaller cases with other bounds) are left to the
    // compiled tiers' tests, which run every case, so that this test stays well inside the
    // per-test limit under AddressSanitizer.
    constexpr std::int64_t kMaxMacs = 1'500'000;
    int skipped = 0;
    for (const ConvCase& c : cases()) {
        const std::int64_t oh = out_size(c.h, c.kh, c.stride[0], c.pad[0], c.dil[0]);
        const std::int64_t ow = out_size(c.w, c.kw, c.stride[1], c.pad[1], c.dil[1]);
        if (c.n * c.o * (c.c / c.groups) * c.kh * c.kw * oh * ow > kMaxMacs) {
            ++skipped;
            continue;
        }
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
    MESSAGE(skipped << " of " << cases().size() << " cases over " << kMaxMacs << " multiply-adds left to the compiled tiers");
    CHECK(skipped * 4 < static_cast<int>(cases().size()));
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
        ConvCase c = random_case(pick, round);
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

TEST_CASE("conv tier: constant weights of small images are packed (kir::Derived), and only code that reads them asks for them") {
    // A 3x3 of 40 -> 64 channels at 7 x 7: two tiles of 32 channels, each transposed.
    ConvCase c;
    c.c = 40;
    c.o = 64;
    c.h = c.w = 7;
    c.pad = {1, 1};
    Graph g = make_graph(c, {c.n, c.c, c.h, c.w});
    const test::Lowered low = test::lower_one_group(g);
    const kir::Kernel& k = *low.kernel;
    REQUIRE(k.derived.size() == 1);
    const kir::Derived& d = k.derived[0];
    CHECK(k.matmul->a_packed == 0);
    CHECK(d.source == k.matmul->a);
    CHECK(d.groups == 1);
    CHECK(d.rows == 64);
    CHECK(d.cols == 40 * 9);
    CHECK(d.lanes == 32);
    // The layout, against the weights element by element.
    const Tensor& w = low.constant(g, d.source);
    REQUIRE(w.numel() == d.rows * d.cols);
    std::vector<float> packed(static_cast<std::size_t>(d.elems()), -1.0f);
    kir::fill_derived(d, DType::f32, w.data(), packed.data());
    const auto* wp = static_cast<const float*>(w.data());
    int wrong = 0;
    for (std::int64_t r = 0; r < d.rows; ++r)
        for (std::int64_t col = 0; col < d.cols; ++col)
            wrong += packed[static_cast<std::size_t>(((r / 32) * d.cols + col) * 32 + r % 32)] != wp[r * d.cols + col];
    CHECK(wrong == 0);
    // A large image: no copy for channel lanes (a 3x3 of stride 1 there has its Winograd
    // transform instead; see the next case).
    ConvCase big = c;
    big.h = big.w = 40;
    big.stride = {2, 2};
    CHECK(jit::lower_function(make_graph(big, {1, 40, 40, 40}).impl())->groups[0]->kernel->derived.empty());
    ConvCase few = c;
    few.o = 16;
    CHECK(jit::lower_function(make_graph(few, {1, 40, 7, 7}).impl())->groups[0]->kernel->derived.empty());
#if defined(KILN_HAVE_LLVM)
    // The LLVM tier's channel lanes read the copy with 512-bit vectors (512 -> 112 at 7 x 7:
    // runs of 7 pixels across output rows); at 256 bits a dense 1x1 conv runs the packed GEMM
    // on its image instead, and reads the weights as they are.
    ConvCase dense = c;
    dense.c = 512;
    dense.o = 112;
    dense.kh = dense.kw = 1;
    dense.pad = {0, 0};
    Graph dg = make_graph(dense, {1, 512, 7, 7});
    const test::Lowered dlow = test::lower_one_group(dg);
    REQUIRE(dlow.kernel->derived.size() == 1);
    if (cpu::kernel_cpu_isa() == cpu::CpuIsa::avx512) CHECK(tier2_reads_derived(k, 0));
    if (cpu::kernel_cpu_isa() != cpu::CpuIsa::portable) {
        CHECK_FALSE(tier2_reads_derived(k, 32));
        CHECK(tier2_reads_derived(*dlow.kernel, 64));
        CHECK_FALSE(tier2_reads_derived(*dlow.kernel, 32));
        CHECK_FALSE(tier2_reads_derived(*dlow.kernel, 16));
        // A depth in blocks (the classifier's shape, smaller) runs on the channel lanes at 512 bits.
        ConvCase deep = dense;
        deep.c = 520;
        deep.o = 80;
        deep.h = deep.w = 13;
        Graph deepg = make_graph(deep, {1, 520, 13, 13});
        const test::Lowered deeplow = test::lower_one_group(deepg);
        CHECK(tier2_reads_derived(*deeplow.kernel, 64));
        CHECK_FALSE(tier2_reads_derived(*deeplow.kernel, 32));
    } else {
        MESSAGE("skipped the channel-lane check: the kernels' instruction set is portable");
    }
#endif
}

TEST_CASE("conv tier: 3x3 convs of stride 1 carry their weights' Winograd transform, which tier 2 reads from 256 bits on") {
    ConvCase c;
    c.c = 20;
    c.o = 48;
    c.h = 16;
    c.w = 18;
    c.pad = {1, 1};
    c.epi = 1;
    Graph g = make_graph(c, {c.n, c.c, c.h, c.w});
    const test::Lowered low = test::lower_one_group(g);
    const kir::Kernel& k = *low.kernel;
    if (!cpu::winograd_allowed()) {
        // KILN_WINOGRAD=0 (the ctest entry winograd_off): the direct sums, no transform.
        CHECK(k.matmul->winograd < 0);
        for (const kir::Derived& od : k.derived) CHECK_FALSE(od.winograd);
        return;
    }
    REQUIRE(k.derived.size() == 1);
    const kir::Derived& d = k.derived[0];
    CHECK(d.winograd);
    CHECK(k.matmul->winograd == 0);
    CHECK(k.matmul->a_packed < 0);
    CHECK(d.source == k.matmul->a);
    CHECK(d.rows == 48);
    CHECK(d.cols == 20 * 9);
    CHECK(d.lanes == cpu::kWinoLanes);
    CHECK(d.elems() == cpu::winograd_weight_elems(48, 20));
    // Blocks of whole tiles of channels and whole bands of 4 output rows (of 18 pixels).
    CHECK((k.matmul->row_block % cpu::kWinoLanes == 0 || k.matmul->row_block >= 48));
    CHECK(k.matmul->col_block % (4 * 18) == 0);
    // The layout is src/cpu's transform of the weights.
    const Tensor& w = low.constant(g, d.source);
    std::vector<float> got(static_cast<std::size_t>(d.elems()), -1.0f), want(got.size(), -2.0f);
    kir::fill_derived(d, DType::f32, w.data(), got.data());
    cpu::winograd_weights(static_cast<const float*>(w.data()), 48, 20, want.data());
    CHECK(got == want);
    // Not for a stride of 2, few input channels or a small output.
    for (int which = 0; which < 3; ++which) {
        ConvCase other = c;
        if (which == 0) other.stride = {2, 2};
        if (which == 1) other.c = 8;
        if (which == 2) other.h = 11;  // 11 output rows
        CAPTURE(describe(other));
        const auto lowered = jit::lower_function(make_graph(other, {1, other.c, other.h, other.w}).impl());
        const kir::Kernel& ko = *lowered->groups[0]->kernel;
        CHECK(ko.matmul->winograd < 0);
        for (const kir::Derived& od : ko.derived) CHECK_FALSE(od.winograd);
    }
#if defined(KILN_HAVE_LLVM)
    if (cpu::kernel_cpu_isa() != cpu::CpuIsa::portable) {
        CHECK(tier2_reads_derived(k, 32));
        if (cpu::kernel_cpu_isa() == cpu::CpuIsa::avx512) CHECK(tier2_reads_derived(k, 64));
        CHECK_FALSE(tier2_reads_derived(k, 16));  // 128-bit code: no Winograd kernel of that width
    } else {
        MESSAGE("skipped the LLVM tier's Winograd check: the kernels' instruction set has no Winograd kernel");
    }
#endif
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
