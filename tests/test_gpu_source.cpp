// The GPU tier's source printer (tiers/gpu/gpu_source.h) and NVRTC loader (tiers/gpu/nvrtc.h),
// on a machine without a GPU: the printed source is deterministic and prints what the
// specialisation binds as literals; every kernel of the differential corpus, of the CPU tiers'
// tests and one that uses every op (tests/gpu_corpus.h) prints and compiles with NVRTC for
// sm_80 and sm_90 (skipped with the reason when NVRTC is not installed). What the kernels
// compute is checked on a GPU, not here. nvrtc_api.def's declarations are checked against the
// toolkit's nvrtc.h at build time where it is installed (tests/CMakeLists.txt).
#include <doctest/doctest.h>

#include "gpu_corpus.h"
#include "skip.h"
#include "tiers/gpu/nvrtc.h"
#include "tiers/gpu/print_p.h"

#include <cstdint>
#include <string>
#include <vector>

using namespace kiln;
namespace gpu = kiln::tiers::gpu;

namespace {

// out[outer] = in[outer * stride] * 2 with extent param 0 and stride param 1.
kir::Kernel strided_kernel() {
    using namespace kir;
    Kernel k;
    k.name = "strided/copy";
    k.buffers = {{"x", DType::f32, false}, {"y", DType::f32, true}};
    k.params = {"n", "stride"};
    k.param_sources = {{1, 0}, {0, 0}};
    k.extent = param(0);
    k.body = {store(1, outer(), binary(BinaryOp::mul, load(0, Type::f32, binary(BinaryOp::mul, outer(), param(1))), constant(Type::f32, 2.0)))};
    return k;
}

std::size_t count(const std::string& s, const std::string& what) {
    std::size_t n = 0;
    for (std::size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
    return n;
}

// Prints every item and compiles it for sm_80 and sm_90; says how many compiled.
void compile_items(const std::string& what, const std::vector<gpu_test::Item>& items) {
    const gpu::NvrtcStatus& st = gpu::nvrtc_status();
    if (!st.available) {
        test::skip("NVRTC is not available: " + st.why);
        return;
    }
    const std::vector<std::string> sources = gpu_test::print_all(items, gpu::Dialect::cuda);
    for (int arch : {80, 90}) {
        if (std::find(st.archs.begin(), st.archs.end(), arch) == st.archs.end()) {
            test::skip("NVRTC " + std::to_string(st.major) + "." + std::to_string(st.minor) + " does not target sm_" + std::to_string(arch));
            continue;
        }
        gpu_test::check_compiled(what, "sm_" + std::to_string(arch) + " (NVRTC " + std::to_string(st.major) + "." +
                                           std::to_string(st.minor) + ")",
                                 items, sources, [arch](const std::string& src) {
                                     const gpu::NvrtcOutput o = gpu::nvrtc_compile(src, "kiln.cu", arch);
                                     return gpu_test::Compiled{o.ok && !o.binary.empty(), o.error};
                                 });
    }
}

}  // namespace

TEST_CASE("gpu source: the same kernel prints the same bytes; names and dialects") {
    const kir::Kernel k = strided_kernel();
    const gpu::GpuSource a = gpu::print_source(k, {}, gpu::Dialect::cuda), b = gpu::print_source(k, {}, gpu::Dialect::cuda);
    REQUIRE(a.ok);
    CHECK(a.code == b.code);
    CHECK(a.entry == b.entry);
    CHECK(a.entry.rfind("kiln_strided_copy_", 0) == 0);
    CHECK(a.code.find("extern \"C\" __global__ void __launch_bounds__(256) " + a.entry + "(KilnArgs a)") != std::string::npos);
    CHECK(a.code.find("struct KilnArgs { void* buf[2]; long long param[2]; long long work; };") != std::string::npos);
    CHECK(a.num_buffers == 2);
    CHECK(a.num_params == 2);
    CHECK(a.block == 256);
    CHECK(gpu::args_bytes(a.num_buffers, a.num_params) == 40);
    const gpu::GpuSource h = gpu::print_source(k, {}, gpu::Dialect::hip);
    REQUIRE(h.ok);
    CHECK(h.entry != a.entry);  // the dialect is part of the name: both may sit in one cache
    // Another kernel gets another entry.
    kir::Kernel k2 = k;
    k2.body = {kir::store(1, kir::outer(), kir::load(0, kir::Type::f32, kir::outer()))};
    CHECK(gpu::print_source(k2, {}, gpu::Dialect::cuda).entry != a.entry);
}

TEST_CASE("gpu source: elementwise kernels take the vector form, others do not") {
    using namespace kir;
    // y = x * w + x over f32 buffers at the outer index: 128-bit loads of x and w, stores of y.
    Kernel k;
    k.name = "axpy";
    k.buffers = {{"x", DType::f32, false}, {"w", DType::f32, false}, {"y", DType::f32, true}};
    k.params = {"n"};
    k.param_sources = {{0, 0}};
    k.extent = param(0);
    const ExprRef x = load(0, Type::f32, outer());
    k.body = {store(2, outer(), binary(BinaryOp::add, binary(BinaryOp::mul, x, load(1, Type::f32, outer())), x))};
    const gpu::GpuSource v = gpu::print_source(k, {}, gpu::Dialect::cuda);
    REQUIRE(v.ok);
    CHECK(v.per_thread == 4);
    CHECK(count(v.code, "((const float4*)b0)[q]") == 1);
    CHECK(count(v.code, "((const float4*)b1)[q]") == 1);
    CHECK(count(v.code, "((float4*)b2)[q] = vs2;") == 1);
    CHECK(count(v.code, "vs2.w = ") == 1);
    // The alignment of every vector buffer is checked when the kernel runs.
    CHECK(v.code.find("((unsigned long long)b0 | (unsigned long long)b1 | (unsigned long long)b2) & 15ULL") != std::string::npos);
    CHECK(gpu::print_source(k, {}, gpu::Dialect::hip).per_thread == 4);

    // w read at another index (a broadcast): x and y stay vectors, w is read per item.
    Kernel b = k;
    b.body = {store(2, outer(), binary(BinaryOp::mul, x, load(1, Type::f32, index_const(0))))};
    const gpu::GpuSource bs = gpu::print_source(b, {}, gpu::Dialect::cuda);
    REQUIRE(bs.ok);
    CHECK(bs.per_thread == 4);
    CHECK(count(bs.code, "float4*)b1") == 0);
    CHECK(count(bs.code, "b1[0LL]") == 5);

    // f16 buffers are not vectorised; a kernel touching only those prints one item a thread.
    Kernel h = k;
    for (auto& buf : h.buffers) buf.dtype = DType::f16;
    CHECK(gpu::print_source(h, {}, gpu::Dialect::cuda).per_thread == 1);

    // A loop in the body, or a temporary read before it is assigned: one item a thread.
    Kernel l = k;
    l.num_vars = 1;
    l.body = {loop(0, index_const(0), index_const(3), {store(2, outer(), x)})};
    CHECK(gpu::print_source(l, {}, gpu::Dialect::cuda).per_thread == 1);
    Kernel t = k;
    t.temps = {Type::f32};
    t.body = {store(2, outer(), temp(0, Type::f32)), assign(0, x)};
    CHECK(gpu::print_source(t, {}, gpu::Dialect::cuda).per_thread == 1);
    // A buffer also stored at another index is stored per item; the others stay vectors.
    Kernel sc = k;
    sc.body = {store(2, outer(), x), store(2, index_const(0), x)};
    const gpu::GpuSource ss = gpu::print_source(sc, {}, gpu::Dialect::cuda);
    REQUIRE(ss.ok);
    CHECK(ss.per_thread == 4);
    CHECK(count(ss.code, "float4*)b2") == 0);
    CHECK(count(ss.code, "((const float4*)b0)[q]") == 1);
    compile_items("vector forms", {{"axpy", k, {}}, {"broadcast", b, {}}, {"scatter", sc, {}}});
}

TEST_CASE("gpu source: a bound param prints as a literal, an unbound one from the arguments") {
    const kir::Kernel k = strided_kernel();
    const gpu::GpuSource free = gpu::print_source(k, {}, gpu::Dialect::cuda);
    REQUIRE(free.ok);
    // Read in each of the five copies of the body: the vector form's four lanes (its store
    // is at the outer index) and the one-item loop.
    CHECK(free.per_thread == 4);
    CHECK(count(free.code, "a.param[1]") == 5);
    kir::Specialization s;
    s.params = {std::nullopt, std::int64_t{12345}};
    const gpu::GpuSource bound = gpu::print_source(k, s, gpu::Dialect::cuda);
    REQUIRE(bound.ok);
    CHECK(bound.code.find("a.param[1]") == std::string::npos);
    CHECK(bound.code.find("12345LL") != std::string::npos);
    CHECK(bound.num_params == 2);  // the ABI keeps every param, bound or not
    CHECK(bound.entry != free.entry);
}

TEST_CASE("gpu source: work is the extent (generic form), batch * m * n (matmul by element) or 256 per tile of C (128 rows or more known)") {
    const kir::Kernel k = strided_kernel();
    const gpu::GpuSource s = gpu::print_source(k, {}, gpu::Dialect::cuda);
    REQUIRE(s.ok);
    const std::int64_t params[] = {77, 3};
    CHECK(kir::eval_index(s.work, params) == 77);

    // A batched matmul [B, 130, 7] x [7, 3] + bias with a dynamic batch.
    Graph g = trace("mm", {arg("x", DType::f32, {dyn("B"), 130, 7}), arg("w", DType::f32, {7, 3}), arg("b", DType::f32, {3})},
                    [](const std::vector<Var>& in) -> Var { return relu(matmul(in[0], in[1]) + in[2]); });
    const auto plan = jit::lower_function(g.impl());
    int matmuls = 0;
    for (const auto& gr : plan->groups) {
        if (!gr->kernel || !gr->kernel->matmul) continue;
        ++matmuls;
        const kir::Kernel& mk = *gr->kernel;
        REQUIRE(mk.params.size() == 1);  // B
        const std::int64_t b[] = {4};
        // The batch folds into the rows (one product of B * 130 rows): the generic kernel does
        // not know them, so it takes the element form; a kernel specialised on B = 4 knows
        // 520 rows and takes tiles (of 32 x 32: too few for tiles of 64).
        const gpu::GpuSource generic = gpu::print_source(mk, {}, gpu::Dialect::cuda);
        REQUIRE_MESSAGE(generic.ok, generic.why);
        CHECK(kir::eval_index(generic.work, b) == 4 * 130 * 3);
        CHECK(generic.code.find("__shared__") == std::string::npos);
        kir::Specialization spec;
        spec.params = {4};
        const gpu::GpuSource ms = gpu::print_source(mk, spec, gpu::Dialect::cuda);
        REQUIRE_MESSAGE(ms.ok, ms.why);
        CHECK(kir::eval_index(ms.work, b) == 17 * 1 * 256);  // ceil(520 / 32) tiles of 32 x 32
        CHECK(ms.code.find("__shared__") != std::string::npos);
        // HIP takes the same forms: the tile's layout is in threads of a block.
        const gpu::GpuSource hs = gpu::print_source(mk, {}, gpu::Dialect::hip);
        REQUIRE_MESSAGE(hs.ok, hs.why);
        CHECK(kir::eval_index(hs.work, b) == 4 * 130 * 3);
        CHECK(hs.code.find("for (long long item = ") != std::string::npos);
        const gpu::GpuSource hms = gpu::print_source(mk, spec, gpu::Dialect::hip);
        REQUIRE_MESSAGE(hms.ok, hms.why);
        CHECK(kir::eval_index(hms.work, b) == 17 * 1 * 256);
        CHECK(hms.code.find("__shared__") != std::string::npos);
    }
    CHECK(matmuls == 1);
}

TEST_CASE("gpu source: row groups take 32 lanes per row in both dialects, with each dialect's shuffles") {
    // softmax then layer_norm over the last axis of [R, 100]: the row groups' passes split
    // across 32 lanes, their sums and maxima combined by an xor butterfly.
    Graph g = trace("rows", {arg("x", DType::f32, {dyn("R"), 100}), arg("w", DType::f32, {100}), arg("b", DType::f32, {100})},
                    [](const std::vector<Var>& in) -> Var { return layer_norm(softmax(in[0], -1), in[1], in[2], 1e-5); });
    const auto plan = jit::lower_function(g.impl());
    int rows = 0;
    for (const auto& gr : plan->groups) {
        if (!gr->kernel || !gr->kernel->extent) continue;
        const kir::Kernel& k = *gr->kernel;
        const gpu::GpuSource c = gpu::print_source(k, {}, gpu::Dialect::cuda);
        const gpu::GpuSource h = gpu::print_source(k, {}, gpu::Dialect::hip);
        REQUIRE_MESSAGE(c.ok, c.why);
        REQUIRE_MESSAGE(h.ok, h.why);
        if (c.code.find("__shfl_xor_sync") == std::string::npos) continue;
        ++rows;
        std::vector<std::int64_t> params(k.params.size(), 7);
        CHECK(kir::eval_index(c.work, params.data()) == 32 * kir::eval_index(k.extent, params.data()));
        CHECK(kir::eval_index(h.work, params.data()) == 32 * kir::eval_index(k.extent, params.data()));
        CHECK(c.code.find("__syncwarp();") != std::string::npos);
        // HIP: shuffles bounded to 32 lanes (a wave64 holds two rows), a fence for __syncwarp.
        CHECK(h.code.find("__shfl_xor_sync") == std::string::npos);
        CHECK(h.code.find("__syncwarp") == std::string::npos);
        CHECK(count(h.code, ", s, 32);") == count(c.code, "__shfl_xor_sync(0xffffffffu, "));
        CHECK(count(h.code, "__threadfence_block();") == count(c.code, "__syncwarp();"));
        CHECK(h.code.find("const int lane = (int)(item & 31);") != std::string::npos);
    }
    CHECK(rows >= 1);  // softmax and layer_norm chain into one row group (or two)
}

TEST_CASE("gpu source: convolutions print as implicit GEMMs: one thread per output element, tiles when known to fill them") {
    const std::vector<gpu_test::Item> items = gpu_test::conv_kernels();
    REQUIRE(items.size() == 8);  // each conv generic, then specialised
    int filled = 0;
    for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
        const gpu_test::Item &generic = items[i], &bound = items[i + 1];
        REQUIRE(generic.spec.params.empty());
        REQUIRE(!bound.spec.params.empty());
        std::vector<std::int64_t> params;
        for (const auto& v : bound.spec.params) params.push_back(v.value_or(0));
        const kir::MatmulHint& h = *generic.kernel.matmul;
        const std::int64_t m = kir::eval_index(h.m, params.data()), n = kir::eval_index(h.n, params.data());
        const std::int64_t batch = kir::eval_index(h.batch, params.data());
        const bool fill = m >= 32 && n >= 128;  // 64 channels (16 a group), 256 pixels (strided: 64)
        filled += fill ? 1 : 0;
        for (gpu::Dialect d : {gpu::Dialect::cuda, gpu::Dialect::hip}) {
            // The pixels unknown: the element form, batch * m * n items.
            const gpu::GpuSource g = gpu::print_source(generic.kernel, generic.spec, d);
            REQUIRE_MESSAGE(g.ok, generic.what << ": " << g.why);
            CHECK(kir::eval_index(g.work, params.data()) == batch * m * n);
            CHECK(g.code.find("__shared__") == std::string::npos);
            // Known: tiles of 32 where they fill.
            const gpu::GpuSource b = gpu::print_source(bound.kernel, bound.spec, d);
            REQUIRE_MESSAGE(b.ok, bound.what << ": " << b.why);
            CHECK_MESSAGE((b.code.find("__shared__") != std::string::npos) == fill, bound.what);
            CHECK(kir::eval_index(b.work, params.data()) == (fill ? batch * ((m + 31) / 32) * ((n + 31) / 32) * 256 : batch * m * n));
        }
    }
    CHECK(filled == 2);  // plain and dilated take tiles; grouped (16 channels) and strided (64 pixels) do not
    compile_items("convolutions", items);
}

