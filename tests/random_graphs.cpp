// Random graphs for the differential test (see random_graphs.h): the shared helpers and the
// elementwise, integer, view, reduction and normalisation families.
#include "random_graphs.h"

#include "reference.h"

#include <string>

namespace kiln::test::diff {

DType pick_float(Rng& rng) { return pick(rng, std::vector<DType>{DType::f32, DType::f32, DType::f64, DType::f16, DType::bf16}); }

std::vector<std::int64_t> pick_batches(Rng& rng, int n, bool allow_zero) {
    std::vector<std::int64_t> b;
    for (int i = 0; i < n; ++i) b.push_back(allow_zero && chance(rng, 8) ? 0 : pick(rng, std::vector<std::int64_t>{1, 2, 3, 5, 8, 13}));
    return b;
}

std::vector<std::vector<Tensor>> make_calls(const std::vector<ArgSpec>& args,
                                            const std::vector<std::map<std::string, std::int64_t>>& bindings,
                                            std::uint64_t seed, double lo, double hi) {
    std::vector<std::vector<Tensor>> calls;
    for (const auto& bind : bindings) {
        std::vector<Tensor> in;
        for (const ArgSpec& a : args) {
            Shape s;
            for (const Dim& d : a.dims) s.push_back(d.is_static() ? d.value() : bind.at(d.symbols().at(0)));
            in.push_back(ref::random_input(s, ++seed * 7919, a.dtype, lo, hi));
        }
        calls.push_back(std::move(in));
    }
    return calls;
}

std::vector<std::vector<Tensor>> batch_calls(const std::vector<ArgSpec>& args, const std::vector<std::int64_t>& batches,
                                             std::uint64_t seed, double lo, double hi) {
    std::vector<std::map<std::string, std::int64_t>> bindings;
    for (std::int64_t b : batches) bindings.push_back({{"B", b}});
    return make_calls(args, bindings, seed, lo, hi);
}

Var float_step(Rng& rng, const Var& h, const Var& x, const Var& y) {
    switch (rng() % 26) {
    case 0: return tanh(h);
    case 1: return sigmoid(h);
    case 2: return relu(h);
    case 3: return gelu(h, chance(rng, 2));
    case 4: return silu(h);
    case 5: return erf(h);
    case 6: return sin(h);
    case 7: return cos(h);
    case 8: return exp(clamp(h, -3.0, 3.0));
    case 9: return log(abs(h) + 1.0);
    case 10: return sqrt(abs(h) + 0.25);
    case 11: return rsqrt(abs(h) + 0.5);
    case 12: return reciprocal(abs(h) + 1.0);
    case 13: return h + y;
    case 14: return h - y;
    case 15: return h * y;
    case 16: return h / (abs(y) + 0.5);
    case 17: return maximum(h, y);
    case 18: return minimum(h, y);
    case 19: return clamp(h, -1.5, 1.5);
    case 20: return where(x > y, h, -h);
    case 21: return h * sign(x) + floor(y) - round(x) * 0.25 + ceil(y * 0.5);
    case 22: return pow(abs(tanh(h)) + 0.5, 1.5);
    case 23: return abs(h) * 0.5 - 0.25;
    case 24: return cast(cast(h, DType::f64), h.dtype()) * 0.75;  // a cast pair, exact both ways
    default: return where(x < 0.5, h, y) + h * 0.5;
    }
}

Var activation(Rng& rng, const Var& h) {
    switch (rng() % 6) {
    case 0: return relu(h);
    case 1: return gelu(h, chance(rng, 2));
    case 2: return silu(h);
    case 3: return tanh(h);
    case 4: return sigmoid(h);
    default: return h;
    }
}

namespace {

// x's dims with some leading dims dropped and some others set to 1: a shape that broadcasts to x's.
std::vector<Dim> broadcastable(Rng& rng, const std::vector<Dim>& x) {
    std::vector<Dim> y(x.begin() + static_cast<std::ptrdiff_t>(rng() % x.size()), x.end());
    for (Dim& d : y)
        if (chance(rng, 3)) d = 1;
    return y;
}

std::vector<Dim> batch_dims(Rng& rng, int rank, const std::vector<std::int64_t>& sizes) {
    std::vector<Dim> d{dyn("B")};
    for (int i = 1; i < rank; ++i) d.push_back(pick(rng, sizes));
    return d;
}

std::string name_of(const char* family, std::uint64_t seed) { return std::string(family) + "_" + std::to_string(seed); }

}  // namespace

Case elementwise_case(std::uint64_t seed) {
    Rng rng(seed);
    const DType dt = pick_float(rng);
    // (rank 4: y broadcast along a middle dim, x[B, a, b, c] * y[a, 1, c], as squeeze-excite
    // in the blocked layout: lower_elementwise's middle loop)
    const std::vector<Dim> xd = batch_dims(rng, 1 + static_cast<int>(rng() % 4), {1, 3, 5, 8, 17, 33});
    const std::vector<ArgSpec> args{arg("x", dt, xd), arg("y", dt, broadcastable(rng, xd))};
    const int depth = 2 + static_cast<int>(rng() % 5);
    Graph g = trace(name_of("elementwise", seed), args, [&](const std::vector<Var>& in) {
        Var h = in[0];
        for (int i = 0; i < depth; ++i) h = float_step(rng, h, in[0], in[1]);
        std::vector<Var> outs{h};
        if (chance(rng, 3)) outs.push_back(h * in[1] + 1.0);  // a second output read from the chain
        return outs;
    });
    return {"elementwise", seed, g, batch_calls(args, pick_batches(rng, 3, true), seed, -2.0, 2.0)};
}

Case integer_case(std::uint64_t seed) {
    Rng rng(seed);
    const DType dt = pick(rng, std::vector<DType>{DType::i8, DType::u8, DType::i32, DType::i64});
    const std::vector<Dim> xd = batch_dims(rng, 1 + static_cast<int>(rng() % 3), {1, 3, 5, 8, 17, 33});
    const std::vector<ArgSpec> args{arg("x", dt, xd), arg("y", dt, broadcastable(rng, xd)),
                                    arg("m", DType::boolean, broadcastable(rng, xd))};
    const int depth = 2 + static_cast<int>(rng() % 5);
    Graph g = trace(name_of("integer", seed), args, [&](const std::vector<Var>& in) {
        const Var &x = in[0], &y = in[1], &m = in[2];
        Var h = x;
        for (int i = 0; i < depth; ++i) {
            switch (rng() % 13) {
            case 0: h = h + y; break;
            case 1: h = h - y; break;
            case 2: h = h * y; break;  // wraps like the dtype
            case 3: h = h / y; break;  // truncates; x / 0 is 0
            case 4: h = maximum(h, y); break;
            case 5: h = minimum(h, y); break;
            case 6: h = abs(h); break;
            case 7: h = -h; break;
            case 8: h = relu(h) + sign(h); break;
            case 9: h = where(h > y, h, y); break;
            case 10: h = where(logical_not(m) == (h <= x), h, x); break;
            case 11: h = clamp(h, 1.0, 9.0); break;
            default: h = h + cast(h != y, dt); break;
            }
        }
        std::vector<Var> outs{h};
        if (chance(rng, 2)) outs.push_back(logical_not(h < y) == m);  // a boolean output
        if (chance(rng, 3)) outs.push_back(cast(h, DType::f32) * 0.5);
        return outs;
    });
    return {"integer", seed, g, batch_calls(args, pick_batches(rng, 3, true), seed, -20.0, 20.0)};
}

Case view_case(std::uint64_t seed) {
    Rng rng(seed);
    const DType dt = chance(rng, 6) ? DType::i32 : pick_float(rng);
    const std::int64_t M = pick(rng, std::vector<std::int64_t>{2, 3, 4, 6}), N = pick(rng, std::vector<std::int64_t>{1, 3, 5, 8});
    const int kind = static_cast<int>(rng() % 8);
    // x's dims per kind; y broadcasts to the view of x.
    std::vector<Dim> xd{dyn("B"), M, N}, yd;
    const std::int64_t s0 = static_cast<std::int64_t>(rng() % 2), step = 1 + static_cast<std::int64_t>(rng() % 2);
    switch (kind) {
    case 0: yd = {M * N}; break;                                  // reshape to [B, M*N]
    case 1: yd = {N}; break;                                      // reshape to [B*M, N]
    case 2: yd = {N, 1}; break;                                   // permute to [B, N, M]
    case 3: yd = {M}; break;                                      // transpose(1, 2): [B, N, M]
    case 4: yd = {1, N}; break;                                   // slice of axis 1
    case 5: xd = {dyn("B"), 1, N}; yd = {M, N}; break;            // broadcast_to [B, M, N]
    case 6: xd = {dyn("B"), 1, N}; yd = {N}; break;               // squeeze axis 1
    default: xd = {dyn("B"), N}; yd = {M, 1}; break;              // unsqueeze axis 1, broadcast against [M, 1]
    }
    const std::vector<ArgSpec> args{arg("x", dt, xd), arg("y", dt, yd)};
    const bool before = chance(rng, 2);  // an elementwise op before the view too
    Graph g = trace(name_of("view", seed), args, [&](const std::vector<Var>& in) {
        // (An exact op: float_step compares the view's values, which must be the same in every tier.)
        Var x = before ? (is_floating(dt) ? in[0] * 2.0 : abs(in[0]) + 1) : in[0];
        Var v;
        switch (kind) {
        case 0: v = reshape(x, {x.dim(0), M * N}); break;
        case 1: v = reshape(x, {x.dim(0) * M, N}); break;
        case 2: v = permute(x, {0, 2, 1}); break;
        case 3: v = transpose(x, 1, 2); break;
        case 4: v = slice(x, 1, s0, M, step); break;
        case 5: v = broadcast_to(x, {x.dim(0), M, N}); break;
        case 6: v = squeeze(x, {1}); break;
        default: v = unsqueeze(x, 1); break;
        }
        Var h = is_floating(dt) ? float_step(rng, v * in[1], v, v) : maximum(v * in[1], v - in[1]);
        std::vector<Var> outs{h};
        if (chance(rng, 2) && h.rank() == 3) outs.push_back(reshape(permute(h, {0, 2, 1}), {h.dim(0), -1}) + 1);
        return outs;
    });
    return {"view", seed, g, batch_calls(args, pick_batches(rng, 3, true), seed, -3.0, 3.0)};
}

Case reduction_case(std::uint64_t seed) {
    Rng rng(seed);
    const bool integer = chance(rng, 4);
    const DType dt = integer ? pick(rng, std::vector<DType>{DType::i8, DType::i32, DType::i64}) : pick_float(rng);
    const std::vector<Dim> xd = batch_dims(rng, 2 + static_cast<int>(rng() % 2), {1, 3, 8, 17, 64});
    const std::vector<ArgSpec> args{arg("x", dt, xd), arg("y", dt, broadcastable(rng, xd))};
    const int op = static_cast<int>(rng() % 4);
    const bool keep = chance(rng, 2), two_axes = xd.size() == 3 && chance(rng, 3);
    const std::vector<std::int64_t> axes = two_axes ? std::vector<std::int64_t>{-2, -1} : std::vector<std::int64_t>{-1};
    Graph g = trace(name_of("reduction", seed), args, [&](const std::vector<Var>& in) {
        const Var &x = in[0], &y = in[1];
        Var p = integer ? (chance(rng, 2) ? x * y + 1 : abs(x) - y) : float_step(rng, x * y, x, y);
        Var r;
        switch (op) {
        case 0: r = sum(p, axes, keep); break;
        case 1: r = integer ? sum(p, axes, keep) : mean(p, axes, keep); break;
        case 2: r = max(p, axes, keep); break;
        default: r = min(p, axes, keep); break;
        }
        if (keep && chance(rng, 2)) return std::vector<Var>{p - r, r};  // the result broadcast back
        return std::vector<Var>{integer ? r + 1 : r * 2.0 + 1.0};
    });
    Case c{"reduction", seed, g, batch_calls(args, pick_batches(rng, 3, true), seed, integer ? -9.0 : -2.0, integer ? 9.0 : 2.0)};
    c.tol_scale = 2.0;  // sums of up to 17 * 64 terms
    return c;
}

Case norm_case(std::uint64_t seed) {
    Rng rng(seed);
    const DType dt = pick_float(rng);
    const std::int64_t N = pick(rng, std::vector<std::int64_t>{1, 3, 8, 33, 100});
    std::vector<Dim> xd{dyn("B"), N};
    if (chance(rng, 2)) xd.insert(xd.begin() + 1, Dim(pick(rng, std::vector<std::int64_t>{2, 5})));
    const bool params_as_inputs = chance(rng, 3);
    std::vector<ArgSpec> args{arg("x", dt, xd), arg("y", dt, broadcastable(rng, xd))};
    if (params_as_inputs) {
        args.push_back(arg("gamma", dt, {N}));
        args.push_back(arg("beta", dt, {N}));
    }
    const Tensor gamma_c = Tensor::rand({N}, seed + 1, dt, 0.5, 1.5), beta_c = Tensor::rand({N}, seed + 2, dt, -1.0, 1.0);
    const int op = static_cast<int>(rng() % 4);
    Graph g = trace(name_of("norm", seed), args, [&](const std::vector<Var>& in) {
        const Var &x = in[0], &y = in[1];
        const Var gamma = params_as_inputs ? in[2] : Var(gamma_c), beta = params_as_inputs ? in[3] : Var(beta_c);
        // A producer rounds its result to a half type in the interpreter but not in a fused
        // kernel, and normalising a row of nearly equal values magnifies that: half types
        // normalise x itself.
        const bool half = dt == DType::f16 || dt == DType::bf16;
        Var h = half ? x : chance(rng, 2) ? float_step(rng, x + y, x, y) : x * y + x;
        Var r;
        switch (op) {
        case 0: r = softmax(h, -1); break;
        case 1: r = log_softmax(h, -1); break;
        case 2: r = layer_norm(h, gamma, beta, 1e-5); break;
        default: r = rms_norm(h, gamma, 1e-6); break;
        }
        if (chance(rng, 2)) r = r * 2.0 + y;  // an epilogue
        return std::vector<Var>{r};
    });
    Case c{"norm", seed, g, batch_calls(args, pick_batches(rng, 3, true), seed, -2.0, 2.0)};
    c.tol_scale = 4.0;  // rows of nearly equal values magnify rounding differences
    return c;
}

}  // namespace kiln::test::diff
