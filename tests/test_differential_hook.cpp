// A test of the differential test: with tier 2 made to miscompile one op on purpose
// (tiers/test_hook.h), the checker (tests/differential.h) must report a mismatch, and with the
// hook off again the same graph must match.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "differential.h"
#include "have_tier.h"
#include "random_graphs.h"
#include "src/kir/kir.h"
#include "tiers/test_hook.h"

#include <string>

using namespace kiln;
namespace diff = kiln::test::diff;

namespace {

// Turns the hook on for one op and off again, whatever happens.
struct CorruptOp {
    explicit CorruptOp(kir::BinaryOp op) { tiers::set_corrupt_op_for_testing(op); }
    ~CorruptOp() { tiers::set_corrupt_op_for_testing(std::nullopt); }
    CorruptOp(const CorruptOp&) = delete;
    CorruptOp& operator=(const CorruptOp&) = delete;
};

diff::Case gelu_chain() {
    const std::vector<ArgSpec> args{arg("x", DType::f32, {dyn("B"), 16}), arg("y", DType::f32, {16})};
    Graph g = trace("hooked", args, [](const std::vector<Var>& in) { return gelu(in[0] * in[1] + 0.5, true); });
    return {"hooked", 1, g, diff::batch_calls(args, {3, 5}, 1, -2.0, 2.0)};
}

}  // namespace

TEST_CASE("differential: the checker reports a tier-2 kernel that miscompiles one op") {
    if (test::lacks_tier(2)) return;
    const diff::Case c = gelu_chain();
    {
        CorruptOp hook(kir::BinaryOp::mul);
        CHECK(tiers::corrupt_op_for_testing() == kir::BinaryOp::mul);
        const diff::Result bad = diff::run(c, 2);
        INFO(bad.stats.to_json());
        CHECK(bad.compiled);
        CHECK(bad.mismatch.find("tier 2, call 0") != std::string::npos);
        CHECK(bad.mismatch.find("values differ") != std::string::npos);
        MESSAGE("with the hook on: " << bad.mismatch);
    }
    CHECK(!tiers::corrupt_op_for_testing().has_value());
    const diff::Result good = diff::run(c, 2);
    CHECK(good.compiled);
    CHECK_MESSAGE(good.mismatch.empty(), good.mismatch);
}

TEST_CASE("differential: a miscompiled add is caught in random elementwise graphs") {
    if (test::lacks_tier(2)) return;
    CorruptOp hook(kir::BinaryOp::add);
    int caught = 0, compiled = 0;
    for (std::uint64_t seed = 1000; seed < 1008; ++seed) {
        const diff::Result r = diff::run(diff::elementwise_case(seed), 2);
        compiled += r.compiled;
        caught += !r.mismatch.empty();
    }
    MESSAGE(caught << " of 8 graphs caught (" << compiled << " ran compiled code)");
    CHECK(caught >= 3);
}
