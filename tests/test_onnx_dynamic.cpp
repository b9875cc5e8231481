// Real exports with dynamic axes (tests/onnx/dynamic/: BERT, DistilBERT, GPT-2 with and
// without a KV cache, ViT and ResNet, exported by PyTorch with random weights): each model
// loads once and matches PyTorch's outputs at every (batch, sequence) of its data sets, on
// the interpreter and on each JIT tier. Shape subgraphs Kiln cannot carry exactly give a
// kiln::Error naming the node.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "have_tier.h"
#include "reference.h"
#include "skip.h"

#if defined(KILN_HAVE_ONNX)
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

using namespace kiln;
namespace fs = std::filesystem;

namespace {

// KILN_TEST_ONNX_MODELS=DIR runs every model folder under DIR instead (e.g. the full-size
// exports of export_dynamic.py --full, which are too large to commit).
const char* const kOtherModels = std::getenv("KILN_TEST_ONNX_MODELS");
const fs::path kModels = kOtherModels ? fs::path(kOtherModels) : fs::path(KILN_SOURCE_DIR) / "tests" / "onnx" / "dynamic" / "models";

struct DataSet {
    std::string name;
    std::vector<Tensor> inputs, outputs;
};

std::vector<DataSet> data_sets(const fs::path& model_dir) {
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(model_dir))
        if (e.is_directory() && e.path().filename().string().starts_with("test_data_set_")) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    std::vector<DataSet> sets;
    for (const fs::path& d : dirs) {
        DataSet s{d.filename().string(), {}, {}};
        for (int i = 0; fs::exists(d / ("input_" + std::to_string(i) + ".pb")); ++i)
            s.inputs.push_back(load_onnx_tensor((d / ("input_" + std::to_string(i) + ".pb")).string()));
        for (int i = 0; fs::exists(d / ("output_" + std::to_string(i) + ".pb")); ++i)
            s.outputs.push_back(load_onnx_tensor((d / ("output_" + std::to_string(i) + ".pb")).string()));
        sets.push_back(std::move(s));
    }
    return sets;
}

// max |a - b| / max |b|: the error relative to the output's scale.
double rel_error(const Tensor& a, const Tensor& b) {
    if (a.shape() != b.shape()) return INFINITY;
    auto x = a.to_doubles(), y = b.to_doubles();
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        diff = std::max(diff, std::fabs(x[i] - y[i]));
        scale = std::max(scale, std::fabs(y[i]));
    }
    return diff / std::max(scale, 1e-30);
}

// Every data set of the model, through an engine with these options; returns the worst error
// and, in `stats`, the function's statistics.
double run_model(const std::string& model, const Options& options, int repeats, FunctionStats* stats = nullptr) {
    const fs::path dir = kModels / model;
    Graph g = load_onnx((dir / "model.onnx").string());
    Engine engine(options);
    Function f = engine.load(g);
    double worst = 0;
    for (int r = 0; r < repeats; ++r)
        for (const DataSet& s : data_sets(dir)) {
            CAPTURE(model);
            CAPTURE(s.name);
            std::vector<Tensor> out = f(s.inputs);
            REQUIRE(out.size() == s.outputs.size());
            for (std::size_t i = 0; i < out.size(); ++i) {
                CAPTURE(i);
                const double e = rel_error(out[i], s.outputs[i]);
                CHECK(e < 1e-4);
                worst = std::max(worst, e);
            }
        }
    if (stats) *stats = f.stats();
    return worst;
}

std::vector<std::string> all_models() {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(kModels))
        if (fs::exists(e.path() / "model.onnx")) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

}  // namespace

TEST_CASE("onnx dynamic: exported models load once with symbolic dims and match PyTorch on the interpreter") {
    CHECK(all_models().size() >= (kOtherModels ? 1u : 6u));
    for (const std::string& m : all_models()) {
        CAPTURE(m);
        Graph g = load_onnx((kModels / m / "model.onnx").string());
        bool symbolic = false;
        for (const ValueInfo& in : g.inputs())
            for (const Dim& d : in.dims) symbolic |= !d.is_static();
        CHECK(symbolic);
        MESSAGE(m << ": worst error " << run_model(m, ref::interp_options(), 1));
    }
}

TEST_CASE("onnx dynamic: the exported models match PyTorch after tier-up (tier 1, then tier 2)") {
    for (int tier : {1, 2}) {
        if (test::lacks_tier(tier)) continue;
        for (const std::string& m : all_models()) {
            CAPTURE(tier);
            CAPTURE(m);
            FunctionStats st;
            const double worst = run_model(m, tier == 1 ? ref::tier1_options() : ref::tier2_options(), 3, &st);
            // Calls ran on the tier (the last repeat at least), and nothing failed to compile
            // but what the tier does not take (its groups' notes say why).
            CHECK(st.calls_by_tier[static_cast<std::size_t>(tier)] > 0);
            std::uint64_t compiled = 0, calls = 0;
            for (const GroupStats& gr : st.groups) {
                if (gr.kind == "opaque") continue;
                compiled += gr.compiled_calls;
                calls += gr.calls;
            }
            MESSAGE(m << " tier " << tier << ": worst error " << worst << ", compiles " << st.compiles << ", "
                      << compiled << "/" << calls << " calls of compilable groups on compiled code, failures "
                      << st.compile_failures);
        }
    }
}

#endif  // KILN_HAVE_ONNX
