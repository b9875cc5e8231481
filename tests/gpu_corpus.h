#pragma once
// The kernels the GPU source printer is tested on (tests/test_gpu_source.cpp,
// tests/test_gpu_hiprtc.cpp): every lowered group of the differential corpus's graphs
// (tests/random_graphs.h, the seeds test_differential.cpp runs), printed without a
// specialisation and with every param bound to its size at the graph's first call; the
// hand-built kernels of tests/tier_kernels.h; one kernel that uses every op in every type; and
// the groups of the benchmarks' MLP and transformer block at several shapes; and 3x3 convs.
// Compiling them is the runtime compiler's job (compile_all): in parallel, each source once.
#include <doctest/doctest.h>

#include "../bench/workloads.h"
#include "random_graphs.h"
#include "tier_kernels.h"

#include "jit/exec/pipeline.h"
#include "jit/exec/run_plan.h"
#include "jit/exec/shape_plan.h"
#include "src/kir/kir.h"
#include "tiers/gpu/gpu_source.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace kiln::gpu_test {

namespace gpu = tiers::gpu;

struct Family {
    const char* name;
    test::diff::Case (*make)(std::uint64_t seed);
    std::uint64_t first_seed;
    int graphs;
};
// The families and seeds of tests/test_differential.cpp.
inline const std::vector<Family>& families() {
    namespace diff = test::diff;
    static const std::vector<Family> f = {
        {"elementwise", diff::elementwise_case, 1000, 96}, {"integer", diff::integer_case, 2000, 96},
        {"view", diff::view_case, 3000, 96},               {"reduction", diff::reduction_case, 4000, 96},
        {"norm", diff::norm_case, 5000, 96},               {"matmul", diff::matmul_case, 6000, 64},
        {"conv", diff::conv_case, 7000, 64},
    };
    return f;
}

struct Item {
    std::string what;  // family, seed, group, and whether specialised
    kir::Kernel kernel;
    kir::Specialization spec;
};

// The groups of a traced model, generic (at the first call) and specialised at each of
// `calls` (the shapes of its inputs at one call; a kernel without params only generic).
inline std::vector<Item> model_kernels(const std::string& name, const Graph& g, const std::vector<std::vector<Shape>>& calls) {
    std::vector<Item> out;
    const auto plan = jit::lower_function(g.impl());
    for (const std::vector<Shape>& shapes : calls) {
        const auto sp = jit::make_shape_plan(*plan, shapes, "gpu corpus");
        for (const auto& gr : plan->groups) {
            if (!gr->kernel) continue;
            const kir::Kernel& k = *gr->kernel;
            std::vector<std::int64_t> params;
            jit::group_params(k, gr->group, *sp, params);
            kir::Specialization spec;
            spec.params.assign(params.begin(), params.end());
            const std::string what = name + " " + shape_to_string(shapes.front()) + " group " + gr->group.name;
            if (&shapes == &calls.front()) out.push_back({what, k, {}});
            if (!k.params.empty()) out.push_back({what + " (specialised)", k, spec});
        }
    }
    return out;
}

// Every lowered kernel of the family's graphs, each without and with a specialisation at
// the graph's first call.
inline std::vector<Item> family_kernels(const Family& f) {
    std::vector<Item> out;
    for (std::uint64_t seed : test::diff::seeds(f.first_seed, f.graphs)) {
        const test::diff::Case c = f.make(seed);
        std::vector<Shape> shapes;
        for (const Tensor& t : c.calls.at(0)) shapes.push_back(t.shape());
        for (Item& it : model_kernels(std::string(f.name) + " seed " + std::to_string(seed), c.graph, {shapes}))
            out.push_back(std::move(it));
    }
    return out;
}

#define X(n) kir::BinaryOp::n,
inline constexpr kir::BinaryOp kBinaryOps[] = {KIR_BINARY_OPS(X)};
#undef X

