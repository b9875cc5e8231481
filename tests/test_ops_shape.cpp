// Shape and data-movement ops at tier 0 against the reference, on every dtype (they move
// values without arithmetic, so results must be exact): reshape (with -1 and symbolic dims),
// permute, transpose, flatten, squeeze/unsqueeze, broadcast_to, slice (Python semantics),
// concat, split, gather (NumPy take, i32/i64 indices, negative indices), pad.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "reference.h"

#include <cstdint>
#include <string>
#include <vector>

namespace {

using kiln::Dim;
using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
using kiln::Var;
using ref::RTensor;
using Ints = std::vector<std::int64_t>;

// Runs a one-input graph with several outputs and compares each with its reference, exactly.
void check_outputs(const char* name, const Tensor& x, const std::function<std::vector<Var>(const Var&)>& body,
                   const std::vector<std::pair<std::string, RTensor>>& want) {
    CAPTURE(name);
    INFO("dtype = ", ref::dname(x.dtype()));
    INFO("x ", ref::shape_str(x.shape()));
    kiln::Graph g = kiln::trace(name, {ref::arg_like("x", x)},
                                [&](const std::vector<Var>& in) { return body(in[0]); });
    auto out = ref::run_graph(g, {x});
    REQUIRE(out.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) ref::check_close(out[i], want[i].second, x.dtype(), {}, want[i].first);
}

Tensor input(const Shape& s, std::uint64_t seed, DType dt) { return ref::random_input(s, seed, dt, -50, 50); }

}  // namespace

TEST_CASE("ops.shape: reshape, permute, transpose, flatten on every dtype") {
    std::uint64_t seed = 50000;
    for (DType dt : ref::all_dtypes()) {
        Tensor x = input({2, 3, 4}, ++seed, dt);
        RTensor r = ref::from_kiln(x);
        check_outputs(
            "reshape", x,
            [](const Var& v) {
                return std::vector<Var>{kiln::reshape(v, {4, 6}), kiln::reshape(v, {-1, 2}), kiln::reshape(v, {24}),
                                        kiln::reshape(v, {v.dim(0), -1}), kiln::reshape(v, {v.dim(0) * v.dim(1), 2, 2}),
                                        kiln::reshape(v, {1, 2, 1, 12, 1})};
            },
            {{"[4,6]", ref::reshape(r, {4, 6})},
             {"[-1,2]", ref::reshape(r, {-1, 2})},
             {"[24]", ref::reshape(r, {24})},
             {"[d0,-1]", ref::reshape(r, {2, -1})},
             {"[d0*d1,2,2]", ref::reshape(r, {6, 2, 2})},
             {"[1,2,1,12,1]", ref::reshape(r, {1, 2, 1, 12, 1})}});
        check_outputs(
            "permute", x,
            [](const Var& v) {
                return std::vector<Var>{kiln::permute(v, {2, 0, 1}), kiln::permute(v, {0, 1, 2}), kiln::transpose(v, 0, -1),
                                        kiln::transpose(v, 1, 2), kiln::permute(v, {1, 2, 0})};
            },
            {{"perm 2,0,1", ref::permute(r, {2, 0, 1})},
             {"perm identity", r},
             {"transpose 0,-1", ref::transpose(r, 0, -1)},
             {"transpose 1,2", ref::transpose(r, 1, 2)},
             {"perm 1,2,0", ref::permute(r, {1, 2, 0})}});
        check_outputs(
            "flatten", x,
            [](const Var& v) {
                return std::vector<Var>{kiln::flatten(v), kiln::flatten(v, 0, 1), kiln::flatten(v, 0, -1),
                                        kiln::flatten(v, -2, -1), kiln::flatten(v, 1, 1)};
            },
            {{"flatten default", ref::flatten(r, 1, -1)},
             {"flatten 0,1", ref::flatten(r, 0, 1)},
             {"flatten all", ref::flatten(r, 0, -1)},
             {"flatten -2,-1", ref::flatten(r, -2, -1)},
             {"flatten 1,1", ref::flatten(r, 1, 1)}});
    }
    // A negative entry in perm counts from the back.
    Tensor x = input({2, 3, 4}, 50100, DType::f32);
    check_outputs("permute_negative", x, [](const Var& v) { return std::vector<Var>{kiln::permute(v, {-1, 0, 1})}; },
                  {{"perm -1,0,1", ref::permute(ref::from_kiln(x), {2, 0, 1})}});
    // Zero-size and strided inputs.
    Tensor z = Tensor::zeros({0, 6}, DType::f32);
    check_outputs("reshape_empty", z,
                  [](const Var& v) { return std::vector<Var>{kiln::reshape(v, {0, 2, 3}), kiln::permute(v, {1, 0})}; },
                  {{"[0,2,3]", ref::reshape(ref::from_kiln(z), {0, 2, 3})}, {"perm", ref::permute(ref::from_kiln(z), {1, 0})}});
    Tensor s = Tensor::randn({4, 6}, 50101).transpose(0, 1);  // [6,4]
    check_outputs("reshape_view", s,
                  [](const Var& v) { return std::vector<Var>{kiln::reshape(v, {3, 8}), kiln::flatten(v, 0)}; },
                  {{"[3,8]", ref::reshape(ref::from_kiln(s), {3, 8})}, {"flatten", ref::flatten(ref::from_kiln(s), 0, -1)}});
}

