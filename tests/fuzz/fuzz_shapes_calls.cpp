// Fuzz target (a), second part: the tensor that fuzz_shapes.cpp made, passed to two traced
// functions (an elementwise graph and an MLP with a symbolic batch dim) loaded on the
// interpreter and with tier 1 forced. Function::output_shapes and warmup, given the tensor's
// shapes or any dims read from the input, must reject what a call would reject (and accept small
// valid shapes); a call must return outputs of those shapes or throw kiln::Error, and both
// engines must agree.
#include "fuzz_util.h"

#include "tests/differential.h"

#include <cmath>

using namespace kiln;
using fuzz::attempt;
using fuzz::Bytes;
using fuzz::str;

namespace {

// The same graph on the interpreter and with tier 1 forced (compiles on the calling thread).
struct Fn {
    Function interp, jit;
};

Fn load(const Graph& g) {
    static Engine interp(test::diff::interpreter_options()), jit(test::diff::forced_tier_options(1));
    return {interp.load(g), jit.load(g)};
}

// x f32[?n,?m], y f32[?m] -> relu(x) * 2 + y
const Fn& elementwise() {
    static const Fn f = load(trace("ew", {arg("x", DType::f32, {dyn("n"), dyn("m")}), arg("y", DType::f32, {dyn("m")})},
                                   [](const std::vector<Var>& in) -> std::vector<Var> { return {relu(in[0]) * 2.0 + in[1]}; }));
    return f;
}

// x f32[?b,8] -> softmax(linear(relu(linear(x, W1[16,8], b1)), W2[4,16], b2))
const Fn& mlp() {
    static const Tensor w1 = Tensor::rand({16, 8}, 1, DType::f32, -0.5, 0.5), b1 = Tensor::rand({16}, 2);
    static const Tensor w2 = Tensor::rand({4, 16}, 3, DType::f32, -0.5, 0.5), b2 = Tensor::rand({4}, 4);
    static const Fn f = load(trace("mlp", {arg("x", DType::f32, {dyn("b"), 8})}, [](const std::vector<Var>& in) {
        return std::vector<Var>{softmax(linear(relu(linear(in[0], w1, b1)), w2, b2), -1)};
    }));
    return f;
}

bool small(const Shape& s, std::int64_t limit) { return fuzz::count(s) >= 0 && fuzz::count(s) <= limit; }

// The output shapes the rules give for these input shapes, or nothing when a call must fail.
// `must_work` says whether they (and every intermediate) are small enough that a call must work.
std::optional<std::vector<Shape>> expected_shapes(bool is_mlp, const std::vector<Shape>& in, bool* must_work) {
    *must_work = false;
    if (is_mlp) {  // the widest value is the [b,16] f32 hidden layer
        if (in.size() != 1 || in[0].size() != 2 || in[0][1] != 8 || !fuzz::dense_fits({in[0][0], 16}, DType::f32))
            return std::nullopt;
        *must_work = in[0][0] <= fuzz::kMaxElements;
        return std::vector<Shape>{{in[0][0], 4}};
    }
    if (in.size() != 2 || in[0].size() != 2 || in[1].size() != 1 || in[1][0] != in[0][1] || !fuzz::dense_fits(in[0], DType::f32))
        return std::nullopt;
    *must_work = small(in[0], fuzz::kMaxElements) && in[0][0] <= fuzz::kMaxElements && in[0][1] <= fuzz::kMaxElements;
    return std::vector<Shape>{in[0]};
}

// Inputs whose values every tier must treat alike (finite and moderate).
bool moderate(const std::vector<Tensor>& inputs) {
    for (const Tensor& t : inputs)
        for (double v : t.to_doubles())
            if (!(std::fabs(v) <= 1e4)) return false;
    return true;
}

}  // namespace

