// Test helpers of the reference (see reference.h): tolerances, comparison through doctest,
// the shared tier-0 engine, inputs.
#include "reference.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace ref {

// ---------------------------------------------------------------- test helpers

Tol tol_for(DType dt, double scale) {
    switch (dt) {
    case DType::f64: return {1e-12 * scale, 1e-12 * scale};
    case DType::f32: return {1e-5 * scale, 1e-5 * scale};
    case DType::f16: return {2e-3 * scale, 2e-3 * scale};
    case DType::bf16: return {2e-2 * scale, 2e-2 * scale};
    default: return {0.0, 0.0};
    }
}

bool check_close(const kiln::Tensor& got, const RTensor& want, DType want_dtype, Tol tol, const std::string& what) {
    INFO("checking ", what);
    if (!got.defined()) {
        FAIL_CHECK("output tensor is undefined");
        return false;
    }
    bool ok = true;
    if (got.dtype() != want_dtype) {
        FAIL_CHECK("dtype: got " << dname(got.dtype()) << ", expected " << dname(want_dtype));
        ok = false;
    }
    if (got.shape() != want.shape) {
        FAIL_CHECK("shape: got " << shape_str(got.shape()) << ", expected " << shape_str(want.shape));
        return false;
    }
    std::vector<double> g = got.to_doubles();
    std::int64_t bad = 0;
    std::ostringstream msg;
    msg.precision(17);
    for (std::size_t i = 0; i < g.size(); ++i) {
        double a = g[i], b = want.v[i];
        bool match;
        if (std::isnan(b)) match = std::isnan(a);
        else if (std::isinf(b)) match = a == b;
        else match = !std::isnan(a) && std::fabs(a - b) <= tol.atol + tol.rtol * std::fabs(b);
        if (!match) {
            if (bad < 5)
                msg << "  at " << shape_str(unravel(static_cast<std::int64_t>(i), want.shape)) << ": got " << a
                    << ", expected " << b << "\n";
            ++bad;
        }
    }
    CHECK_MESSAGE(bad == 0, bad << " of " << g.size() << " values differ (shape " << shape_str(want.shape) << ", dtype "
                                << dname(want_dtype) << ", rtol " << tol.rtol << ", atol " << tol.atol << ")\n"
                                << msg.str());
    return ok && bad == 0;
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

kiln::GroupStats group_of_kind(const kiln::FunctionStats& s, const std::string& kind) {
    for (const auto& gr : s.groups)
        if (gr.kind == kind) return gr;
    FAIL("no " << kind << " group in " << s.to_json());
    return {};
}

void check_tier2(const kiln::FunctionStats& s, const std::string& kind) { check_tier(s, kind, 2); }

void check_tier(const kiln::FunctionStats& s, const std::string& kind, int level) {
    INFO(s.to_json());
    const kiln::GroupStats gs = group_of_kind(s, kind);
    CHECK(gs.tier == level);
    CHECK(gs.compiled_calls > 0);
    CHECK(s.compile_failures == 0);
}

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
