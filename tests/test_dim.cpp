// kiln::Dim as a polynomial in symbolic sizes: canonical forms, arithmetic against direct
// evaluation on random polynomials, text round trips, exact division, overflow, and the
// bindings that evaluate and solve such dims at run time.
#include <doctest/doctest.h>

#include <kiln/kiln.h>

#include "src/ir/bindings.h"

#include <map>
#include <random>
#include <string>

namespace {

using namespace kiln;

const char* const kNames[] = {"a", "b", "past", "seq"};

// A random polynomial of up to 3 terms of degree up to 2, small coefficients.
Dim random_dim(std::mt19937_64& rng) {
    std::uniform_int_distribution<int> nterms(0, 3), deg(1, 2), coeff(-5, 7), name(0, 3);
    Dim d(coeff(rng));
    for (int t = nterms(rng); t > 0; --t) {
        Dim term(coeff(rng));
        for (int k = deg(rng); k > 0; --k) term = term * Dim::symbol(kNames[name(rng)]);
        d = d + term;
    }
    return d;
}

// The value of d computed term by term, independently of ir::Bindings.
std::int64_t direct(const Dim& d, const std::map<std::string, std::int64_t>& v) {
    std::int64_t r = d.constant();
    for (const Dim::Term& t : d.terms()) {
        std::int64_t p = t.coeff;
        for (const auto& s : t.symbols) p *= v.at(s);
        r += p;
    }
    return r;
}

}  // namespace

TEST_CASE("dim: sums and differences are canonical") {
    const Dim past = dyn("past"), seq = dyn("seq");
    CHECK((past + seq) == (seq + past));
    CHECK((past + seq).to_string() == "?past+?seq");
    CHECK(((past + seq) - seq) == past);
    CHECK(((past + seq) - past - seq) == Dim(0));
    CHECK(((past + seq) - past - seq).is_static());
    CHECK((seq - Dim(1)).to_string() == "?seq-1");
    CHECK((Dim(0) - seq).to_string() == "-?seq");
    CHECK((Dim(2) * past * seq + Dim(3)).to_string() == "2*?past*?seq+3");
    CHECK(((past + seq) * Dim(4)).to_string() == "4*?past+4*?seq");
    CHECK(((past + Dim(1)) * (past - Dim(1))).to_string() == "?past*?past-1");
    CHECK((past + seq).symbol_names() == std::vector<std::string>{"past", "seq"});
    CHECK_FALSE((past + seq).is_monomial());
    CHECK((Dim(4) * past).is_monomial());
    CHECK((Dim(4) * past).coeff() == 4);
    CHECK((past + seq).surely_nonnegative());
    CHECK_FALSE((past - seq).surely_nonnegative());
    CHECK_FALSE((past + Dim(-1)).surely_nonnegative());
}

TEST_CASE("dim: exact division by a constant") {
    const Dim a = dyn("a"), b = dyn("b");
    CHECK(((Dim(4) * a + Dim(8) * b + Dim(12)).div_exact(4)) == std::optional<Dim>(a + Dim(2) * b + Dim(3)));
    CHECK_FALSE((Dim(4) * a + Dim(2)).div_exact(4).has_value());
    CHECK_FALSE(a.div_exact(2).has_value());
    CHECK_FALSE(a.div_exact(0).has_value());
    CHECK(Dim(-6).div_exact(3) == std::optional<Dim>(Dim(-2)));
    CHECK(Dim(INT64_MIN).div_exact(-1) == std::nullopt);
}

TEST_CASE("dim: random polynomials agree with direct evaluation, print and parse back") {
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<std::int64_t> val(0, 40);
    for (int i = 0; i < 2000; ++i) {
        const Dim x = random_dim(rng), y = random_dim(rng);
        std::map<std::string, std::int64_t> v;
        ir::Bindings b;
        for (const char* n : kNames) {
            v[n] = val(rng);
            b.bind(n, v[n]);
        }
        CAPTURE(x.to_string());
        CAPTURE(y.to_string());
        CHECK(*b.eval(x + y) == direct(x, v) + direct(y, v));
        CHECK(*b.eval(x - y) == direct(x, v) - direct(y, v));
        CHECK(*b.eval(x * y) == direct(x, v) * direct(y, v));
        CHECK(Dim::parse(x.to_string()) == x);
        CHECK(Dim::parse((x * y).to_string()) == x * y);
        CHECK((x + y) - y == x);
        CHECK(((x < y) || (y < x)) == !(x == y));
    }
}

TEST_CASE("dim: malformed text and overflow are kiln::Errors") {
    for (const char* bad : {"", "?", "?a+", "-", "?a--3", "3*", "?a+?", "1x", "--3", "?a+-"})
        CHECK_THROWS_AS(Dim::parse(bad), kiln::Error);
    CHECK(Dim::parse("-3") == Dim(-3));
    CHECK(Dim::parse("?a-3") == dyn("a") - Dim(3));
    CHECK(Dim::parse("-2*?a+?b") == dyn("b") - Dim(2) * dyn("a"));
    CHECK(Dim::parse("-9223372036854775808") == Dim(INT64_MIN));
    CHECK_THROWS_AS(Dim(INT64_MAX) * dyn("a") + Dim(INT64_MAX) * dyn("a"), kiln::Error);
    CHECK_THROWS_AS(Dim(INT64_MAX) + Dim(1), kiln::Error);
    CHECK_THROWS_AS(Dim(INT64_MAX / 2 + 1) * dyn("a") * Dim(2), kiln::Error);
}

TEST_CASE("dim: bindings solve the one unbound symbol of a linear dim") {
    ir::Bindings b;
    b.bind("past", 5);
    const Dim total = dyn("past") + dyn("seq");
    std::string why;
    REQUIRE(b.unify({total}, {12}, &why));
    CHECK(*b.get("seq") == 7);
    CHECK(b.unify({total, Dim(2) * dyn("seq") + Dim(1)}, {12, 15}, &why));
    CHECK_FALSE(b.unify({total}, {13}, &why));
    CHECK(why.find("expected ?past+?seq = 12") != std::string::npos);

    ir::Bindings c;
    c.bind("past", 5);
    CHECK_FALSE(c.unify({dyn("past") + dyn("seq")}, {3}, &why));  // ?seq would be -2
    CHECK_FALSE(c.unify({dyn("x") * dyn("x")}, {9}, &why));        // not linear in ?x
    CHECK_FALSE(c.unify({dyn("x") + dyn("y")}, {9}, &why));        // two unbound symbols
    CHECK(c.unify({Dim(3) * dyn("x") - Dim(1)}, {8}, &why));
    CHECK(*c.get("x") == 3);
}

TEST_CASE("dim: concatenating symbolic dims gives their sum, in the graph and its text") {
    Graph g = trace("kv", {arg("past_k", DType::f32, {dyn("past"), 4}), arg("k", DType::f32, {dyn("seq"), 4})},
                    [](const std::vector<Var>& x) { return std::vector<Var>{concat({x[0], x[1]}, 0)}; });
    std::string text = g.to_string();
    CHECK(text.find("f32[?past+?seq,4]") != std::string::npos);
    CHECK(Graph::parse(text).to_string() == text);
    CHECK(Graph::parse(text).hash() == g.hash());

    Engine e;
    Function f = e.load(g);
    for (auto [p, s] : {std::pair{0, 3}, {5, 1}, {2, 2}}) {
        Tensor a = Tensor::full({p, 4}, 1.0), k = Tensor::full({s, 4}, 2.0);
        std::vector<Tensor> out = f({a, k});
        CHECK(out[0].shape() == Shape{p + s, 4});
    }
}