TEST_CASE("gpu source: what it cannot express is a reason, never an exception") {
    kir::Kernel k = strided_kernel();
    auto bad = std::make_shared<kir::Stmt>();  // a store of f64 into an f32 buffer
    bad->kind = kir::StmtKind::Store;
    bad->buffer = 1;
    bad->index = kir::outer();
    bad->value = kir::constant(kir::Type::f64, 1.0);
    k.body = {bad};
    gpu::GpuSource s;
    CHECK_NOTHROW(s = gpu::print_source(k, {}, gpu::Dialect::cuda));
    CHECK_FALSE(s.ok);
    CHECK(s.why.find("store of f64") != std::string::npos);
    CHECK(s.code.empty());

    kir::Kernel k2 = strided_kernel();
    k2.body = {kir::store(5, kir::outer(), kir::constant(kir::Type::f32, 1.0))};
    s = gpu::print_source(k2, {}, gpu::Dialect::cuda);
    CHECK_FALSE(s.ok);
    CHECK(s.why.find("buffer out of range") != std::string::npos);
}

TEST_CASE("gpu source: literals are exact in their type") {
    namespace d = gpu::detail;
    using kir::Type;
    CHECK(d::float_literal(Type::f32, 0.1) == "0.100000001f");
    CHECK(d::float_literal(Type::f64, 0.1) == "0.10000000000000001");
    CHECK(d::float_literal(Type::f32, 2.0) == "2.0f");
    CHECK(d::float_literal(Type::f32, -0.0) == "(-0.0f)");
    CHECK(d::float_literal(Type::f32, 1e300) == "__builtin_bit_cast(float, 0x7f800000u)");
    CHECK(d::float_literal(Type::f64, -std::numeric_limits<double>::infinity()) == "__builtin_bit_cast(double, 0xfff0000000000000ull)");
    CHECK(d::int_literal(Type::i64, std::numeric_limits<std::int64_t>::min()) == "(-9223372036854775807LL - 1)");
    CHECK(d::int_literal(Type::i8, 200) == "(signed char)(-56)");
    CHECK(d::int_literal(Type::u8, -1) == "(unsigned char)255");
    CHECK(d::int_literal(Type::boolean, 2) == "true");
}

