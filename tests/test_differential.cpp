// The engine-level differential test: random graphs (tests/random_graphs.h), built with the
// public tracing API and called at several batch sizes, run through kiln::Engine at tier 1
// (asmjit) and at tier 2 (LLVM), each forced, and compared with the interpreter
// (tests/differential.h). Each family also requires that a sizeable share of its graphs really
// ran compiled code at each tier the build has; a tier the build or host lacks is skipped.
//
// KILN_DIFF_SCALE=N runs N times as many graphs; KILN_DIFF_SEED=S runs only seed S of each
// family. A failure prints the seed, the command that reruns it, the graph's text IR and the
// shapes of the inputs.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "differential.h"
#include "have_tier.h"
#include "random_graphs.h"

#include <array>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

using namespace kiln;
namespace diff = kiln::test::diff;

namespace {

struct Family {
    const char* name;
    diff::Case (*make)(std::uint64_t seed);
    std::uint64_t first_seed;
    int graphs;                      // by default (times KILN_DIFF_SCALE)
    std::array<double, 3> compiled;  // the share of graphs that must run compiled code, by tier
};

void run_family(const Family& f) {
    std::vector<int> tiers;
    for (int tier : {1, 2})
        if (!test::lacks_tier(tier)) tiers.push_back(tier);
    if (tiers.empty()) return;
    const std::vector<std::uint64_t> seeds = diff::seeds(f.first_seed, f.graphs);
    std::array<std::uint64_t, 3> ran{}, compiled{};
    for (std::uint64_t seed : seeds) {
        diff::Case c;
        try {
            c = f.make(seed);
        } catch (const std::exception& e) {
            FAIL_CHECK("family " << f.name << ", seed " << seed << ": building the graph threw: " << e.what());
            continue;
        }
        for (int tier : tiers) {
            const auto t = static_cast<std::size_t>(tier);
            try {
                const diff::Result r = diff::run(c, tier);
                ++ran[t];
                compiled[t] += r.compiled ? 1 : 0;
                CHECK_MESSAGE(r.mismatch.empty(), "the tier differs from the interpreter: " << r.mismatch << "\n"
                                                      << diff::describe(c) << "stats at tier " << tier << ": " << r.stats.to_json());
            } catch (const std::exception& e) {
                FAIL_CHECK("tier " << tier << " threw: " << e.what() << "\n" << diff::describe(c));
            }
        }
    }
    std::string summary = std::string(f.name) + ": " + std::to_string(seeds.size()) + " graphs";
    for (int tier : tiers) {
        const auto t = static_cast<std::size_t>(tier);
        summary += "; tier " + std::to_string(tier) + " ran compiled code in " + std::to_string(compiled[t]);
    }
    MESSAGE(summary);
    if (diff::seed_from_env()) return;  // one graph says nothing about a share
    for (int tier : tiers) {
        const auto t = static_cast<std::size_t>(tier);
        CHECK_MESSAGE(static_cast<double>(compiled[t]) >= f.compiled[t] * static_cast<double>(ran[t]),
                      "tier " << tier << " ran compiled code in only " << compiled[t] << " of " << ran[t] << " " << std::string(f.name)
                              << " graphs; expected at least " << f.compiled[t] * 100 << "%");
    }
}

}  // namespace

TEST_CASE("differential: elementwise float chains with broadcasts") {
    run_family({"elementwise", diff::elementwise_case, 1000, 96, {0, 0.8, 0.9}});
}

TEST_CASE("differential: integer and boolean elementwise") {
    run_family({"integer", diff::integer_case, 2000, 96, {0, 0.8, 0.9}});
}

TEST_CASE("differential: views feeding elementwise") {
    run_family({"view", diff::view_case, 3000, 96, {0, 0.8, 0.9}});
}

TEST_CASE("differential: reductions over trailing axes") {
    run_family({"reduction", diff::reduction_case, 4000, 96, {0, 0.8, 0.9}});
}

TEST_CASE("differential: norm ops (softmax, log_softmax, layer_norm, rms_norm)") {
    run_family({"norm", diff::norm_case, 5000, 96, {0, 0.8, 0.9}});
}

// Tier 1 runs GEMM groups (matmul or conv with its epilogue) with f32 and f64 operands
// (about 60% of these graphs: the others are f16/bf16, which tier 1 leaves to tier 2).
TEST_CASE("differential: matmul and linear with epilogues") {
    run_family({"matmul", diff::matmul_case, 6000, 64, {0, 0.5, 0.9}});
}

TEST_CASE("differential: conv2d with epilogues") {
    run_family({"conv", diff::conv_case, 7000, 64, {0, 0.5, 0.9}});
}

// The same in the blocked channel layout (Options::nchwc): chains of convolutions with the
// pass's conversions at their edges. Tier 2 runs f32 convs on src/cpu's blocked-layout kernel
// (the other dtypes as their plain loop nests); tier 1 declines f32 ones (the interpreter
// runs that kernel), so about a third of these graphs (f64, f16, bf16) run compiled code there.
TEST_CASE("differential: nchwc conv chains in the blocked channel layout") {
    run_family({"nchwc", diff::nchwc_case, 7500, 24, {0, 0.15, 0.9}});
}
