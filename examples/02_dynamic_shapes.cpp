// 02_dynamic_shapes: a pre-norm transformer block whose sequence length is only known at
// call time. Attention splits the model dimension into heads with reshape/permute and
// transposes the keys; every one of those shape ops keeps the symbolic length `?seq`.
//
//   usage: 02_dynamic_shapes [SEQ_LEN ...]      (default: 1 7 16 33 64)
//
// Prints each output shape with a checksum, and exits non-zero if a shape is wrong, a
// value is not finite, or the block does not act on each batch row independently.
#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

namespace {

constexpr std::int64_t kBatch = 2;     // a static batch, to show mixing static and dynamic dims
constexpr std::int64_t kModel = 64;    // d_model
constexpr std::int64_t kHeads = 4;
constexpr std::int64_t kHeadDim = kModel / kHeads;
constexpr std::int64_t kHidden = 256;  // the MLP's hidden size

// randn(shape, seed) * scale + shift, for weights of a sensible size.
kiln::Tensor weight(const kiln::Shape& shape, std::uint64_t seed, float scale, float shift = 0.0f) {
    kiln::Tensor t = kiln::Tensor::randn(shape, seed).clone();
    float* p = t.data_as<float>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = p[i] * scale + shift;
    return t;
}

}  // namespace

