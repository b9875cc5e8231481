// Every row reduction (softmax, log_softmax, layer_norm, rms_norm, sum, mean, max, min over
// the last axis) on tiers 1 and 2 against the interpreter, on rows of extreme values: huge
// magnitudes up to 3e38 (whose squares and sums overflow f32), tiny ones down to f32
// denormals, mixed signs, and a NaN, +Inf or -Inf in every position of a row. The
// interpreter is the specification: where its result is finite, the compiled tier agrees
// within rounding; where it is NaN or an infinity, the tier returns the same.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "differential.h"
#include "have_tier.h"
#include "reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

namespace {

using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
using kiln::Var;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

enum class Kind { softmax, log_softmax, layer_norm, rms_norm, sum, mean, max, min };
const Kind kKinds[] = {Kind::softmax, Kind::log_softmax, Kind::layer_norm, Kind::rms_norm,
                       Kind::sum,     Kind::mean,        Kind::max,        Kind::min};

const char* name_of(Kind k) {
    switch (k) {
    case Kind::softmax: return "softmax";
    case Kind::log_softmax: return "log_softmax";
    case Kind::layer_norm: return "layer_norm";
    case Kind::rms_norm: return "rms_norm";
    case Kind::sum: return "sum";
    case Kind::mean: return "mean";
    case Kind::max: return "max";
    case Kind::min: return "min";
    }
    return "?";
}

// Rows of length d: the extreme patterns, then one row per position with a NaN, a +Inf and
// a -Inf there (the rest of those rows ordinary values), then a row with both infinities.
// Long rows (every_position false) put the specials at the first, middle and last position.
std::vector<double> extreme_rows(std::int64_t d, std::uint64_t seed, bool every_position, std::int64_t* rows) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> unit(-1.0, 1.0), expo(-38.0, 38.4);
    auto sign = [&] { return rng() % 2 ? 1.0 : -1.0; };
    const std::vector<std::function<double(std::int64_t)>> patterns = {
        [](std::int64_t j) { return j == 3 % 1000 ? 1e20 : 1.0; },                     // one huge value
        [](std::int64_t j) { return j % 5 == 0 ? 1e21 : 0.5 * static_cast<double>(j % 3); },
        [](std::int64_t) { return 3e38; },                                             // the sum overflows f32
        [](std::int64_t j) { return j % 3 == 0 ? 3e38 : -3e38; },                      // x - mean overflows f32
        [](std::int64_t j) { return (j % 2 ? 1e30 : -1e30) * (1.0 + 0.01 * static_cast<double>(j)); },
        [](std::int64_t j) { return (j % 2 ? 1.0 : -1.0) * 1e-38 * static_cast<double>(1 + j % 7); },
        [](std::int64_t j) { return (j % 2 ? 1.0 : -1.0) * 1e-40 * static_cast<double>(1 + j % 5); },  // denormal
        [](std::int64_t j) { return j % 4 == 0 ? 1e-45 : 0.0; },
        [](std::int64_t) { return 0.0; },
        [](std::int64_t j) { return j == 0 ? 3e38 : 1e-38; },
        [&](std::int64_t) { return sign() * std::pow(10.0, expo(rng)); },              // 1e-38 .. 3e38
        [&](std::int64_t) { return sign() * std::pow(10.0, expo(rng)); },
        [&](std::int64_t) { return 1e4 + unit(rng); },                                 // a large mean
        [&](std::int64_t) { return 3.0 * unit(rng); },
    };
    std::vector<double> v;
    for (const auto& p : patterns)
        for (std::int64_t j = 0; j < d; ++j) v.push_back(p(j));
    std::vector<std::int64_t> positions{0, d / 2, d - 1};
    if (every_position) {
        positions.clear();
        for (std::int64_t pos = 0; pos < d; ++pos) positions.push_back(pos);
    }
    for (double special : {kNaN, kInf, -kInf})
        for (std::int64_t pos : positions)
            for (std::int64_t j = 0; j < d; ++j) v.push_back(j == pos ? special : 2.0 * unit(rng));
    for (std::int64_t j = 0; j < d; ++j) v.push_back(j == 0 ? kInf : j + 1 == d ? -kInf : unit(rng));
    *rows = static_cast<std::int64_t>(v.size()) / d;
    return v;
}

