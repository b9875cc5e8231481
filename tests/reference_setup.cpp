// Test helpers of the reference (see reference.h) that need no test framework: tolerances,
// value comparisons, engine options, the shared tier-0 engine, inputs. Linked by kiln_tests
// and by the fuzz targets (tests/fuzz/); the doctest helpers are in reference_check.cpp.
#include "reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ref {

Tol tol_for(DType dt, double scale) {
    switch (dt) {
    case DType::f64: return {1e-12 * scale, 1e-12 * scale};
    case DType::f32: return {1e-5 * scale, 1e-5 * scale};
    case DType::f16: return {2e-3 * scale, 2e-3 * scale};
    case DType::bf16: return {2e-2 * scale, 2e-2 * scale};
    default: return {0.0, 0.0};
    }
}

bool same_values(const kiln::Tensor& a, const kiln::Tensor& b, double tol) {
    if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
    auto x = a.to_doubles(), y = b.to_doubles();
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (std::isnan(x[i]) && std::isnan(y[i])) continue;
        if (x[i] == y[i]) continue;
        if (!(std::fabs(x[i] - y[i]) <= tol * std::max(1.0, std::fabs(y[i])))) return false;
    }
    return true;
}

double max_rel_diff(const kiln::Tensor& a, const kiln::Tensor& b) {
    if (a.shape() != b.shape() || a.dtype() != b.dtype()) return INFINITY;
    auto x = a.to_doubles(), y = b.to_doubles();
    double m = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (std::isnan(x[i]) && std::isnan(y[i])) continue;
        if (std::isinf(x[i]) || std::isinf(y[i])) {
            if (x[i] != y[i]) return INFINITY;
            continue;
        }
        m = std::max(m, std::fabs(x[i] - y[i]) / (1.0 + std::fabs(y[i])));
    }
    return m;
}

kiln::Options jit_options(std::int64_t tier1_threshold, std::int64_t tier2_threshold, bool async) {
    kiln::Options o;
    o.jit = true;
    o.tier1_threshold = tier1_threshold;
    o.tier2_threshold = tier2_threshold;
    o.async_compile = async;
    o.tierup = "count";  // the thresholds alone decide: counts in tests are exact
    return o;
}

kiln::Options tier2_options() { return jit_options(kNever, 2); }

kiln::Options tier1_options() { return jit_options(1, kNever); }

kiln::Options interp_options() {
    kiln::Options o;
    o.jit = false;
    o.async_compile = false;
    return o;
}

kiln::Engine& interp_engine() {
    static kiln::Engine engine(interp_options());
    return engine;
}

std::vector<kiln::Tensor> run_graph(const kiln::Graph& g, const std::vector<kiln::Tensor>& inputs) {
    kiln::Function f = interp_engine().load(g);
    return f(inputs);
}

kiln::ArgSpec arg_like(const std::string& name, const kiln::Tensor& t) {
    std::vector<kiln::Dim> dims;
    for (auto d : t.shape()) dims.emplace_back(d);
    return kiln::arg(name, t.dtype(), dims);
}

kiln::Tensor random_input(const Shape& shape, std::uint64_t seed, DType dt, double lo, double hi) {
    if (kiln::is_floating(dt)) return kiln::Tensor::rand(shape, seed, dt, lo, hi);
    if (dt == DType::boolean) return kiln::Tensor::rand(shape, seed, dt, 0, 2);
    if (dt == DType::u8 && lo < 0) {
        hi = hi - lo;
        lo = 0;
    }
    return kiln::Tensor::rand(shape, seed, dt, lo, hi);
}

const std::vector<DType>& float_dtypes() {
    static const std::vector<DType> v{DType::f32, DType::f64, DType::f16, DType::bf16};
    return v;
}
const std::vector<DType>& int_dtypes() {
    static const std::vector<DType> v{DType::i8, DType::u8, DType::i32, DType::i64};
    return v;
}
const std::vector<DType>& all_dtypes() {
    static const std::vector<DType> v{DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8,
                                      DType::u8,  DType::i32, DType::i64, DType::boolean};
    return v;
}

Shape random_shape(std::mt19937_64& rng, int rank, const std::vector<std::int64_t>& sizes) {
    Shape s;
    for (int i = 0; i < rank; ++i) s.push_back(sizes[rng() % sizes.size()]);
    return s;
}

}  // namespace ref