TEST_CASE("gpu source: every kernel of the corpus prints") {
    std::size_t n = 0;
    for (const gpu_test::Family& f : gpu_test::families())
        for (const gpu_test::Item& it : gpu_test::family_kernels(f)) {
            const gpu::GpuSource s = gpu::print_source(it.kernel, it.spec, gpu::Dialect::cuda);
            CHECK_MESSAGE(s.ok, it.what << ": " << s.why << "\n" << kir::print(it.kernel));
            CHECK(s.work != nullptr);
            ++n;
        }
    MESSAGE(n << " kernels printed");
}

TEST_CASE("gpu source: NVRTC loads, or says why not") {
    const gpu::NvrtcStatus& st = gpu::nvrtc_status();
    if (!st.available) {
        CHECK(!st.why.empty());
        test::skip("NVRTC is not available: " + st.why);
        return;
    }
    CHECK(st.major >= 12);
    CHECK(!st.archs.empty());
    MESSAGE("NVRTC " << st.major << "." << st.minor << " from " << st.library);
    const gpu::NvrtcOutput bad = gpu::nvrtc_compile("extern \"C\" __global__ void k() { undeclared(); }", "bad.cu", 90);
    CHECK_FALSE(bad.ok);
    CHECK(bad.error.find("undeclared") != std::string::npos);
    const gpu::NvrtcOutput ptx = gpu::nvrtc_compile("extern \"C\" __global__ void k(float* x) { x[0] = 1; }", "ptx.cu", 80, true);
    REQUIRE_MESSAGE(ptx.ok, ptx.error);
    CHECK(ptx.binary.find(".entry k") != std::string::npos);
}