void fuzz_calls(Bytes& in, const Tensor& t, bool readable) {
    const bool is_mlp = in.flag();
    const Fn& f = is_mlp ? mlp() : elementwise();
    std::vector<Tensor> inputs{t};
    switch (in.in(0, 3)) {
    case 0:  // the matching second input (or a first extra one for the MLP)
        if (t.rank() >= 1 && t.dim(-1) >= 0 && t.dim(-1) <= fuzz::kMaxElements)
            inputs.push_back(Tensor::full({t.dim(-1)}, 0.5));
        break;
    case 1: inputs.push_back(t); break;
    case 2: inputs.push_back(Tensor::zeros({}).broadcast_to({in.extent() & INT64_MAX})); break;
    default: break;
    }
    if (!is_mlp && inputs.size() == 2 && in.flag()) inputs.pop_back();
    std::vector<Shape> shapes;
    for (const Tensor& x : inputs) shapes.push_back(x.shape());
    const bool shapes_only = in.in(0, 3) == 0;  // output_shapes and warmup of any dims, negative ones too
    if (shapes_only)
        for (Shape& sh : shapes)
            for (std::int64_t& d : sh) d = in.extent();
    std::string names = is_mlp ? "mlp(" : "elementwise(";
    for (const Shape& s : shapes) names += str(s) + " ";
    names += ")";

    bool must_work = false;
    const auto want = expected_shapes(is_mlp, shapes, &must_work);
    std::vector<Shape> got;
    const bool accepted = attempt("output_shapes", [&] { got = f.interp.output_shapes(shapes); });
    KILN_FUZZ_LOG(names << (shapes_only ? " (shapes only)" : "") << ": output_shapes " << (accepted ? "accepted" : "rejected"));
    KILN_FUZZ_CHECK(accepted || !must_work, "output_shapes rejected the valid " << names);
    KILN_FUZZ_CHECK(!accepted || want, "output_shapes accepted " << names << ", which a call must reject");
    if (accepted) KILN_FUZZ_CHECK(got == *want, "output_shapes of " << names << " gave " << str(got.at(0)));
    if (!accepted || (must_work && in.flag() && shapes[0].at(0) <= 64)) {
        const bool warmed = attempt("warmup", [&] { f.jit.warmup({shapes}); });
        KILN_FUZZ_LOG(names << ": warmup " << (warmed ? "done" : "rejected"));
        KILN_FUZZ_CHECK(warmed == accepted, "warmup " << (warmed ? "accepted" : "rejected") << " " << names
                                                       << ", which output_shapes " << (accepted ? "accepted" : "rejected"));
    }

    if (shapes_only) return;
    if (!accepted) {  // the call must fail before it allocates anything
        KILN_FUZZ_CHECK(!attempt("call", [&] { (void)f.interp(inputs); }), "a call accepted " << names);
        return;
    }
    if (!must_work || !readable || !small(got[0], std::int64_t{1} << 16)) return;
    bool typed = true;  // what only a call checks: every input defined, of dtype f32
    for (const Tensor& x : inputs) typed = typed && x.defined() && x.dtype() == DType::f32;
    std::vector<Tensor> a, b;
    const bool ran = attempt("call on the interpreter", [&] { a = f.interp(inputs); });
    KILN_FUZZ_LOG(names << ": the call " << (ran ? "ran" : "threw kiln::Error"));
    KILN_FUZZ_CHECK(ran == typed, "the interpreter " << (ran ? "accepted" : "rejected") << " " << names);
    KILN_FUZZ_CHECK(attempt("call on tier 1", [&] { b = f.jit(inputs); }) == ran, "the tiers disagree on accepting " << names);
    if (!ran) return;
    KILN_FUZZ_CHECK(a.size() == 1 && b.size() == 1 && a[0].shape() == got[0] && b[0].shape() == got[0],
                    names << ": the outputs' shapes differ from output_shapes'");
    if (moderate(inputs)) {
        const std::string d = test::diff::compare(b[0], a[0], 4.0);
        KILN_FUZZ_CHECK(d.empty(), names << ": tier 1 and the interpreter disagree: " << d);
    }
    // run() into caller-owned outputs: the right shape works, a wrong one is a kiln::Error.
    std::vector<Tensor> out{Tensor::empty(got[0])};
    KILN_FUZZ_CHECK(attempt("run", [&] { f.interp.run(inputs, out); }), "run into " << str(got[0]) << " failed: " << names);
    KILN_FUZZ_CHECK(test::diff::compare(out[0], a[0], 1.0).empty(), names << ": run() and operator() disagree");
    Shape wrong = got[0];
    wrong.back() += 1;
    std::vector<Tensor> bad{Tensor::empty(wrong)};
    KILN_FUZZ_CHECK(!attempt("run", [&] { f.interp.run(inputs, bad); }), "run into " << str(wrong) << " worked: " << names);
}
