#pragma once
// The model workloads shared by the benchmark programs (not part of the library): their
// weights and their traced graphs, built once here so that jit_workloads and jit_traffic
// measure the same graphs.
//
//   Mlp          784-1024-1024-10: relu(linear) twice then linear (weights [out, in], as
//                PyTorch's), input x: f32[?batch, 784]
//   Transformer  the pre-norm transformer block of examples/02_dynamic_shapes.cpp with
//                d_model 256, 4 heads, FFN 1024 (erf GELU), input x: f32[1, ?seq, 256]
//
// The weights are kept beside the graph so that a program can compute its own reference.
#include <kiln/kiln.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace kiln_bench {

// randn(shape, seed) * scale + shift, as in examples/02_dynamic_shapes.cpp.
inline kiln::Tensor weight(const kiln::Shape& shape, std::uint64_t seed, float scale, float shift = 0.0f) {
    kiln::Tensor t = kiln::Tensor::randn(shape, seed).clone();
    float* p = t.data_as<float>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = p[i] * scale + shift;
    return t;
}

struct Mlp {
    static constexpr std::int64_t d0 = 784, d1 = 1024, d2 = 1024, d3 = 10;
    kiln::Tensor W1, b1, W2, b2, W3, b3;
    kiln::Graph graph;  // "mlp": x f32[?batch, 784] -> f32[?batch, 10]

    // Multiply-adds of the matmuls x 2, at batch b.
    static double flops(std::int64_t b) { return 2.0 * double(b) * double(d0 * d1 + d1 * d2 + d2 * d3); }
};

inline Mlp make_mlp() {
    Mlp m;
    m.W1 = weight({Mlp::d1, Mlp::d0}, 21, 1.0f / std::sqrt(float(Mlp::d0)));
    m.b1 = weight({Mlp::d1}, 22, 0.02f);
    m.W2 = weight({Mlp::d2, Mlp::d1}, 23, 1.0f / std::sqrt(float(Mlp::d1)));
    m.b2 = weight({Mlp::d2}, 24, 0.02f);
    m.W3 = weight({Mlp::d3, Mlp::d2}, 25, 1.0f / std::sqrt(float(Mlp::d2)));
    m.b3 = weight({Mlp::d3}, 26, 0.02f);
    // One function with a dynamic batch, as a service would load it.
    m.graph = kiln::trace("mlp", {kiln::arg("x", kiln::DType::f32, {kiln::dyn("batch"), Mlp::d0})},
                          [&](const std::vector<kiln::Var>& v) -> std::vector<kiln::Var> {
                              kiln::Var h = kiln::relu(kiln::linear(v[0], m.W1, m.b1));
                              h = kiln::relu(kiln::linear(h, m.W2, m.b2));
                              return {kiln::linear(h, m.W3, m.b3)};
                          });
    return m;
}

struct Transformer {
    static constexpr std::int64_t D = 256, H = 4, Dh = D / H, F = 1024;
    kiln::Tensor ln1_g, ln1_b, Wqkv, bqkv, Wo, bo, ln2_g, ln2_b, W1, b1, W2, b2;
    kiln::Graph graph;  // "transformer_block": x f32[1, ?seq, 256] -> f32[1, ?seq, 256]

    // Multiply-adds of the matmuls x 2, at sequence length s.
    static double flops(std::int64_t s) {
        return 2.0 * double(s) * double(D * 3 * D + D * D + 2 * D * F) + 2.0 * 2.0 * double(H * s * s * Dh);
    }
};

inline Transformer make_transformer() {
    using T = Transformer;
    Transformer t;
    const float s_in = 1.0f / std::sqrt(float(T::D)), s_hidden = 1.0f / std::sqrt(float(T::F));
    t.ln1_g = weight({T::D}, 31, 0.1f, 1.0f), t.ln1_b = weight({T::D}, 32, 0.1f);
    t.Wqkv = weight({3 * T::D, T::D}, 33, s_in), t.bqkv = weight({3 * T::D}, 34, 0.02f);
    t.Wo = weight({T::D, T::D}, 35, s_in), t.bo = weight({T::D}, 36, 0.02f);
    t.ln2_g = weight({T::D}, 37, 0.1f, 1.0f), t.ln2_b = weight({T::D}, 38, 0.1f);
    t.W1 = weight({T::F, T::D}, 39, s_in), t.b1 = weight({T::F}, 40, 0.02f);
    t.W2 = weight({T::D, T::F}, 41, s_hidden), t.b2 = weight({T::D}, 42, 0.02f);

    t.graph = kiln::trace(
        "transformer_block", {kiln::arg("x", kiln::DType::f32, {1, kiln::dyn("seq"), T::D})},
        [&](const std::vector<kiln::Var>& v) -> std::vector<kiln::Var> {
            const kiln::Var& x = v[0];
            const kiln::Dim B = x.dim(0), S = x.dim(1);
            kiln::Var h = kiln::layer_norm(x, t.ln1_g, t.ln1_b);
            std::vector<kiln::Var> parts = kiln::split(kiln::linear(h, t.Wqkv, t.bqkv), 3, -1);
            auto to_heads = [&](const kiln::Var& u) { return kiln::permute(kiln::reshape(u, {B, S, T::H, T::Dh}), {0, 2, 1, 3}); };
            kiln::Var q = to_heads(parts[0]), k = to_heads(parts[1]), val = to_heads(parts[2]);
            kiln::Var scores = kiln::matmul(q, kiln::transpose(k, -2, -1)) * (1.0 / std::sqrt(double(T::Dh)));
            kiln::Var c = kiln::matmul(kiln::softmax(scores, -1), val);
            c = kiln::reshape(kiln::permute(c, {0, 2, 1, 3}), {B, S, T::D});
            kiln::Var x1 = x + kiln::linear(c, t.Wo, t.bo);
            kiln::Var m = kiln::gelu(kiln::linear(kiln::layer_norm(x1, t.ln2_g, t.ln2_b), t.W1, t.b1));
            return {x1 + kiln::linear(m, t.W2, t.b2)};
        });
    return t;
}

}  // namespace kiln_bench
