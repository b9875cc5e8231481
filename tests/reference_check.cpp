// Test helpers of the reference (see reference.h) that report through doctest: comparisons
// and tier checks. The helpers without doctest (tolerances, options, engines, inputs) are in
// reference_setup.cpp.
#include "reference.h"

#include <doctest/doctest.h>

#include <cmath>
#include <sstream>

namespace ref {

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

}  // namespace ref
