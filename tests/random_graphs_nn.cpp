// Random graphs for the differential test (see random_graphs.h): matmul and conv2d with
// their epilogues (bias, activation, residual), float dtypes (the only ones they take).
#include "random_graphs.h"

#include <string>

namespace kiln::test::diff {

Case matmul_case(std::uint64_t seed) {
    Rng rng(seed);
    const DType dt = pick_float(rng);
    const std::vector<std::int64_t> sizes{1, 3, 8, 16, 33, 64};
    const std::int64_t M = pick(rng, sizes), K = pick(rng, sizes), N = pick(rng, sizes);
    const int form = static_cast<int>(rng() % 4);
    const bool bias = chance(rng, 2), residual = chance(rng, 2);
    std::vector<ArgSpec> args;
    std::vector<Dim> out;  // the result's dims
    switch (form) {
    case 0: args = {arg("x", dt, {dyn("B"), K})}; out = {dyn("B"), N}; break;                  // x @ W
    case 1: args = {arg("x", dt, {dyn("B"), M, K})}; out = {dyn("B"), M, N}; break;            // batched x @ W
    case 2: args = {arg("a", dt, {dyn("B"), M, K}), arg("b", dt, {dyn("B"), K, N})}; out = {dyn("B"), M, N}; break;
    default: args = {arg("x", dt, {dyn("B"), K})}; out = {dyn("B"), N}; break;                 // linear(x, w, b)
    }
    if (residual) args.push_back(arg("r", dt, out));
    const Tensor W = Tensor::rand({K, N}, seed + 1, dt, -1.0, 1.0), Wt = Tensor::rand({N, K}, seed + 2, dt, -1.0, 1.0);
    const Tensor b = Tensor::rand({N}, seed + 3, dt, -1.0, 1.0);
    Graph g = trace("matmul_" + std::to_string(seed), args, [&](const std::vector<Var>& in) {
        Var h;
        switch (form) {
        case 2: h = matmul(in[0], in[1]); break;
        case 3: h = linear(in[0], Wt, bias ? Var(b) : Var()); break;
        default: h = matmul(in[0], W); break;
        }
        if (bias && form != 3) h = h + b;
        h = activation(rng, h);
        if (residual) h = h + in.back();
        return std::vector<Var>{h};
    });
    return {"matmul", seed, g, batch_calls(args, pick_batches(rng, 3, false), seed, -1.0, 1.0)};
}

Case conv_case(std::uint64_t seed) {
    Rng rng(seed);
    const DType dt = pick_float(rng);
    const std::int64_t C = pick(rng, std::vector<std::int64_t>{1, 2, 3, 4}), O = pick(rng, std::vector<std::int64_t>{1, 2, 4, 6});
    const std::int64_t H = pick(rng, std::vector<std::int64_t>{5, 7, 8}), Wd = pick(rng, std::vector<std::int64_t>{5, 6, 9});
    const std::int64_t k = pick(rng, std::vector<std::int64_t>{1, 3});
    const Pair stride{1 + static_cast<std::int64_t>(rng() % 2), 1 + static_cast<std::int64_t>(rng() % 2)};
    const Pair pad{static_cast<std::int64_t>(rng() % 2), static_cast<std::int64_t>(rng() % 2)};
    const Pair dil{1 + static_cast<std::int64_t>(rng() % 2), 1};
    const std::int64_t groups = O % C == 0 && chance(rng, 3) ? C : 1;  // sometimes grouped (depthwise when O == C)
    const std::int64_t Ho = (H + 2 * pad[0] - dil[0] * (k - 1) - 1) / stride[0] + 1;
    const std::int64_t Wo = (Wd + 2 * pad[1] - dil[1] * (k - 1) - 1) / stride[1] + 1;
    const bool bias = chance(rng, 2), residual = chance(rng, 3);
    std::vector<ArgSpec> args{arg("x", dt, {dyn("B"), C, H, Wd})};
    if (residual) args.push_back(arg("r", dt, {dyn("B"), O, Ho, Wo}));
    const Tensor w = Tensor::rand({O, C / groups, k, k}, seed + 1, dt, -1.0, 1.0), b = Tensor::rand({O}, seed + 2, dt, -1.0, 1.0);
    const Tensor scale = Tensor::rand({O, 1, 1}, seed + 3, dt, 0.5, 1.5);
    Graph g = trace("conv_" + std::to_string(seed), args, [&](const std::vector<Var>& in) {
        Var h = conv2d(in[0], w, bias ? Var(b) : Var(), stride, pad, dil, groups);
        if (chance(rng, 2)) h = h * scale;  // a per-channel affine epilogue
        h = activation(rng, h);
        if (residual) h = h + in[1];
        return std::vector<Var>{h};
    });
    return {"conv", seed, g, batch_calls(args, pick_batches(rng, 3, false), seed, -1.0, 1.0)};
}

}  // namespace kiln::test::diff