kiln::Graph graph_of(Kind k, DType dt, std::int64_t d, const Tensor& gamma, const Tensor& beta) {
    return kiln::trace(name_of(k), {kiln::arg("x", dt, {kiln::dyn("R"), d})}, [&](const std::vector<Var>& in) -> Var {
        const Var& x = in[0];
        switch (k) {
        case Kind::softmax: return kiln::softmax(x, -1);
        case Kind::log_softmax: return kiln::log_softmax(x, -1);
        case Kind::layer_norm: return kiln::layer_norm(x, gamma, beta, 1e-5);
        case Kind::rms_norm: return kiln::rms_norm(x, gamma, 1e-6);
        case Kind::sum: return kiln::sum(x, -1);
        case Kind::mean: return kiln::mean(x, -1);
        case Kind::max: return kiln::max(x, -1);
        case Kind::min: return kiln::min(x, -1);
        }
        return x;
    });
}

// What the tolerances need of a row (as the dtype holds its values).
struct RowStats {
    double abs_mean = 0;  // mean of |x|
    double cond = 0;      // abs_mean / sqrt(var + eps): how much x - mean magnifies a rounding of the mean
};

RowStats row_stats(std::span<const double> row) {
    RowStats s;
    double mean = 0, var = 0;
    for (double x : row) s.abs_mean += std::fabs(x), mean += x;
    s.abs_mean /= static_cast<double>(row.size());
    mean /= static_cast<double>(row.size());
    for (double x : row) var += (x - mean) * (x - mean);
    var /= static_cast<double>(row.size());
    s.cond = s.abs_mean / std::sqrt(var + 1e-5);
    return s;
}

// The allowed |got - want| of an output of a row with statistics `rs`. Sums and means may
// add in another order: a few f64 roundings of the row's absolute sum, then one rounding
// to the dtype. In layer_norm, x - mean cancels: an order-dependent rounding of the mean is
// magnified by 1/sqrt(var + eps) (a row of equal values near 3e38 has no defined result
// beyond that: its variance is rounding noise). max/min are exact.
double allowed(Kind k, DType dt, const RowStats& rs, std::size_t n, double want) {
    const double out_tol = kiln::test::diff::tolerance(dt, k == Kind::layer_norm || k == Kind::log_softmax ? 8.0 : 4.0);
    switch (k) {
    case Kind::max:
    case Kind::min: return 0.0;
    case Kind::sum:
    case Kind::mean: {
        const double abs_sum = k == Kind::mean ? rs.abs_mean : rs.abs_mean * static_cast<double>(n);
        return 1e-13 * abs_sum + out_tol * std::fabs(want) + std::numeric_limits<float>::denorm_min();
    }
    case Kind::layer_norm: {
        const double amplified = 1e-13 * 1.5 * rs.cond;  // |gamma| <= 1.5
        return out_tol * (1.0 + std::fabs(want)) + (std::isfinite(amplified) ? amplified : 0.0);
    }
    default: return out_tol * (1.0 + std::fabs(want));
    }
}

// The first mismatches of `got` against the interpreter's `want`, over rows of length d.
std::string compare_rows(Kind k, DType dt, const std::vector<double>& x, std::int64_t d, const Tensor& got,
                         const Tensor& want) {
    const std::vector<double> a = got.to_doubles(), b = want.to_doubles();
    if (a.size() != b.size()) return "got " + std::to_string(a.size()) + " values, expected " + std::to_string(b.size());
    const std::size_t per_row = b.size() == x.size() ? static_cast<std::size_t>(d) : 1;  // row ops, or one value a row
    std::ostringstream os;
    os.precision(9);
    int bad = 0;
    RowStats rs;
    for (std::size_t i = 0; i < b.size(); ++i) {
        const std::size_t r = i / per_row;
        const std::span<const double> row(x.data() + r * static_cast<std::size_t>(d), static_cast<std::size_t>(d));
        if (i % per_row == 0) rs = row_stats(row);
        bool ok;
        if (std::isnan(b[i])) ok = std::isnan(a[i]);
        else if (std::isinf(b[i])) ok = a[i] == b[i];
        else ok = std::isfinite(a[i]) && std::fabs(a[i] - b[i]) <= allowed(k, dt, rs, row.size(), b[i]);
        if (ok) continue;
        if (bad++ < 4) {
            os << "\n  row " << r << " element " << i % per_row << ": got " << a[i] << ", interpreter " << b[i] << " (row:";
            for (std::size_t j = 0; j < row.size() && j < 6; ++j) os << " " << row[j];
            os << (row.size() > 6 ? " ...)" : ")");
        }
    }
    return bad == 0 ? std::string{} : std::to_string(bad) + " of " + std::to_string(b.size()) + " values differ" + os.str();
}