int main(int argc, char** argv) try {
    // Step 1: parameters. linear(x, w, b) takes w as [out, in], like PyTorch.
    const float s_in = 1.0f / std::sqrt(float(kModel)), s_hidden = 1.0f / std::sqrt(float(kHidden));
    kiln::Tensor ln1_g = weight({kModel}, 1, 0.1f, 1.0f), ln1_b = weight({kModel}, 2, 0.1f);
    kiln::Tensor Wqkv = weight({3 * kModel, kModel}, 3, s_in), bqkv = weight({3 * kModel}, 4, 0.02f);
    kiln::Tensor Wo = weight({kModel, kModel}, 5, s_in), bo = weight({kModel}, 6, 0.02f);
    kiln::Tensor ln2_g = weight({kModel}, 7, 0.1f, 1.0f), ln2_b = weight({kModel}, 8, 0.1f);
    kiln::Tensor W1 = weight({kHidden, kModel}, 9, s_in), b1 = weight({kHidden}, 10, 0.02f);
    kiln::Tensor W2 = weight({kModel, kHidden}, 11, s_hidden), b2 = weight({kModel}, 12, 0.02f);

    // Step 2: trace with x: f32[2, ?seq, 64].
    kiln::Graph g = kiln::trace(
        "transformer_block", {kiln::arg("x", kiln::DType::f32, {kBatch, kiln::dyn("seq"), kModel})},
        [&](const std::vector<kiln::Var>& in) -> std::vector<kiln::Var> {
            const kiln::Var& x = in[0];
            const kiln::Dim B = x.dim(0);  // the static 2
            const kiln::Dim S = x.dim(1);  // the symbolic ?seq

            // Attention sub-block, pre-norm: x + Attn(LN(x)).
            kiln::Var h = kiln::layer_norm(x, ln1_g, ln1_b);
            kiln::Var qkv = kiln::linear(h, Wqkv, bqkv);                    // [B,S,3*D]
            std::vector<kiln::Var> parts = kiln::split(qkv, 3, /*axis=*/-1);  // 3 x [B,S,D]
            // [B,S,D] -> [B,S,H,Dh] -> [B,H,S,Dh]
            auto to_heads = [&](const kiln::Var& t) {
                return kiln::permute(kiln::reshape(t, {B, S, kHeads, kHeadDim}), {0, 2, 1, 3});
            };
            kiln::Var q = to_heads(parts[0]), k = to_heads(parts[1]), v = to_heads(parts[2]);
            kiln::Var scores = kiln::matmul(q, kiln::transpose(k, -2, -1));  // [B,H,S,S]
            scores = scores * (1.0 / std::sqrt(double(kHeadDim)));
            kiln::Var ctx = kiln::matmul(kiln::softmax(scores, -1), v);      // [B,H,S,Dh]
            ctx = kiln::reshape(kiln::permute(ctx, {0, 2, 1, 3}), {B, S, kModel});
            kiln::Var x1 = x + kiln::linear(ctx, Wo, bo);

            // MLP sub-block, pre-norm: x1 + W2 GELU(W1 LN(x1)).
            kiln::Var m = kiln::gelu(kiln::linear(kiln::layer_norm(x1, ln2_g, ln2_b), W1, b1));
            return {x1 + kiln::linear(m, W2, b2)};
        });
    std::cout << "traced " << g.name() << ": " << g.num_nodes() << " nodes, input "
              << kiln::dims_to_string(g.inputs()[0].dims) << " -> output " << kiln::dims_to_string(g.outputs()[0].dims)
              << "\n";

    kiln::Engine engine;
    kiln::Function f = engine.load(g);

    std::vector<std::int64_t> lengths;
    for (int i = 1; i < argc; ++i) lengths.push_back(std::stoll(argv[i]));
    if (lengths.empty()) lengths = {1, 7, 16, 33, 64};

    int failures = 0;
    for (std::int64_t seq : lengths) {
        // Step 3: an input whose two batch rows are equal: the block must give equal rows.
        kiln::Tensor row = kiln::Tensor::randn({1, seq, kModel}, /*seed=*/1000 + seq);
        kiln::Tensor x = kiln::Tensor::empty({kBatch, seq, kModel});
        for (std::int64_t b = 0; b < kBatch; ++b) x.slice(0, b, b + 1).copy_from(row);

        // The output shapes can be asked for without running anything.
        const kiln::Shape expected{kBatch, seq, kModel};
        std::vector<kiln::Shape> predicted = f.output_shapes({x.shape()});

        std::vector<kiln::Tensor> y = f({x});
        if (y.size() != 1 || y[0].shape() != expected || predicted.size() != 1 || predicted[0] != expected) {
            std::cerr << "seq " << seq << ": expected output shape " << kiln::shape_to_string(expected) << "\n";
            ++failures;
            continue;
        }

        // Step 4: checks and a checksum.
        std::vector<double> v = y[0].to_doubles();
        double sum = 0.0, abs_sum = 0.0, row_diff = 0.0;
        bool finite = true;
        const std::size_t per_row = static_cast<std::size_t>(seq * kModel);
        for (std::size_t i = 0; i < v.size(); ++i) {
            finite = finite && std::isfinite(v[i]);
            sum += v[i];
            abs_sum += std::abs(v[i]);
            if (i >= per_row) row_diff = std::max(row_diff, std::abs(v[i] - v[i - per_row]));
        }
        const bool ok = finite && row_diff <= 1e-5 && abs_sum > 0.0;
        failures += ok ? 0 : 1;
        std::cout << "seq " << std::setw(3) << seq << ": output " << std::setw(12) << kiln::shape_to_string(y[0].shape())
                  << "  checksum " << std::fixed << std::setprecision(6) << sum << "  mean|y| " << abs_sum / double(v.size())
                  << std::defaultfloat << (ok ? "" : "  FAILED (non-finite, or batch rows differ)") << "\n";
    }

    // Step 5: what the engine saw: each value of ?seq, and the calls per shape signature.
    kiln::FunctionStats st = f.stats();
    std::cout << "calls: " << st.calls << "\n";
    for (const auto& [symbol, histogram] : st.dim_histograms) {
        std::cout << "?" << symbol << ":";
        for (const auto& [value, calls] : histogram) std::cout << " " << value << "(x" << calls << ")";
        std::cout << "\n";
    }

    if (failures != 0) {
        std::cerr << "02_dynamic_shapes: " << failures << " check(s) failed\n";
        return 1;
    }
    std::cout << "02_dynamic_shapes: ok\n";
    return 0;
} catch (const kiln::Error& e) {
    std::cerr << "kiln::Error: " << e.what() << "\n";
    return 1;
} catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
}