TEST_CASE("ops.shape: squeeze, unsqueeze, broadcast_to on every dtype") {
    std::uint64_t seed = 51000;
    for (DType dt : ref::all_dtypes()) {
        Tensor x = input({1, 3, 1, 4}, ++seed, dt);
        RTensor r = ref::from_kiln(x);
        check_outputs(
            "squeeze", x,
            [](const Var& v) {
                return std::vector<Var>{kiln::squeeze(v), kiln::squeeze(v, {0}), kiln::squeeze(v, {-2}),
                                        kiln::squeeze(v, {0, 2}), kiln::unsqueeze(v, 0), kiln::unsqueeze(v, {0, 5}),
                                        kiln::unsqueeze(v, -1)};
            },
            {{"squeeze all", ref::squeeze(r, {})},
             {"squeeze 0", ref::squeeze(r, {0})},
             {"squeeze -2", ref::squeeze(r, {-2})},
             {"squeeze 0,2", ref::squeeze(r, {0, 2})},
             {"unsqueeze 0", ref::unsqueeze(r, {0})},
             {"unsqueeze 0,5", ref::unsqueeze(r, {0, 5})},
             {"unsqueeze -1", ref::unsqueeze(r, {-1})}});
        Tensor y = input({3, 1}, ++seed, dt);
        RTensor ry = ref::from_kiln(y);
        check_outputs(
            "broadcast_to", y,
            [](const Var& v) {
                return std::vector<Var>{kiln::broadcast_to(v, {2, 3, 4}), kiln::broadcast_to(v, {3, 1}),
                                        kiln::broadcast_to(v, {0, 3, 7})};
            },
            {{"[2,3,4]", ref::broadcast_to(ry, {2, 3, 4})},
             {"[3,1]", ry},
             {"[0,3,7]", ref::broadcast_to(ry, {0, 3, 7})}});
    }
}

TEST_CASE("ops.shape: slice with Python semantics (negative, clamped, step, empty) on every dtype") {
    std::uint64_t seed = 52000;
    for (DType dt : ref::all_dtypes()) {
        Tensor x = input({5, 9}, ++seed, dt);
        RTensor r = ref::from_kiln(x);
        check_outputs(
            "slice", x,
            [](const Var& v) {
                return std::vector<Var>{kiln::slice(v, 1, 2, 7),     kiln::slice(v, 1, -3),       kiln::slice(v, 1, 0, INT64_MAX, 2),
                                        kiln::slice(v, 0, -100, 100), kiln::slice(v, 1, 7, 2),     kiln::slice(v, -1, 1, -1, 3),
                                        kiln::slice(v, -2, 1, 4, 5),  kiln::slice(v, 0, 4, 5, 1), kiln::slice(v, 1, 9, 20)};
            },
            {{"1: 2..7", ref::slice(r, 1, 2, 7, 1)},
             {"1: -3..", ref::slice(r, 1, -3, INT64_MAX, 1)},
             {"1: ::2", ref::slice(r, 1, 0, INT64_MAX, 2)},
             {"0: -100..100 clamped", ref::slice(r, 0, -100, 100, 1)},
             {"1: 7..2 empty", ref::slice(r, 1, 7, 2, 1)},
             {"-1: 1..-1 step 3", ref::slice(r, -1, 1, -1, 3)},
             {"-2: 1..4 step 5", ref::slice(r, -2, 1, 4, 5)},
             {"0: 4..5", ref::slice(r, 0, 4, 5, 1)},
             {"1: 9..20 empty", ref::slice(r, 1, 9, 20, 1)}});
    }
    // Symbolic batch: slicing the static axis of a dynamic tensor.
    kiln::Graph g = kiln::trace("slice_dyn", {kiln::arg("x", DType::f32, {kiln::dyn("B"), 8})},
                                [](const std::vector<Var>& in) {
                                    return std::vector<Var>{kiln::slice(in[0], 1, 1, 7, 2), kiln::slice(in[0], 0, 1)};
                                });
    kiln::Function f = ref::interp_engine().load(g);
    for (std::int64_t b : {3, 0, 1, 6}) {
        CAPTURE(b);
        Tensor x = Tensor::randn({b, 8}, 52100 + static_cast<std::uint64_t>(b));
        auto out = f({x});
        REQUIRE(out.size() == 2);
        ref::check_close(out[0], ref::slice(ref::from_kiln(x), 1, 1, 7, 2), DType::f32, {}, "static axis");
        ref::check_close(out[1], ref::slice(ref::from_kiln(x), 0, 1, INT64_MAX, 1), DType::f32, {}, "dynamic axis");
    }
}

