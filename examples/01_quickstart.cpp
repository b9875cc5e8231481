// 01_quickstart: trace a small MLP with a dynamic batch, load it into an Engine, run it
// at a couple of batch sizes, print its IR and its statistics.
//
//   usage: 01_quickstart [BATCH ...]      (default: 1 32)
//
// Exits non-zero if an output has the wrong shape, a NaN, or a softmax row that does not
// sum to 1.
#include <kiln/kiln.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) try {
    // Step 1: the weights. They are ordinary tensors; captured by the trace they become
    // constants of the graph. Tensor::randn(shape, seed) is deterministic on every platform.
    kiln::Tensor W1 = kiln::Tensor::randn({784, 256}, /*seed=*/1);
    kiln::Tensor b1 = kiln::Tensor::zeros({256});
    kiln::Tensor W2 = kiln::Tensor::randn({256, 10}, /*seed=*/2);
    kiln::Tensor b2 = kiln::Tensor::zeros({10});

    // Step 2: trace. The body runs once, on symbolic Vars; `dyn("batch")` declares a
    // dimension whose size is only known at call time. Every op checks its operands
    // here, so a shape mistake throws kiln::Error now, not at the first call.
    kiln::Graph g = kiln::trace(
        "mlp", {kiln::arg("x", kiln::DType::f32, {kiln::dyn("batch"), 784})},
        [&](const std::vector<kiln::Var>& in) -> std::vector<kiln::Var> {
            // The scale keeps the logits in a sensible range for randn weights.
            kiln::Var h = kiln::relu(kiln::matmul(in[0], W1) * (1.0 / 28.0) + b1);
            return {kiln::softmax(kiln::matmul(h, W2) * (1.0 / 16.0) + b2, /*axis=*/-1)};
        });

    // Step 3: look at the IR. Large constants (the weights) print as <elided> here; the
    // default to_string() prints them in full and parses back with Graph::parse.
    std::cout << "---- IR ----\n" << g.to_string({.max_constant_elements = 8}) << "\n";

    // Step 4: load it. Engine() reads the KILN_* environment variables (README); a
    // Function is cheap to copy and may be called from any number of threads.
    kiln::Engine engine;
    kiln::Function f = engine.load(g);

    // Step 5: call it at several batch sizes: the same Function serves them all.
    std::vector<std::int64_t> batches;
    for (int i = 1; i < argc; ++i) batches.push_back(std::stoll(argv[i]));
    if (batches.empty()) batches = {1, 32};

    int failures = 0;
    for (std::size_t i = 0; i < batches.size(); ++i) {
        const std::int64_t batch = batches[i];
        kiln::Tensor x = kiln::Tensor::randn({batch, 784}, /*seed=*/100 + i);
        std::vector<kiln::Tensor> y = f({x});

        // Step 6: check the result: shape [batch, 10], finite, rows summing to 1.
        const kiln::Shape expected{batch, 10};
        if (y.size() != 1 || y[0].shape() != expected) {
            std::cerr << "batch " << batch << ": expected one output of shape " << kiln::shape_to_string(expected)
                      << "\n";
            ++failures;
            continue;
        }
        std::vector<float> v = y[0].to_vector<float>();
        int bad_rows = 0;
        for (std::int64_t r = 0; r < batch; ++r) {
            double s = 0.0;
            for (std::int64_t c = 0; c < 10; ++c) {
                float p = v[static_cast<std::size_t>(r * 10 + c)];
                if (!std::isfinite(p) || p < 0.0f) s = -1e9;  // poison the row
                s += p;
            }
            if (std::abs(s - 1.0) > 1e-5) ++bad_rows;
        }
        failures += bad_rows;
        std::cout << "batch " << batch << ": output " << kiln::shape_to_string(y[0].shape())
                  << (bad_rows ? "  BAD ROWS: " + std::to_string(bad_rows) : std::string("  rows sum to 1"))
                  << "\n  first row: " << y[0].slice(0, 0, 1).to_string(10) << "\n";
    }

    // Step 7: statistics: calls per tier, per group, shape signatures, dim histograms.
    std::cout << "---- stats ----\n" << f.stats().to_json() << "\n";

    if (failures != 0) {
        std::cerr << "01_quickstart: " << failures << " check(s) failed\n";
        return 1;
    }
    std::cout << "01_quickstart: ok\n";
    return 0;
} catch (const kiln::Error& e) {
    std::cerr << "kiln::Error: " << e.what() << "\n";
    return 1;
} catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
}
