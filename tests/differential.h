#pragma once
// The engine-level differential checker: a graph and its calls run through kiln::Engine with
// the interpreter only (the specification) and with one compiling tier forced, and every
// output of every call must match the interpreter's within the tolerance of its dtype.
// Random graphs come from tests/random_graphs.h; the test cases are in
// tests/test_differential.cpp. Nothing here uses doctest: a Result says what differed, so a
// test can also assert that a wrong kernel is caught (tests/test_differential_hook.cpp).
//
// Environment (read by the test cases): KILN_DIFF_SCALE=N runs N times as many graphs;
// KILN_DIFF_SEED=S runs only the graph of seed S in each family.
#include <kiln/kiln.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::test::diff {

// One random graph and the calls to make: several input sets, where symbolic dims take
// several values.
struct Case {
    std::string family;
    std::uint64_t seed = 0;
    Graph graph;
    std::vector<std::vector<Tensor>> calls;
    double tol_scale = 1.0;  // multiplies the tolerance of every output
    bool nchwc = false;      // both engines run with KILN_NCHWC=1 (Options::nchwc), else 0
};

struct Result {
    std::string mismatch;   // empty when every output of every call matched
    bool compiled = false;  // some call ran compiled code of the tier (FunctionStats::calls_by_tier)
    FunctionStats stats;    // of the function at the tier
};

// Options that run only the interpreter, or force tier 1 (it compiles every group it can
// after one call; tier 2 never) or tier 2 (it compiles every group it can for each shape
// before the call, through Function::warmup; tier 1 never). Compiles on the calling thread.
Options interpreter_options();
Options forced_tier_options(int tier);

// Runs `c` at `tier` (1 or 2) and with the interpreter; compares every output.
Result run(const Case& c, int tier);

// The allowed difference of an output of dtype `dt`, as |got - want| <= tol * (1 + |want|):
// floats get the tolerance of their precision (the interpreter rounds each op's result to a
// half type where a fused kernel keeps f32), integers and booleans compare exactly. NaN must
// match NaN, an infinity the same infinity.
double tolerance(DType dt, double scale = 1.0);
// The first elements where `got` and `want` differ beyond tolerance (empty when they match).
std::string compare(const Tensor& got, const Tensor& want, double tol_scale);

// For failure messages: family, seed, how to rerun it, the graph's text IR and the shapes and
// dtypes of every call's inputs.
std::string describe(const Case& c);

// KILN_DIFF_SCALE (default 1) and KILN_DIFF_SEED (unset: none).
int scale_from_env();
std::optional<std::uint64_t> seed_from_env();
// The seeds of a family: `count * KILN_DIFF_SCALE` consecutive seeds from `base`, or only
// KILN_DIFF_SEED when it is set.
std::vector<std::uint64_t> seeds(std::uint64_t base, int count);

}  // namespace kiln::test::diff