TEST_CASE("ops.shape: concat and split on every dtype") {
    std::uint64_t seed = 53000;
    for (DType dt : ref::all_dtypes()) {
        INFO("dt = ", ref::dname(dt));
        Tensor a = input({2, 3}, ++seed, dt), b = input({2, 1}, ++seed, dt), c = input({2, 0}, ++seed, dt),
               d = input({4, 3}, ++seed, dt);
        kiln::Graph g = kiln::trace("concat", {ref::arg_like("a", a), ref::arg_like("b", b), ref::arg_like("c", c),
                                               ref::arg_like("d", d)},
                                    [](const std::vector<Var>& in) {
                                        return std::vector<Var>{kiln::concat({in[0], in[1], in[2]}, 1),
                                                                kiln::concat({in[0], in[3], in[0]}, -2),
                                                                kiln::concat({in[1]}, 0)};
                                    });
        auto out = ref::run_graph(g, {a, b, c, d});
        REQUIRE(out.size() == 3);
        RTensor ra = ref::from_kiln(a), rb = ref::from_kiln(b), rc = ref::from_kiln(c), rd = ref::from_kiln(d);
        ref::check_close(out[0], ref::concat({ra, rb, rc}, 1), dt, {}, "concat axis 1");
        ref::check_close(out[1], ref::concat({ra, rd, ra}, -2), dt, {}, "concat axis -2");
        ref::check_close(out[2], rb, dt, {}, "concat of one");

        Tensor x = input({5, 6}, ++seed, dt);
        kiln::Graph g2 = kiln::trace("split", {ref::arg_like("x", x)}, [](const std::vector<Var>& in) {
            std::vector<Var> outs = kiln::split(in[0], Ints{2, 0, 3}, 0);
            for (const Var& v : kiln::split(in[0], 3, -1)) outs.push_back(v);
            return outs;
        });
        auto parts = ref::run_graph(g2, {x});
        REQUIRE(parts.size() == 6);
        RTensor rx = ref::from_kiln(x);
        auto want = ref::split(rx, {2, 0, 3}, 0);
        auto want2 = ref::split_sections(rx, 3, -1);
        want.insert(want.end(), want2.begin(), want2.end());
        for (std::size_t i = 0; i < 6; ++i) ref::check_close(parts[i], want[i], dt, {}, "split part " + std::to_string(i));
    }
}

