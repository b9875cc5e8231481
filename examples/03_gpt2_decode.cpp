// 03_gpt2_decode: token-by-token greedy decoding with a KV cache, from a GPT-2 that PyTorch
// exported to ONNX with use_cache=True (tests/onnx/dynamic/export_dynamic.py writes a small
// one with random weights, and PyTorch's logits for each step). The model is loaded once;
// each call feeds the new token and the cache of ?past rows and returns the logits and the
// cache of ?past+1 rows. ?past grows by one every call: the classic recompilation storm,
// which Kiln's specialisation policy must keep to a handful of compiles.
//
//   usage: 03_gpt2_decode MODEL_DIR [--steps N]
//
// MODEL_DIR holds model.onnx and decode/step_<n>/ (inputs of step n and PyTorch's logits).
// Step 0 feeds the prompt with an empty cache; later steps feed the token PyTorch chose and
// the cache Kiln returned. Prints each step's error against PyTorch, then the tier and compile
// counts; exits non-zero when a step's logits differ from PyTorch's by more than 1e-4
// (relative to their largest magnitude).
#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

double rel_error(const kiln::Tensor& a, const kiln::Tensor& b) {
    if (a.shape() != b.shape()) return INFINITY;
    auto x = a.to_doubles(), y = b.to_doubles();
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        diff = std::max(diff, std::fabs(x[i] - y[i]));
        scale = std::max(scale, std::fabs(y[i]));
    }
    return diff / std::max(scale, 1e-30);
}

std::int64_t argmax_last(const kiln::Tensor& logits) {  // of the last position
    auto v = logits.to_doubles();
    const std::int64_t vocab = logits.shape().back();
    auto last = v.end() - vocab;
    return std::max_element(last, v.end()) - last;
}

kiln::Tensor read(const fs::path& p) { return kiln::load_onnx_tensor(p.string()); }

}  // namespace

int main(int argc, char** argv) try {
    if (argc < 2) {
        std::cerr << "usage: 03_gpt2_decode MODEL_DIR [--steps N]\n";
        return 2;
    }
    const fs::path dir = argv[1];
    int steps = 64;
    for (int i = 2; i + 1 < argc; i += 2)
        if (std::string(argv[i]) == "--steps") steps = std::atoi(argv[i + 1]);

    // Step 1: load once. Inputs: input_ids [?batch,?sequence], attention_mask [?batch,?total],
    // past_key_values.<l>.key/value [?batch,4,?past,16]; outputs: logits and present.<l>.*.
    kiln::Graph g = kiln::load_onnx((dir / "model.onnx").string());
    std::cout << "inputs:";
    for (const auto& in : g.inputs()) std::cout << " " << in.name << kiln::dims_to_string(in.dims);
    std::cout << "\noutputs:";
    for (const auto& out : g.outputs()) std::cout << " " << out.name << kiln::dims_to_string(out.dims);
    std::cout << "\n";
    kiln::Engine engine;  // Options::from_env(): the default tier-up policy
    kiln::Function f = engine.load(g);

    // Step 2: decode. The cache of the call before feeds the next call.
    std::vector<kiln::Tensor> past;
    double worst = 0;
    int agree = 0, ran = 0;
    std::vector<double> ms;
    for (int s = 0; s < steps && fs::exists(dir / "decode" / ("step_" + std::to_string(s))); ++s) {
        const fs::path sd = dir / "decode" / ("step_" + std::to_string(s));
        std::vector<kiln::Tensor> in = {read(sd / "input_0.pb"), read(sd / "input_1.pb")};
        if (s == 0)
            for (int i = 2; fs::exists(sd / ("input_" + std::to_string(i) + ".pb")); ++i)
                past.push_back(read(sd / ("input_" + std::to_string(i) + ".pb")));
        in.insert(in.end(), past.begin(), past.end());
        auto t0 = std::chrono::steady_clock::now();
        std::vector<kiln::Tensor> out = f(in);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        const kiln::Tensor want = read(sd / "output_0.pb");
        const double e = rel_error(out[0], want);
        worst = std::max(worst, e);
        agree += argmax_last(out[0]) == argmax_last(want);
        ++ran;
        if (s < 3 || s % 16 == 0 || e >= 1e-4)
            std::cout << "step " << std::setw(2) << s << ": past " << std::setw(2) << past[0].shape()[2] << " -> "
                      << out[1].shape()[2] << ", logits error " << std::scientific << std::setprecision(2) << e
                      << std::defaultfloat << (e < 1e-4 ? "" : "  MISMATCH") << "\n";
        past.assign(out.begin() + 1, out.end());
    }
    if (ran == 0) throw kiln::Error("no decode steps under " + (dir / "decode").string());

    // Step 3: what ran where, and what it cost.
    f.wait_for_compiles();
    const kiln::FunctionStats st = f.stats();
    std::vector<double> sorted(ms.begin() + std::min<std::size_t>(ms.size() - 1, 8), ms.end());
    std::sort(sorted.begin(), sorted.end());
    std::cout << ran << " steps, worst logits error " << std::scientific << std::setprecision(2) << worst
              << std::defaultfloat << ", argmax agrees with PyTorch on " << agree << "/" << ran << "\n";
    std::cout << "median ms per token (steps 8+): " << std::fixed << std::setprecision(3) << sorted[sorted.size() / 2]
              << std::defaultfloat << "\n";
    std::cout << "calls by tier: " << st.calls_by_tier[0] << " / " << st.calls_by_tier[1] << " / " << st.calls_by_tier[2]
              << "; compiles " << st.compiles << " (" << std::fixed << std::setprecision(1) << st.compile_ms
              << std::defaultfloat << " ms), compile failures " << st.compile_failures << "\n";
    std::uint64_t compiled = 0, calls = 0, most = 0;
    for (const auto& gr : st.groups) {
        if (gr.kind == "opaque") continue;
        compiled += gr.compiled_calls;
        calls += gr.calls;
        most = std::max<std::uint64_t>(most, gr.compiles_by_tier[1] + gr.compiles_by_tier[2]);
    }
    std::cout << "compilable groups: " << calls << " calls, " << compiled << " on compiled code ("
              << std::fixed << std::setprecision(1) << (calls ? 100.0 * double(compiled) / double(calls) : 0.0)
              << "%); at most " << most << " compiles per group\n";
    return worst < 1e-4 ? 0 : 1;
} catch (const kiln::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
}