// One kernel that uses every op of KIR in every type it applies to, every cast, and loads
// and stores of every dtype: x<d> and y<d> are inputs of dtype d, o<d> an output of dtype d;
// o<d>[outer * 64 + j] is the j-th result of type d.
inline kir::Kernel every_op_kernel() {
    using namespace kir;
    const std::vector<DType> dts = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8,
                                    DType::u8,  DType::i32, DType::i64, DType::boolean};
    Kernel k;
    k.name = "every op";
    const int n = static_cast<int>(dts.size());
    for (DType d : dts) k.buffers.push_back({"x", d, false});
    for (DType d : dts) k.buffers.push_back({"y", d, false});
    for (DType d : dts) k.buffers.push_back({"o", d, true});
    k.params = {"n"};
    k.param_sources = {{0, 0}};
    k.extent = param(0);
    std::vector<int> slot(dts.size(), 0);
    auto put = [&](std::size_t di, ExprRef v) {
        const ExprRef idx = binary(BinaryOp::add, binary(BinaryOp::mul, outer(), index_const(64)), index_const(slot[di]++));
        k.body.push_back(store(2 * n + static_cast<int>(di), idx, std::move(v)));
    };
    for (std::size_t di = 0; di < dts.size(); ++di) {
        const Type t = compute_type(dts[di]);
        const ExprRef x = load(static_cast<int>(di), t, outer()), y = load(n + static_cast<int>(di), t, outer());
        const bool fl = is_float(t), in = !fl && t != Type::boolean;
        for (UnaryOp op : tier_test::kUnaryOps) {
            const bool ok = fl ? op != UnaryOp::logical_not
                               : in ? (op == UnaryOp::neg || op == UnaryOp::abs || op == UnaryOp::relu || op == UnaryOp::sign)
                                    : op == UnaryOp::logical_not;
            if (ok) put(di, unary(op, x));
        }
        for (BinaryOp op : kBinaryOps) {
            const bool logical = op == BinaryOp::logical_and || op == BinaryOp::logical_or;
            if (t == Type::boolean ? !(logical || is_comparison(op)) : logical || (in && op == BinaryOp::pow)) continue;
            put(di, cast(t, binary(op, x, y)));
        }
        put(di, select(binary(BinaryOp::lt, x, y), x, y));
        for (std::size_t from = 0; from < dts.size(); ++from)
            put(di, cast(t, load(static_cast<int>(from), compute_type(dts[from]), outer())));
    }
    // Index arithmetic of params, and constants that are not finite.
    const ExprRef p = param(0);
    k.body.push_back(store(2 * n + 7, binary(BinaryOp::div, outer(), binary(BinaryOp::max, p, index_const(1))),
                           cast(Type::i64, binary(BinaryOp::min, binary(BinaryOp::div, p, binary(BinaryOp::sub, p, outer())), p))));
    constexpr double inf = std::numeric_limits<double>::infinity();
    for (double v : {inf, -inf, std::numeric_limits<double>::quiet_NaN(), -0.0, 1e-45, 3.4e38})
        for (std::size_t di : {std::size_t{0}, std::size_t{1}}) put(di, constant(compute_type(dts[di]), v));
    return k;
}

// The hand-built kernels of the CPU tiers' tests, and every_op_kernel.
inline std::vector<Item> hand_kernels() {
    std::vector<Item> out;
    out.push_back({"every op", every_op_kernel(), {}});
    for (DType d : {DType::f32, DType::f16, DType::bf16}) out.push_back({"softmax", tier_test::softmax_kernel(d), {}});
    out.push_back({"row max", tier_test::row_extreme_kernel(true, -std::numeric_limits<double>::infinity()), {}});
    out.push_back({"map", tier_test::map_kernel(DType::f16, DType::bf16, [](kir::ExprRef x) { return kir::unary(kir::UnaryOp::gelu_tanh, x); }), {}});
    for (Item& i : out) {
        if (!i.kernel.extent) i.kernel.extent = kir::index_const(16);  // the CPU tests pass the range instead
        if (!i.kernel.params.empty()) i.spec.params.assign(i.kernel.params.size(), std::int64_t{37});
    }
    return out;
}

struct Compiled {
    bool ok = false;
    std::string error;
};
// Compiles each distinct source once, on up to `threads` threads (0: a few); results in the
// order of `sources`.
inline std::vector<Compiled> compile_all(const std::vector<std::string>& sources,
                                         const std::function<Compiled(const std::string&)>& compile, unsigned threads = 0) {
    std::map<std::string, std::size_t> first;
    std::vector<std::size_t> unique;
    for (std::size_t i = 0; i < sources.size(); ++i)
        if (first.emplace(sources[i], i).second) unique.push_back(i);
    std::vector<Compiled> res(sources.size());
    std::atomic<std::size_t> next{0};
    const unsigned n = threads ? threads : std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
    std::vector<std::thread> workers;
    for (unsigned w = 0; w < n; ++w)
        workers.emplace_back([&] {
            for (std::size_t j; (j = next.fetch_add(1)) < unique.size();) res[unique[j]] = compile(sources[unique[j]]);
        });
    for (std::thread& t : workers) t.join();
    for (std::size_t i = 0; i < sources.size(); ++i) res[i] = res[first[sources[i]]];
    return res;
}