TEST_CASE("ops.shape: gather with i32 and i64 indices (negative ones wrap), every axis and dtype") {
    std::uint64_t seed = 54000;
    for (DType dt : ref::all_dtypes())
        for (DType it : {DType::i32, DType::i64, DType::i8}) {
            INFO("dt = ", ref::dname(dt));
            INFO("it = ", ref::dname(it));
            Tensor x = input({5, 4, 3}, ++seed, dt);
            RTensor r = ref::from_kiln(x);
            Tensor i0 = ref::to_kiln(ref::make({4}, {0, 4, -1, 2}), it);           // axis 0, n = 5
            Tensor i1 = ref::to_kiln(ref::make({2, 3}, {3, -4, 0, 1, 1, -2}), it);   // axis 1 (-2), n = 4
            Tensor i2 = ref::to_kiln(ref::make({}, {-3}), it);                       // axis 2, a scalar index
            Tensor i3 = ref::to_kiln(ref::make({0}, {}), it);                        // no indices
            kiln::Graph g = kiln::trace("gather",
                                        {ref::arg_like("x", x), ref::arg_like("i0", i0), ref::arg_like("i1", i1),
                                         ref::arg_like("i2", i2), ref::arg_like("i3", i3)},
                                        [](const std::vector<Var>& in) {
                                            return std::vector<Var>{kiln::gather(in[0], in[1], 0), kiln::gather(in[0], in[2], -2),
                                                                    kiln::gather(in[0], in[3], 2), kiln::gather(in[0], in[4], 1)};
                                        });
            auto out = ref::run_graph(g, {x, i0, i1, i2, i3});
            REQUIRE(out.size() == 4);
            ref::check_close(out[0], ref::gather(r, ref::from_kiln(i0), 0), dt, {}, "gather axis 0");
            ref::check_close(out[1], ref::gather(r, ref::from_kiln(i1), -2), dt, {}, "gather axis -2, 2-D indices");
            ref::check_close(out[2], ref::gather(r, ref::from_kiln(i2), 2), dt, {}, "gather axis 2, scalar index");
            ref::check_close(out[3], ref::gather(r, ref::from_kiln(i3), 1), dt, {}, "gather no indices");
        }
    // Embedding lookup: a constant table, dynamic token ids.
    Tensor table = Tensor::randn({10, 4}, 54100);
    kiln::Graph g = kiln::trace("embed", {kiln::arg("ids", DType::i64, {kiln::dyn("B"), kiln::dyn("S")})},
                                [&](const std::vector<Var>& in) -> Var { return kiln::gather(table, in[0], 0); });
    kiln::Function f = ref::interp_engine().load(g);
    for (auto [b, s] : {std::pair<std::int64_t, std::int64_t>{2, 3}, {0, 5}, {1, 1}, {4, 0}}) {
        CAPTURE(b);
        CAPTURE(s);
        Tensor ids = Tensor::rand({b, s}, 54200 + static_cast<std::uint64_t>(b * 10 + s), DType::i64, -10, 10);
        ref::check_close(f({ids})[0], ref::gather(ref::from_kiln(table), ref::from_kiln(ids), 0), DType::f32, {}, "embed");
    }
}

TEST_CASE("ops.shape: pad with per-axis (before, after) amounts and a constant value, every dtype") {
    std::uint64_t seed = 55000;
    for (DType dt : ref::all_dtypes()) {
        INFO("dt = ", ref::dname(dt));
        Tensor x = input({2, 3}, ++seed, dt);
        RTensor r = ref::from_kiln(x);
        double value = dt == DType::boolean ? 1.0 : (kiln::is_floating(dt) ? -1.5 : 7.0);
        check_outputs(
            "pad", x,
            [&](const Var& v) {
                return std::vector<Var>{kiln::pad(v, {1, 0, 2, 3}), kiln::pad(v, {0, 2, 1, 1}, value),
                                        kiln::pad(v, {0, 0, 0, 0}, value)};
            },
            {{"pad 1,0,2,3", ref::pad(r, {1, 0, 2, 3}, 0.0)},
             {"pad 0,2,1,1 value", ref::pad(r, {0, 2, 1, 1}, value)},
             {"pad nothing", r}});
    }
    Tensor z = Tensor::zeros({0, 2}, DType::f32);
    check_outputs("pad_empty", z, [](const Var& v) { return std::vector<Var>{kiln::pad(v, {1, 1, 0, 1}, 3.0)}; },
                  {{"pad of empty", ref::pad(ref::from_kiln(z), {1, 1, 0, 1}, 3.0)}});
    Tensor s = Tensor::randn({3, 4}, 55100).transpose(0, 1);  // strided [4,3]
    check_outputs("pad_view", s, [](const Var& v) { return std::vector<Var>{kiln::pad(v, {2, 1, 0, 2}, -2.0)}; },
                  {{"pad of a view", ref::pad(ref::from_kiln(s), {2, 1, 0, 2}, -2.0)}});
}
