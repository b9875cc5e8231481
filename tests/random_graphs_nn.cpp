// Random graphs for the differential test (see random_graphs.h): matmul and conv2d with
// their epilogues (bias, activation, residual), float dtypes (the only ones they take).
#include "random_graphs.h"

#include <algorithm>
#include <cmath>
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

Case nchwc_case(std::uint64_t seed) {
    Rng rng(seed);
    const DType dt = chance(rng, 3) ? pick_float(rng) : DType::f32;
    const std::int64_t C0 = pick(rng, std::vector<std::int64_t>{3, 5, 16, 20});
    const std::int64_t H = pick(rng, std::vector<std::int64_t>{6, 9, 12}), Wd = pick(rng, std::vector<std::int64_t>{5, 8, 11});
    std::vector<ArgSpec> args{arg("x", dt, {dyn("B"), C0, H, Wd})};
    std::uint64_t wseed = seed * 131 + 1;
    auto rand = [&](const Shape& s, double lo, double hi) { return Tensor::rand(s, wseed++, dt, lo, hi); };
    const int stages = 2 + static_cast<int>(rng() % 3);
    Graph g = trace("nchwc_" + std::to_string(seed), args, [&](const std::vector<Var>& in) {
        Var h = in[0];
        std::int64_t c = C0, hh = H, ww = Wd;
        // A conv of c -> o channels (o == 0: depthwise) and its epilogue.
        auto conv = [&](std::int64_t o, std::int64_t k, std::int64_t stride, std::int64_t dil) {
            const bool dw = o == 0;
            if (dw) o = c;
            const std::int64_t pad = chance(rng, 4) ? 0 : dil * (k / 2);
            if (hh + 2 * pad < dil * (k - 1) + 1 || ww + 2 * pad < dil * (k - 1) + 1) return;  // too small: no conv
            // Weights scaled so that values keep their size along the chain.
            const double r = 1.5 / std::sqrt(static_cast<double>((dw ? 1 : c) * k * k));
            Var y = conv2d(h, rand({o, dw ? 1 : c, k, k}, -r, r), chance(rng, 3) ? Var() : Var(rand({o}, -0.5, 0.5)),
                           {stride, stride}, {pad, pad}, {dil, dil}, dw ? c : 1);
            const std::int64_t oh = (hh + 2 * pad - dil * (k - 1) - 1) / stride + 1, ow = (ww + 2 * pad - dil * (k - 1) - 1) / stride + 1;
            // A residual, before the activation or after it (tier 2's kernel adds one before
            // a clamp or SiLU itself).
            const bool residual = o == c && oh == hh && ow == ww && chance(rng, 2), before = chance(rng, 2);
            if (residual && before) y = y + h;
            // (clamps with bounds the values cross: tier 2 applies them in the conv kernel)
            switch (rng() % 6) {
            case 0: break;
            case 1: y = relu(y); break;
            case 2: y = clamp(y, -0.3, 0.4); break;
            case 3: y = minimum(maximum(y, Var(Tensor::full({}, 0.0, dt))), Var(Tensor::full({}, 0.5, dt))); break;
            case 4: y = silu(y); break;
            default: y = y * rand({o, 1, 1}, 0.5, 1.5); break;
            }
            if (residual && !before) y = y + h;
            h = y;
            c = o, hh = oh, ww = ow;
        };
        for (int s = 0; s < stages; ++s) {
            const std::int64_t k = pick(rng, std::vector<std::int64_t>{1, 1, 3, 5});
            const std::int64_t stride = hh >= 6 && ww >= 6 && chance(rng, 3) ? 2 : 1, dil = k == 3 && chance(rng, 4) ? 2 : 1;
            if (chance(rng, 3)) conv(0, k == 1 ? 3 : k, stride, dil);
            else conv(pick(rng, std::vector<std::int64_t>{4, 16, 17, 24, 32, 40}), k, stride, dil);
        }
        if (chance(rng, 3)) {  // two branches, concatenated along the channels
            const Var a = h;
            const std::int64_t c0 = c, hh0 = hh, ww0 = ww;
            conv(pick(rng, std::vector<std::int64_t>{16, 17}), 1, 1, 1);
            const Var left = h;
            const std::int64_t cl = c;
            h = a, c = c0;
            conv(16, 3, 1, 1);
            if (hh == hh0 && ww == ww0) {
                h = concat({left, h}, 1);
                c += cl;
            } else {
                h = left, c = cl, hh = hh0, ww = ww0;
            }
        }
        if (chance(rng, 3)) {  // squeeze-excite
            const std::int64_t cr = std::max<std::int64_t>(c / 4, 1);
            Var s = global_avg_pool2d(h);
            s = relu(conv2d(s, rand({cr, c, 1, 1}, -0.5, 0.5), Var(rand({cr}, -0.5, 0.5))));
            s = sigmoid(conv2d(s, rand({c, cr, 1, 1}, -0.5, 0.5), Var(rand({c}, -0.5, 0.5))));
            h = h * s;
        }
        std::vector<Var> outs{h};
        if (chance(rng, 3)) outs.push_back(global_avg_pool2d(h));
        return outs;
    });
    Case cs{"nchwc", seed, g, batch_calls(args, pick_batches(rng, 2, false), seed, -1.0, 1.0)};
    cs.nchwc = true;
    cs.tol_scale = 4.0;
    return cs;
}

}  // namespace kiln::test::diff