// The MLP and the transformer block of bench/workloads.h at shapes from one row to many
// (the specialised matmuls of 128 rows and more take tiles; the norms, one row per 32 lanes).
inline std::vector<Item> model_kernels() {
    const kiln_bench::Mlp mlp = kiln_bench::make_mlp();
    const kiln_bench::Transformer tb = kiln_bench::make_transformer();
    std::vector<Item> items = model_kernels("mlp", mlp.graph, {{{1, 784}}, {{32, 784}}, {{256, 784}}, {{4096, 784}}});
    for (auto& it : model_kernels("transformer_block", tb.graph, {{{1, 1, 256}}, {{1, 128, 256}}, {{1, 512, 256}}}))
        items.push_back(std::move(it));
    return items;
}

// The conv groups of x [N, 32, H, W] * w (3x3, padded, with bias and relu): plain, grouped,
// strided and dilated; generic and specialised on N = 2, H = W = 16.
inline std::vector<Item> conv_kernels() {
    struct Form {
        const char* name;
        std::int64_t groups, stride, dilation;
    };
    std::vector<Item> items;
    for (const Form& f : {Form{"plain", 1, 1, 1}, Form{"grouped", 4, 1, 1}, Form{"strided", 1, 2, 1}, Form{"dilated", 1, 1, 2}}) {
        Graph g = trace("conv", {arg("x", DType::f32, {dyn("N"), 32, dyn("H"), dyn("W")}), arg("w", DType::f32, {64, 32 / f.groups, 3, 3}), arg("b", DType::f32, {64})},
                        [&f](const std::vector<Var>& in) -> Var {
                            return relu(conv2d(in[0], in[1], in[2], {f.stride, f.stride}, {f.dilation, f.dilation}, {f.dilation, f.dilation}, f.groups));
                        });
        for (auto& it : model_kernels(std::string("conv ") + f.name, g, {{{2, 32, 16, 16}, {64, 32 / f.groups, 3, 3}, {64}}}))
            if (it.kernel.matmul && it.kernel.matmul->im2col) items.push_back(std::move(it));
    }
    return items;
}

// One test case per family of the differential corpus (each takes a few seconds per hundred
// kernels), named `title` and the family, each calling the including file's
// compile_items(name, items).
#define KILN_GPU_FAMILY_CASE(title, i, family)                                            \
    TEST_CASE(title #family) {                                                            \
        const ::kiln::gpu_test::Family& f = ::kiln::gpu_test::families().at(i);           \
        REQUIRE(std::string(f.name) == #family);                                          \
        compile_items(f.name, ::kiln::gpu_test::family_kernels(f));                       \
    }
#define KILN_GPU_FAMILY_CASES(title)                                                      \
    KILN_GPU_FAMILY_CASE(title, 0, elementwise)                                           \
    KILN_GPU_FAMILY_CASE(title, 1, integer)                                               \
    KILN_GPU_FAMILY_CASE(title, 2, view)                                                  \
    KILN_GPU_FAMILY_CASE(title, 3, reduction)                                             \
    KILN_GPU_FAMILY_CASE(title, 4, norm)                                                  \
    KILN_GPU_FAMILY_CASE(title, 5, matmul)                                                \
    KILN_GPU_FAMILY_CASE(title, 6, conv)

// Prints every item in `dialect`; each must print.
inline std::vector<std::string> print_all(const std::vector<Item>& items, gpu::Dialect dialect) {
    std::vector<std::string> sources;
    for (const Item& it : items) {
        const gpu::GpuSource s = gpu::print_source(it.kernel, it.spec, dialect);
        CHECK_MESSAGE(s.ok, it.what << ": " << s.why << "\n" << kir::print(it.kernel));
        sources.push_back(s.code);
    }
    return sources;
}

// Compiles the items' `sources` (print_all) for `target` with `compile`; each must compile
// (a failure shows the kernel IR and the source). Says how many did.
inline void check_compiled(const std::string& what, const std::string& target, const std::vector<Item>& items,
                           const std::vector<std::string>& sources,
                           const std::function<Compiled(const std::string&)>& compile) {
    const std::vector<Compiled> res = compile_all(sources, compile);
    int ok = 0;
    for (std::size_t i = 0; i < items.size(); ++i) {
        ok += res[i].ok ? 1 : 0;
        CHECK_MESSAGE(res[i].ok, items[i].what << " does not compile for " << target << ":\n"
                                               << res[i].error << "\n--- kernel IR\n" << kir::print(items[i].kernel)
                                               << "--- source\n" << sources[i]);
    }
    MESSAGE(what << ": " << ok << " of " << items.size() << " kernels compiled for " << target);
}

}  // namespace kiln::gpu_test
