// The tracer: symbolic dims through shape ops, scalars, constants, printing of dims.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include <sstream>

using namespace kiln;

namespace {
std::string type_of(const Var& v) { return std::string(dtype_name(v.dtype())) + dims_to_string(v.dims()); }
}  // namespace

TEST_CASE("trace: symbolic dims survive reshape as products") {
    std::string merged, split_back, flat;
    Graph g = trace("attn_shapes", {arg("x", DType::f32, {dyn("B"), dyn("S"), 4, 16})}, [&](const std::vector<Var>& in) {
        Var x = in[0];
        Var m = reshape(x, {x.dim(0), x.dim(1), 64});
        merged = type_of(m);
        Var s = reshape(m, {m.dim(0), -1, 4, 16});
        split_back = type_of(s);
        Var f = flatten(x, 0, 1);
        flat = type_of(f);
        return std::vector<Var>{m, s, f};
    });
    CHECK(merged == "f32[?B,?S,64]");
    CHECK(split_back == "f32[?B,?S,4,16]");
    CHECK(flat == "f32[?B*?S,4,16]");
    Engine e(Options{});
    Function fn = e.load(g);
    auto out = fn({Tensor::randn({2, 3, 4, 16}, 1)});
    CHECK(out[0].shape() == Shape{2, 3, 64});
    CHECK(out[1].shape() == Shape{2, 3, 4, 16});
    CHECK(out[2].shape() == Shape{6, 4, 16});
    CHECK(out[0].to_doubles() == out[1].to_doubles());
}

TEST_CASE("trace: -1 that no product expresses becomes a fresh symbol solved at run time") {
    std::string t;
    Graph g = trace("fresh", {arg("x", DType::f32, {dyn("N")})}, [&](const std::vector<Var>& in) {
        Var r = reshape(in[0], {-1, 4});
        t = type_of(r);
        return r;
    });
    CHECK(t == "f32[?_1,4]");
    Function f = Engine(Options{}).load(g);
    CHECK(f({Tensor::zeros({12})})[0].shape() == Shape{3, 4});
    CHECK(f({Tensor::zeros({8})})[0].shape() == Shape{2, 4});
    CHECK_THROWS_WITH_AS(f({Tensor::zeros({7})}), doctest::Contains("cannot infer dim 0 of [?_1,4] for 7 elements"), Error);
    CHECK(f({Tensor::zeros({4})})[0].shape() == Shape{1, 4});  // still usable after the error
}

TEST_CASE("trace: printed dims show symbolic vs static") {
    Graph g = trace("p", {arg("x", DType::f32, {dyn("batch"), 784})}, [](const std::vector<Var>& in) { return relu(in[0]); });
    std::string text = g.to_string();
    CHECK(text.find("f32[?batch,784]") != std::string::npos);
    REQUIRE(g.inputs().size() == 1);
    CHECK(g.inputs()[0].name == "x");
    CHECK(g.inputs()[0].dims[0].is_symbol());
    CHECK(g.inputs()[0].dims[1] == Dim(784));
    REQUIRE(g.outputs().size() == 1);
    CHECK(g.outputs()[0].dtype == DType::f32);
}

TEST_CASE("trace: a double takes the other operand's dtype") {
    Graph g = trace("s", {arg("x", DType::f64, {3}), arg("i", DType::i32, {3})}, [](const std::vector<Var>& in) {
        return std::vector<Var>{in[0] * 2.5 + 1.0, in[1] + 2, 1.0 - in[0], where(in[0] > 0.0, in[0], 0.0)};
    });
    auto outs = g.outputs();
    CHECK(outs[0].dtype == DType::f64);
    CHECK(outs[1].dtype == DType::i32);
    CHECK(outs[3].dtype == DType::f64);
    Function f = Engine(Options{}).load(g);
    auto r = f({Tensor::from_vector<double>({1, -2, 3}, {3}), Tensor::from_vector<std::int32_t>({1, 2, 3}, {3})});
    CHECK(r[0].to_vector<double>() == std::vector<double>{3.5, -4, 8.5});
    CHECK(r[1].to_vector<int>() == std::vector<int>{3, 4, 5});
    CHECK(r[2].to_vector<double>() == std::vector<double>{0, 3, -2});
    CHECK(r[3].to_vector<double>() == std::vector<double>{1, 0, 3});
}

TEST_CASE("trace: captured tensors are snapshots") {
    Tensor w = Tensor::ones({2});
    Graph g = trace("c", {arg("x", DType::f32, {2})}, [&](const std::vector<Var>& in) { return in[0] * w; });
    w.data_as<float>()[0] = 100.0f;  // later writes do not change the graph
    Function f = Engine(Options{}).load(g);
    CHECK(f({Tensor::full({2}, 3.0)})[0].to_vector<float>() == std::vector<float>{3, 3});
}

TEST_CASE("trace: a Tensor used as a Var outside a trace is an error") {
    CHECK_THROWS_WITH_AS(Var(Tensor::ones({2})), doctest::Contains("used outside kiln::trace"), Error);
    Var kept;
    trace("leak", {arg("x", DType::f32, {2})}, [&](const std::vector<Var>& in) {
        kept = in[0];
        return in[0];
    });
    (void)kept;
    // A Var of one trace used in another.
    Var inner;
    CHECK_THROWS_AS(trace("other", {arg("y", DType::f32, {2})},
                          [&](const std::vector<Var>& in) {
                              Var a;
                              trace("nested", {arg("z", DType::f32, {2})}, [&](const std::vector<Var>& in2) {
                                  a = in2[0];
                                  return in2[0];
                              });
                              return in[0] + a;
                          }),
                    Error);
}

TEST_CASE("trace: argument names and symbolic names are checked") {
    auto body = [](const std::vector<Var>& in) { return in[0]; };
    CHECK_THROWS_WITH_AS(trace("d", {arg("x", DType::f32, {2}), arg("x", DType::f32, {2})}, body), doctest::Contains("argument name 'x' repeats"), Error);
    CHECK_THROWS_WITH_AS(trace("d", {arg("x", DType::f32, {-2})}, body), doctest::Contains("dims must be >= 0, got [-2]"), Error);
    CHECK_THROWS_WITH_AS(trace("d", {arg("x", DType::f32, {dyn("_hidden")})}, body), doctest::Contains("names may not start with '_'"), Error);
    CHECK_THROWS_WITH_AS(dyn("bad name"), doctest::Contains("may hold only letters, digits and '_'"), Error);
}

TEST_CASE("trace: linear with a constant weight pre-transposes it once") {
    Tensor w = Tensor::randn({3, 5}, 4), b = Tensor::randn({3}, 5);
    Graph g = trace("lin", {arg("x", DType::f32, {dyn("B"), 5})}, [&](const std::vector<Var>& in) { return linear(in[0], w, b); });
    CHECK(g.to_string().find("permute") == std::string::npos);
    Function f = Engine(Options{}).load(g);
    Tensor x = Tensor::randn({2, 5}, 6);
    Tensor y = f({x})[0];
    for (int i = 0; i < 2; ++i)
        for (int o = 0; o < 3; ++o) {
            double acc = b.item({o});
            for (int k = 0; k < 5; ++k) acc += x.item({i, k}) * w.item({o, k});
            CHECK(y.item({i, o}) == doctest::Approx(acc).epsilon(1e-5));
        }
}