TEST_CASE("gpu source: the examples' and benchmarks' models (MLP, transformer block) compile with NVRTC, every matmul form included") {
    const std::vector<gpu_test::Item> items = gpu_test::model_kernels();
    // Products of 128 rows and more print tiled: tiles of 32 where few, of 64 where many.
    int tiles32 = 0, tiles64 = 0;
    for (const auto& it : items) {
        const gpu::GpuSource s = gpu::print_source(it.kernel, it.spec, gpu::Dialect::cuda);
        tiles32 += s.code.find("As[16][32 + 1]") != std::string::npos;
        tiles64 += s.code.find("As[16][64 + 1]") != std::string::npos;
    }
    CHECK(tiles32 > 0);
    CHECK(tiles64 > 0);
    compile_items("models", items);
}

TEST_CASE("gpu source: the hand-built kernels and every op in every type compile with NVRTC") {
    compile_items("hand-built", gpu_test::hand_kernels());
}

KILN_GPU_FAMILY_CASES("gpu source: the differential corpus compiles with NVRTC: ")

TEST_CASE("gpu source: nvrtc_api.def agrees with the toolkit's nvrtc.h") {
#if defined(KILN_CHECKED_API_NVRTC)
    // The static_asserts ran when the tests were built (cmake/KilnApiCheck.cmake); here, the
    // library that loads has every function of the table.
    MESSAGE("nvrtc_api.def was checked against nvrtc.h at build time");
    CHECK(gpu::nvrtc_status().why.find("lacks") == std::string::npos);
#else
    test::skip("nvrtc.h was not found when the build was configured: nvrtc_api.def is unchecked");
#endif
}
