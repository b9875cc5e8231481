// Fuzz target (b): graphs built through the tracing API from the input bytes (op choices,
// operands, dims with the symbols B and S, dtypes, axes, constants), called at two or three
// bindings of the symbols on the interpreter, then with each compiling tier the build has
// forced, and compared with the interpreter by the differential checker (tests/differential.h,
// its tolerances scaled by 4 as for its norm family).
//
// Values stay where the tiers may differ only by rounding, as tests/random_graphs.h explains:
// inputs in [-2, 2) (integers in [-20, 20)); the continuous float steps of random_graphs.h;
// division, log and sqrt away from 0; comparisons, casts to integers, argmax and normalisation
// of half types read graph inputs only. An op the tracer rejects with kiln::Error is left out
// (the trace goes on); a graph the interpreter rejects at run time (a gather index out of range)
// is a valid outcome. A tier that throws, or disagrees, is a finding.
#include "fuzz_util.h"

#include "tests/differential.h"
#include "tests/random_graphs.h"

using namespace kiln;
using fuzz::attempt;
using fuzz::Bytes;
namespace diff = kiln::test::diff;

namespace {

std::vector<Dim> read_dims(Bytes& in, int rank) {
    std::vector<Dim> d;
    for (int i = 0; i < rank; ++i) d.push_back(in.pick<Dim>({dyn("B"), dyn("S"), 1, 2, 3, 5, 8, 17}));
    return d;
}

// The values of the trace so far: the graph inputs first (n_inputs of them), then each op's result.
struct Pool {
    std::vector<Var> v;
    std::size_t n_inputs = 0;
    DType dt = DType::f32;
    bool floating() const { return is_floating(dt); }
    Var any(Bytes& in) const { return v[static_cast<std::size_t>(in.in(0, static_cast<std::int64_t>(v.size()) - 1))]; }
    Var input(Bytes& in) const { return v[static_cast<std::size_t>(in.in(0, static_cast<std::int64_t>(n_inputs) - 1))]; }
    // An intermediate may feed a discontinuous op only when every tier computes it exactly.
    Var exact(Bytes& in) const { return floating() ? input(in) : any(in); }
};

std::int64_t axis_of(Bytes& in, const Var& h) { return in.in(-std::max<std::int64_t>(h.rank(), 1), std::max<std::int64_t>(h.rank(), 1) - 1); }
std::int64_t last_static(const Var& h) { return h.rank() > 0 && h.dim(-1).is_static() ? h.dim(-1).value() : -1; }
Tensor constant(Bytes& in, const Shape& s, DType dt, double lo, double hi) { return Tensor::rand(s, in.byte(), dt, lo, hi); }

Var reduction(Bytes& in, const Pool& p, const Var& h) {
    const std::vector<std::int64_t> axes = in.pick<std::vector<std::int64_t>>({{-1}, {-2, -1}, {}, {0}});
    const bool keep = in.flag();
    switch (in.in(0, 4)) {
    case 0: return sum(h, axes, keep);
    case 1: return p.floating() ? mean(h, axes, keep) : sum(h, axes, keep);
    case 2: return max(h, axes, keep);
    case 3: return min(h, axes, keep);
    default: {
        const Var x = p.exact(in);
        return argmax(x, axis_of(in, h), keep);
    }
    }
}

Var norm(Bytes& in, const Pool& p) {
    // Normalising a row of nearly equal values magnifies rounding: half types normalise inputs.
    const bool half = p.dt == DType::f16 || p.dt == DType::bf16;
    const Var h = half ? p.input(in) : p.any(in);
    const std::int64_t n = std::max<std::int64_t>(last_static(h), 1);
    const Tensor gamma = constant(in, {n}, p.dt, 0.5, 1.5), beta = constant(in, {n}, p.dt, -1.0, 1.0);
    switch (in.in(0, 3)) {
    case 0: return softmax(h, axis_of(in, h));
    case 1: return log_softmax(h, axis_of(in, h));
    case 2: return layer_norm(h, gamma, beta, in.pick({1e-5, 1e-3}));
    default: return rms_norm(h, gamma, in.pick({1e-6, 1e-3}));
    }
}

Var linear_op(Bytes& in, const Pool& p, const Var& h, const Var& g) {
    const std::int64_t k = std::max<std::int64_t>(last_static(h), 1), n = in.pick<std::int64_t>({1, 3, 8, 16});
    switch (in.in(0, 2)) {
    case 0: return matmul(h, constant(in, {k, n}, p.dt, -1.0, 1.0));
    case 1: {
        const Tensor w = constant(in, {n, k}, p.dt, -1.0, 1.0);
        return linear(h, w, in.flag() ? Var(constant(in, {n}, p.dt, -1.0, 1.0)) : Var());
    }
    default: return matmul(h, transpose(g, -1, -2));
    }
}

Var view(Bytes& in, const Var& h) {
    const std::int64_t r = h.rank();
    switch (in.in(0, 7)) {
    case 0: return flatten(h, in.in(-r, r - 1), -1);
    case 1: return reshape(h, in.flag() ? std::vector<Dim>{-1} : std::vector<Dim>{h.dim(0), -1});
    case 2: {
        std::vector<std::int64_t> perm;
        for (std::int64_t i = r - 1; i >= 0; --i) perm.push_back(in.flag() ? i : in.in(0, r - 1));
        return permute(h, perm);
    }
    case 3: {
        const std::int64_t a = axis_of(in, h), b = axis_of(in, h);
        return transpose(h, a, b);
    }
    case 4: {
        const std::int64_t axis = axis_of(in, h), start = in.in(-4, 8), end = in.flag() ? INT64_MAX : in.in(-4, 8);
        return slice(h, axis, start, end, in.in(1, 3));
    }
    case 5: return in.flag() ? unsqueeze(h, in.in(-r - 1, r)) : squeeze(h);
    case 6: {
        std::vector<Dim> d = h.dims();
        for (Dim& x : d)
            if (x == Dim(1) && in.flag()) x = in.pick<Dim>({dyn("B"), 3});
        d.insert(d.begin(), in.pick<Dim>({2, dyn("S")}));
        return broadcast_to(h, d);
    }
    default: {
        std::vector<std::int64_t> pads(static_cast<std::size_t>(2 * r));
        for (auto& x : pads) x = in.in(0, 2);
        return pad(h, pads, in.pick({0.0, 1.0, -0.5}));
    }
    }
}

Var combine(Bytes& in, const Var& h, const Var& g) {
    const std::int64_t axis = axis_of(in, h);
    switch (in.in(0, 2)) {
    case 0: return concat({h, g}, axis);
    case 1: {
        const std::vector<Var> parts = split(h, in.pick<std::int64_t>({1, 2, 3}), axis);
        return parts[static_cast<std::size_t>(in.in(0, static_cast<std::int64_t>(parts.size()) - 1))];
    }
    default: {  // indices in range, or sometimes one past it (the run must then fail)
        const std::int64_t n = h.rank() > 0 && h.dim(axis).is_static() ? h.dim(axis).value() : 1;
        std::vector<std::int64_t> idx(static_cast<std::size_t>(in.in(1, 4)));
        for (auto& i : idx) i = in.in(-n, n - (in.byte() == 7 ? 0 : 1));
        return gather(h, Tensor::from_vector(idx, {static_cast<std::int64_t>(idx.size())}), axis);
    }
    }
}

Var float_op(Bytes& in, const Pool& p) {
    const Var h = p.any(in), g = p.any(in), x = p.input(in), y = p.input(in);
    switch (in.in(0, 10)) {
    case 0: { diff::Rng rng(in.bits(2)); return diff::float_step(rng, h, x, y); }
    case 1: { diff::Rng rng(in.byte()); return diff::activation(rng, h); }
    case 2:
        switch (in.in(0, 5)) {
        case 0: return h + g;
        case 1: return h - g;
        case 2: return h * g;
        case 3: return h / (abs(g) + 0.5);
        case 4: return maximum(h, g);
        default: return minimum(h, g);
        }
    case 3: return reduction(in, p, h);
    case 4: return norm(in, p);
    case 5: return linear_op(in, p, h, g);
    case 6: return view(in, h);
    case 7: return combine(in, h, g);
    case 8: return where(x > y, h, g);
    case 9: return h * cast(cast(x * 4.0, in.pick({DType::i32, DType::i8})), p.dt) + clamp(g, -1.0, 1.0);
    default: return tanh(h) * constant(in, {std::max<std::int64_t>(last_static(h), 1)}, p.dt, -2.0, 2.0);
    }
}

Var int_op(Bytes& in, const Pool& p, const Var& m) {
    const Var h = p.any(in), g = p.any(in);
    switch (in.in(0, 10)) {
    case 0: return h + g;
    case 1: return h - g;
    case 2: return h * g;  // wraps like the dtype
    case 3: return h / g;  // truncates; x / 0 is 0
    case 4: return in.flag() ? maximum(h, g) : minimum(h, g);
    case 5: return in.in(0, 3) == 0 ? abs(h) : in.flag() ? -h : relu(h) + sign(g);
    case 6: return where(in.flag() ? h > g : logical_not(m), h, g);
    case 7: {
        const double lo = static_cast<double>(in.in(-30, 0));
        return clamp(h, lo, static_cast<double>(in.in(0, 30)));
    }
    case 8: return reduction(in, p, h);
    case 9: return view(in, h);
    default: return in.flag() ? combine(in, h, g) : cast(cast(h, in.pick({DType::f32, DType::i64, DType::i8})), p.dt);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    Bytes in(data, size);
    const bool floating = in.in(0, 4) != 0;
    const DType dt = floating ? in.pick({DType::f32, DType::f64, DType::f16, DType::bf16})
                              : in.pick({DType::i8, DType::u8, DType::i32, DType::i64});
    std::vector<ArgSpec> args;
    for (std::int64_t i = in.in(1, 3), k = 0; k < i; ++k)
        args.push_back(arg("x" + std::to_string(k), dt, read_dims(in, static_cast<int>(in.in(0, 3)))));
    args.push_back(arg("m", DType::boolean, read_dims(in, static_cast<int>(in.in(0, 2)))));
    const std::int64_t n_ops = in.in(1, 8);

    Graph g;
    const bool traced = attempt("trace", [&] {
        g = trace("fuzz", args, [&](const std::vector<Var>& vars) {
            Pool p{{vars.begin(), vars.end() - 1}, vars.size() - 1, dt};
            for (std::int64_t k = 0; k < n_ops; ++k) {
                Var r;
                std::string error;
                if (attempt("an op", [&] { r = floating ? float_op(in, p) : int_op(in, p, vars.back()); }, &error)) p.v.push_back(r);
                else KILN_FUZZ_LOG("the tracer rejects an op: " << error);
            }
            std::vector<Var> outs{p.v.back()};
            if (in.flag()) outs.push_back(p.any(in));
            return outs;
        });
    });
    if (!traced) return 0;

    std::vector<std::map<std::string, std::int64_t>> bindings(static_cast<std::size_t>(in.in(2, 3)));
    for (auto& b : bindings) b = {{"B", in.pick<std::int64_t>({0, 1, 2, 3, 5, 8, 13})}, {"S", in.pick<std::int64_t>({1, 2, 3, 4, 7, 16})}};
    diff::Case c{"fuzz", 0, g, diff::make_calls(args, bindings, in.bits(2), floating ? -2.0 : -20.0, floating ? 2.0 : 20.0), 4.0};

    KILN_FUZZ_LOG(diff::describe(c));
    // The interpreter first: a call it rejects (kiln::Error) ends the input.
    const Function fi = Engine(diff::interpreter_options()).load(g);
    for (const auto& call : c.calls) {
        std::vector<Tensor> out;
        std::string error;
        if (!attempt("the interpreter", [&] { out = fi(call); }, &error)) {
            KILN_FUZZ_LOG("the interpreter rejects a call: " << error);
            return 0;
        }
        std::vector<Shape> shapes, want;
        for (const Tensor& t : call) shapes.push_back(t.shape());
        KILN_FUZZ_CHECK(attempt("output_shapes", [&] { want = fi.output_shapes(shapes); }), "output_shapes failed\n" << diff::describe(c));
        for (std::size_t i = 0; i < out.size(); ++i)
            KILN_FUZZ_CHECK(out[i].shape() == want.at(i), "output " << i << " has shape " << fuzz::str(out[i].shape()) << ", output_shapes "
                                                                    << fuzz::str(want[i]) << "\n" << diff::describe(c));
    }
    for (int tier : {1, 2}) {  // (a tier the build or the host lacks compiles nothing: the runs agree)
        diff::Result r;
        std::string error;
        KILN_FUZZ_CHECK(attempt("a tier", [&] { r = diff::run(c, tier); }, &error),
                        "tier " << tier << " threw kiln::Error where the interpreter did not: " << error << "\n" << diff::describe(c));
        KILN_FUZZ_CHECK(r.mismatch.empty(), r.mismatch << "\n" << diff::describe(c));
        KILN_FUZZ_LOG("tier " << tier << (r.compiled ? " ran compiled code" : " compiled nothing") << ", agrees");
    }
    return 0;
}