// Runs every kind on rows of length d at `tier`; returns the (kind, dtype) pairs the tier
// did not compile.
std::vector<std::string> check_tier(int tier, std::int64_t d, std::uint64_t seed) {
    std::vector<std::string> not_compiled;
    std::int64_t rows = 0;
    const std::vector<double> values = extreme_rows(d, seed, /*every_position=*/d <= 256, &rows);
    for (DType dt : ref::float_dtypes()) {
        // The values as the dtype holds them (3e38 is +Inf in f16), for the tolerances.
        const Tensor x = Tensor::from_vector(values, {rows, d}).astype(dt);
        const std::vector<double> held = x.to_doubles();
        const Tensor gamma = Tensor::rand({d}, seed + 1, dt, 0.5, 1.5), beta = Tensor::rand({d}, seed + 2, dt, -1.0, 1.0);
        for (Kind k : kKinds) {
            INFO("tier ", tier, ", ", std::string(name_of(k)), ", ", ref::dname(dt), ", rows of ", d);
            const kiln::Graph g = graph_of(k, dt, d, gamma, beta);
            kiln::Function fi = kiln::Engine(kiln::test::diff::interpreter_options()).load(g);
            kiln::Function ft = kiln::Engine(kiln::test::diff::forced_tier_options(tier)).load(g);
            if (tier == 2) ft.warmup({{x.shape()}});
            else (void)ft({x});  // runs on the interpreter and compiles tier 1
            const Tensor want = fi({x})[0];
            const Tensor got = ft({x})[0];
            const std::string diff = compare_rows(k, dt, held, d, got, want);
            CHECK_MESSAGE(diff.empty(), diff);
            const kiln::FunctionStats s = ft.stats();
            if (s.calls_by_tier[static_cast<std::size_t>(tier)] == 0)
                not_compiled.push_back(std::string(name_of(k)) + "/" + ref::dname(dt));
        }
    }
    return not_compiled;
}

void run_tier(int tier) {
    if (!kiln::test::have_tier(tier)) {
        MESSAGE("skipped: tier ", tier, " is not built");
        return;
    }
    // Rows shorter than a vector, with a vector tail, a whole number of vectors, and long.
    for (std::int64_t d : {std::int64_t{5}, std::int64_t{37}, std::int64_t{64}, std::int64_t{4099}}) {
        const std::vector<std::string> missed = check_tier(tier, d, 9100 + static_cast<std::uint64_t>(d));
        // f32 and f64 rows must compile: otherwise the test would compare the interpreter
        // with itself. The half types may be declined by a tier (then they ran on the
        // interpreter, which the test reports).
        for (const std::string& m : missed) {
            const bool half = m.find("f16") != std::string::npos;
            if (half) MESSAGE("tier ", tier, " did not compile ", m, " (rows of ", d, "): it ran on the interpreter");
            else FAIL_CHECK("tier ", tier, " did not compile ", m, " (rows of ", d, ")");
        }
    }
}

}  // namespace

TEST_CASE("extreme values: every row reduction at tier 1 agrees with the interpreter") { run_tier(1); }

TEST_CASE("extreme values: every row reduction at tier 2 agrees with the interpreter") { run_tier(2); }

TEST_CASE("extreme values: the layer_norm reproduction (one row holding 1e20) on every tier") {
    // The interpreter normalises the row (y[3] is about 7.94); the compiled tiers once
    // returned beta for the whole row because their f32 variance overflowed.
    const std::int64_t d = 64;
    std::vector<float> row(static_cast<std::size_t>(d), 1.0f);
    row[3] = 1e20f;
    const Tensor x = Tensor::from_vector(row, {1, d});
    const Tensor gamma = Tensor::ones({d}), beta = Tensor::zeros({d});
    const kiln::Graph g = graph_of(Kind::layer_norm, DType::f32, d, gamma, beta);
    const Tensor want = kiln::Engine(kiln::test::diff::interpreter_options()).load(g)({x})[0];
    CHECK(want.item({0, 3}) == doctest::Approx(7.937).epsilon(1e-3));
    for (int tier : {1, 2}) {
        if (!kiln::test::have_tier(tier)) {
            MESSAGE("skipped: tier ", tier, " is not built");
            continue;
        }
        kiln::Function f = kiln::Engine(kiln::test::diff::forced_tier_options(tier)).load(g);
        if (tier == 2) f.warmup({{x.shape()}});
        else (void)f({x});
        const Tensor got = f({x})[0];
        INFO("tier ", tier);
        CHECK(f.stats().calls_by_tier[static_cast<std::size_t>(tier)] > 0);
        CHECK(got.item({0, 3}) == doctest::Approx(want.item({0, 3})).epsilon(1e-5));
        CHECK(got.item({0, 0}) == doctest::Approx(want.item({0, 0})).epsilon(1e-5));
    }
}
