// The engine-level differential checker (see differential.h).
#include "differential.h"

#include "reference.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace kiln::test::diff {

Options interpreter_options() {
    Options o;
    o.jit = false;
    o.async_compile = false;
    return o;
}

Options forced_tier_options(int tier) {
    if (tier == 1) return ref::jit_options(1, ref::kNever);
    if (tier == 2) return ref::jit_options(ref::kNever, 0);
    throw std::invalid_argument("forced_tier_options: tier " + std::to_string(tier));
}

double tolerance(DType dt, double scale) {
    switch (dt) {
    case DType::f64: return 1e-12 * scale;
    case DType::f32: return 2e-5 * scale;
    case DType::f16: return 2e-2 * scale;
    case DType::bf16: return 8e-2 * scale;
    default: return 0.0;
    }
}

std::string compare(const Tensor& got, const Tensor& want, double tol_scale) {
    std::ostringstream os;
    os.precision(9);
    if (got.dtype() != want.dtype()) os << "dtype " << ref::dname(got.dtype()) << ", expected " << ref::dname(want.dtype());
    if (got.shape() != want.shape())
        os << (os.tellp() > 0 ? "; " : "") << "shape " << ref::shape_str(got.shape()) << ", expected " << ref::shape_str(want.shape());
    if (os.tellp() > 0) return os.str();
    const double tol = tolerance(want.dtype(), tol_scale);
    const std::vector<double> a = got.to_doubles(), b = want.to_doubles();
    std::int64_t bad = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        bool match;
        if (std::isnan(b[i])) match = std::isnan(a[i]);
        else if (std::isinf(b[i])) match = a[i] == b[i];
        else match = std::fabs(a[i] - b[i]) <= tol * (1.0 + std::fabs(b[i]));
        if (match) continue;
        if (bad < 4)
            os << "\n    at " << ref::shape_str(ref::unravel(static_cast<std::int64_t>(i), want.shape())) << ": got " << a[i]
               << ", interpreter " << b[i];
        ++bad;
    }
    if (bad == 0) return {};
    std::ostringstream head;
    head << bad << " of " << a.size() << " values differ beyond " << tol << " * (1 + |want|) (shape "
         << ref::shape_str(want.shape()) << ", " << ref::dname(want.dtype()) << ")";
    return head.str() + os.str();
}

namespace {

std::vector<Shape> shapes_of(const std::vector<Tensor>& in) {
    std::vector<Shape> s;
    for (const Tensor& t : in) s.push_back(t.shape());
    return s;
}

std::string shapes_str(const std::vector<Tensor>& in) {
    std::string s;
    for (const Tensor& t : in) s += (s.empty() ? "" : ", ") + ref::dname(t.dtype()) + ref::shape_str(t.shape());
    return s;
}

}  // namespace

Result run(const Case& c, int tier) {
    Result r;
    Options oi = interpreter_options(), ot = forced_tier_options(tier);
    oi.nchwc = ot.nchwc = c.nchwc ? "1" : "0";
    Function fi = Engine(oi).load(c.graph);
    Function ft = Engine(ot).load(c.graph);
    if (tier == 2) {
        std::vector<std::vector<Shape>> sets;
        for (const auto& in : c.calls) sets.push_back(shapes_of(in));
        ft.warmup(sets);
    } else if (!c.calls.empty()) {
        (void)ft(c.calls.front());  // the first call runs on the interpreter and compiles tier 1
    }
    for (std::size_t k = 0; k < c.calls.size() && r.mismatch.empty(); ++k) {
        const std::vector<Tensor> want = fi(c.calls[k]);
        const std::vector<Tensor> got = ft(c.calls[k]);
        std::ostringstream where;
        where << "tier " << tier << ", call " << k << " (inputs " << shapes_str(c.calls[k]) << ")";
        if (got.size() != want.size()) {
            r.mismatch = where.str() + ": " + std::to_string(got.size()) + " outputs, expected " + std::to_string(want.size());
            break;
        }
        for (std::size_t o = 0; o < want.size() && r.mismatch.empty(); ++o)
            if (std::string d = compare(got[o], want[o], c.tol_scale); !d.empty())
                r.mismatch = where.str() + ", output " + std::to_string(o) + ": " + d;
    }
    r.stats = ft.stats();
    r.compiled = r.stats.calls_by_tier[static_cast<std::size_t>(tier)] > 0;
    return r;
}

std::string describe(const Case& c) {
    std::ostringstream os;
    os << "family " << c.family << ", seed " << c.seed << " (rerun it alone: KILN_DIFF_SEED=" << c.seed
       << " kiln_tests --test-case='differential: " << c.family << "*')\n";
    for (std::size_t k = 0; k < c.calls.size(); ++k) os << "call " << k << " inputs: " << shapes_str(c.calls[k]) << "\n";
    os << c.graph.to_string({.max_constant_elements = 0});
    return os.str();
}

int scale_from_env() {
    const char* v = std::getenv("KILN_DIFF_SCALE");
    if (!v || !*v) return 1;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end != '\0' || n < 1 || n > 1000000)
        throw std::invalid_argument(std::string("KILN_DIFF_SCALE='") + v + "': expected a whole number from 1 to 1000000");
    return static_cast<int>(n);
}

std::optional<std::uint64_t> seed_from_env() {
    const char* v = std::getenv("KILN_DIFF_SEED");
    if (!v || !*v) return std::nullopt;
    char* end = nullptr;
    const unsigned long long s = std::strtoull(v, &end, 10);
    if (*end != '\0') throw std::invalid_argument(std::string("KILN_DIFF_SEED='") + v + "': expected a whole number");
    return static_cast<std::uint64_t>(s);
}

std::vector<std::uint64_t> seeds(std::uint64_t base, int count) {
    if (const auto s = seed_from_env()) return {*s};
    std::vector<std::uint64_t> v;
    const std::uint64_t n = static_cast<std::uint64_t>(count) * static_cast<std::uint64_t>(scale_from_env());
    for (std::uint64_t i = 0; i < n; ++i) v.push_back(base + i);
    return v;
}

}  // namespace kiln::test::diff
