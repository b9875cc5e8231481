// Ops whose sizes come from symbolic dims: narrow (a window of one axis, start and length
// possibly symbolic, e.g. a KV cache's causal mask) and arange (position ids). Each is checked
// against the naive reference (tests/reference.h) on the interpreter, and through kiln::Engine
// at tiers 1 and 2 (forced; a tier the build or host lacks is skipped) at several input
// shapes, where narrow is a view inside compiled groups; out-of-range windows fail the call;
// traced graphs round-trip through the text IR.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "differential.h"
#include "have_tier.h"
#include "jit/exec/pipeline.h"
#include "error_of.h"
#include "reference.h"
#include "reference_kir.h"
#include "src/ir/ir.h"
#include "src/kir/kir.h"
#include "tiers/gpu/gpu_source.h"

#include <array>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

namespace diff = kiln::test::diff;
using kiln::Dim;
using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
using kiln::Var;
using ref::RTensor;
using Calls = std::vector<std::vector<Tensor>>;
using Want = std::function<std::vector<RTensor>(const std::vector<Tensor>&)>;

Tensor input(const Shape& s, std::uint64_t seed, DType dt) { return ref::random_input(s, seed, dt, -50, 50); }

using kiln::test::error_of;

// The plan's groups that hold a node of `op`.
std::vector<std::string> groups_with(const kiln::Graph& g, kiln::ir::Op op) {
    const auto plan = kiln::jit::lower_function(g.impl());
    std::vector<std::string> names;
    for (const auto& gr : plan->groups)
        for (auto v : gr->group.nodes)
            if (g.impl()->nodes[static_cast<std::size_t>(v)].op == op) {
                names.push_back(gr->group.name);
                break;
            }
    return names;
}

// Runs `g` on every call on the interpreter, checking its outputs against `want` (exactly for
// integers and booleans), then at each compiling tier the build has against the interpreter
// (tests/differential.h). With `fused` set, each group holding a narrow must be a compiled
// (non-opaque) group that ran compiled code at that tier.
void check_everywhere(const kiln::Graph& g, const Calls& calls, const Want& want, bool fused, double tol_scale = 1.0) {
    kiln::Function f0 = kiln::Engine(diff::interpreter_options()).load(g);
    for (std::size_t k = 0; k < calls.size(); ++k) {
        CAPTURE(k);
        const std::vector<Tensor> got = f0(calls[k]);
        const std::vector<RTensor> w = want(calls[k]);
        REQUIRE(got.size() == w.size());
        for (std::size_t o = 0; o < w.size(); ++o)
            ref::check_close(got[o], w[o], got[o].dtype(), ref::tol_for(got[o].dtype(), tol_scale), "output " + std::to_string(o));
    }
    const std::vector<std::string> narrow_groups = groups_with(g, kiln::ir::Op::narrow);
    if (fused) REQUIRE(!narrow_groups.empty());
    for (int tier : {1, 2}) {
        if (kiln::test::lacks_tier(tier)) continue;
        CAPTURE(tier);
        diff::Case c{"dynamic", 0, g, calls, tol_scale};
        const diff::Result r = diff::run(c, tier);
        CHECK_MESSAGE(r.mismatch.empty(), r.mismatch << "\n" << diff::describe(c));
        if (!fused) continue;
        for (const std::string& name : narrow_groups) {
            CAPTURE(name);
            bool found = false;
            for (const kiln::GroupStats& gs : r.stats.groups) {
                if (gs.name != name) continue;
                found = true;
                INFO(r.stats.to_json());
                CHECK(gs.kind != "opaque");
                CHECK(gs.tier == tier);
                CHECK(gs.compiled_calls > 0);
            }
            CHECK(found);
        }
        CHECK(r.stats.compile_failures == 0);
    }
}

// A lower-triangular (causal) mask [1, 1, n, n]: true where column <= row.
Tensor causal_mask(std::int64_t n) {
    std::vector<bool> v;
    for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < n; ++j) v.push_back(j <= i);
    return Tensor::from_vector<bool>(v, {1, 1, n, n});
}

}  // namespace

TEST_CASE("ops.dynamic: narrow matches the reference on random shapes and axes, every dtype, static windows") {
    std::mt19937_64 rng(56000);
    std::uint64_t seed = 56000;
    for (DType dt : ref::all_dtypes())
        for (int it = 0; it < 4; ++it) {
            const int rank = 1 + static_cast<int>(rng() % 4);
            const Shape s = ref::random_shape(rng, rank, {1, 2, 3, 5, 7});
            const auto axis = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rank));
            const std::int64_t n = s[static_cast<std::size_t>(axis)];
            const auto start = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n + 1));
            const auto length = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n - start + 1));
            INFO("dt = ", ref::dname(dt), ", x ", ref::shape_str(s), ", axis ", axis, ", start ", start, ", length ", length);
            // The last shape of each dtype, when of rank 2, is a strided (transposed) operand.
            const Tensor x = it == 3 && rank == 2 ? input({s[1], s[0]}, ++seed, dt).transpose(0, 1) : input(s, ++seed, dt);
            const RTensor r = ref::from_kiln(x);
            kiln::Graph g = kiln::trace("narrow", {ref::arg_like("x", x)}, [&](const std::vector<Var>& in) {
                return std::vector<Var>{kiln::narrow(in[0], axis, start, length),
                                        kiln::narrow(in[0], axis - rank, 0, n),  // a negative axis, the whole axis
                                        kiln::narrow(in[0], axis, n, 0),         // empty, at the end
                                        kiln::narrow(kiln::narrow(in[0], axis, start, n - start), axis, 0, length)};
            });
            auto out = ref::run_graph(g, {x});
            REQUIRE(out.size() == 4);
            ref::check_close(out[0], ref::narrow(r, axis, start, length), dt, {}, "narrow");
            ref::check_close(out[1], r, dt, {}, "whole axis");
            ref::check_close(out[2], ref::narrow(r, axis, n, 0), dt, {}, "empty");
            ref::check_close(out[3], ref::narrow(r, axis, start, length), dt, {}, "narrow of a narrow");
        }
}

TEST_CASE("ops.dynamic: random narrows with symbolic start and length in fused groups, at every tier") {
    // x [?a, ?b, N]; the window on a random axis starts at ?s (y [?s]) with a static length, is
    // the last ?l entries (w [?l]), or starts at ?s with length ?l. y and w are not read by the
    // kernels, so their symbols come from the call's bindings.
    for (std::uint64_t seed = 61000; seed < 61012; ++seed) {
        std::mt19937_64 rng(seed);
        const DType dt = std::vector<DType>{DType::f32, DType::i64, DType::i32, DType::f64}[rng() % 4];
        const std::int64_t N = std::vector<std::int64_t>{3, 5, 8}[rng() % 3];
        const auto axis = static_cast<std::int64_t>(rng() % 3);
        const int mode = static_cast<int>(rng() % 3);
        const bool view_output = rng() % 2 == 0;
        INFO("seed ", seed, ": dt ", ref::dname(dt), ", N ", N, ", axis ", axis, ", mode ", mode);
        const std::vector<kiln::ArgSpec> args = {kiln::arg("x", dt, {kiln::dyn("a"), kiln::dyn("b"), N}),
                                                 kiln::arg("y", DType::f32, {kiln::dyn("s")}),
                                                 kiln::arg("w", DType::f32, {kiln::dyn("l")})};
        auto window = [&](const Var& x, const Var& y, const Var& w) {
            const Dim s = y.dim(0), l = w.dim(0), n = x.dim(axis);
            if (mode == 0) return kiln::narrow(x, axis, s, 1);
            if (mode == 1) return kiln::narrow(x, axis - 3, n - l, l);
            return kiln::narrow(x, axis, s, l);
        };
        kiln::Graph g = kiln::trace("narrow_random", args, [&](const std::vector<Var>& in) {
            const Var v = window(in[0], in[1], in[2]);
            std::vector<Var> outs{v * 3 + v};
            if (view_output) outs.push_back(v);  // a graph output: an opaque view
            return outs;
        });
        Calls calls;
        for (int k = 0; k < 4; ++k) {
            const std::int64_t a = 1 + static_cast<std::int64_t>(rng() % 5), b = 1 + static_cast<std::int64_t>(rng() % 6);
            const std::int64_t n = axis == 0 ? a : axis == 1 ? b : N;
            // A value in [lo, hi]; the last call may have an empty window (it runs on the interpreter).
            auto in_range = [&](std::int64_t lo, std::int64_t hi) {
                return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
            };
            const std::int64_t min_len = k == 3 ? 0 : 1;
            std::int64_t s = 0, l = 0;
            if (mode == 0) s = in_range(0, n - 1);
            if (mode == 1) l = in_range(min_len, n);
            if (mode == 2) {
                s = in_range(0, n - min_len);
                l = in_range(min_len, n - s);
            }
            calls.push_back({input({a, b, N}, seed * 10 + static_cast<std::uint64_t>(k), dt), Tensor::zeros({s}), Tensor::zeros({l})});
        }
        check_everywhere(g, calls, [&](const std::vector<Tensor>& in) {
            const std::int64_t s = in[1].dim(0), l = in[2].dim(0), n = in[0].dim(axis);
            const RTensor x = ref::from_kiln(in[0]);
            const RTensor v = mode == 0   ? ref::narrow(x, axis, s, 1)
                              : mode == 1 ? ref::narrow(x, axis, n - l, l)
                                          : ref::narrow(x, axis, s, l);
            std::vector<RTensor> outs{ref::add(ref::mul(v, ref::full({}, 3), dt), v, dt)};
            if (view_output) outs.push_back(v);
            return outs;
        }, /*fused=*/!view_output);
    }
}

TEST_CASE("ops.dynamic: a KV cache's causal mask, narrowed on two axes by symbolic dims, at every tier (f32, i64, bool)") {
    // GPT-2's attention: the mask is a bool buffer [1,1,M,M]; with ?past cached keys and ?seq new
    // queries the scores are [?b,H,?seq,?past+?seq] and the mask rows [?kv-?seq, ?kv), columns [0, ?kv).
    constexpr std::int64_t M = 12, H = 2;
    const Tensor mask = causal_mask(M);
    const RTensor rmask = ref::from_kiln(mask);
    struct Dims {
        std::int64_t b, seq, kv;
    };
    const std::vector<Dims> dims = {{1, 1, 5}, {2, 3, 3}, {1, 4, 9}, {2, 1, 12}, {1, 12, 12}, {2, 2, 7}};
    std::uint64_t seed = 57000;
    for (DType dt : {DType::f32, DType::i64}) {
        INFO("dt = ", ref::dname(dt));
        const Tensor bias = input({1, 1, M, M}, ++seed, dt);
        const RTensor rbias = ref::from_kiln(bias);
        const std::vector<kiln::ArgSpec> args = {kiln::arg("scores", dt, {kiln::dyn("b"), H, kiln::dyn("seq"), kiln::dyn("kv")})};
        // The window of a [1,1,M,M] buffer for these scores.
        auto window = [](const Var& buf, const Var& scores) {
            const Dim seq = scores.dim(2), kv = scores.dim(3);
            return kiln::narrow(kiln::narrow(buf, 2, kv - seq, seq), 3, 0, kv);
        };
        kiln::Graph g = kiln::trace("causal", args, [&](const std::vector<Var>& in) -> Var {
            return kiln::where(window(mask, in[0]), in[0] + window(bias, in[0]), -100);
        });
        Calls calls;
        for (const Dims& d : dims) calls.push_back({input({d.b, H, d.seq, d.kv}, ++seed, dt)});
        auto rwindow = [](const RTensor& buf, const Shape& s) {
            return ref::narrow(ref::narrow(buf, 2, s[3] - s[2], s[2]), 3, 0, s[3]);
        };
        check_everywhere(g, calls, [&](const std::vector<Tensor>& in) {
            const RTensor x = ref::from_kiln(in[0]);
            const RTensor sum = ref::add(x, rwindow(rbias, in[0].shape()), dt);
            return std::vector<RTensor>{ref::where(rwindow(rmask, in[0].shape()), sum, ref::full({}, -100))};
        }, /*fused=*/true);
        if (dt != DType::f32) continue;
        // The masked scores through softmax: the views join a row-reduction group.
        kiln::Graph gs = kiln::trace("causal_softmax", args, [&](const std::vector<Var>& in) -> Var {
            return kiln::softmax(kiln::where(window(mask, in[0]), in[0] * 0.05, -1e4), -1);
        });
        check_everywhere(gs, calls, [&](const std::vector<Tensor>& in) {
            const RTensor x = ref::mul(ref::from_kiln(in[0]), ref::full({}, 0.05), DType::f32);
            return std::vector<RTensor>{ref::softmax(ref::where(rwindow(rmask, in[0].shape()), x, ref::full({}, -1e4)), -1)};
        }, /*fused=*/true, 4.0);
        // The kernels on the KIR evaluator agree with the interpreter, group by group.
        const ref::GroupRunStats st = ref::check_lowered_graph(g, calls[2]);
        CHECK(st.lowered >= 1);
    }
}

TEST_CASE("ops.dynamic: position ids arange(past, seq) and a position table narrowed at ?past, at every tier") {
    // x [?b, ?s, D] are the new tokens, cache [?b, 2, ?p, D] the keys cached so far: positions
    // run from ?p. ?p is a dim of no buffer of the group that adds the narrowed table, so its
    // kernel takes ?p's value from the call's bindings (kir::ParamSource::symbol).
    constexpr std::int64_t D = 4, P = 16;
    const Tensor table = Tensor::randn({P, D}, 58000);
    const RTensor rtable = ref::from_kiln(table);
    const std::vector<kiln::ArgSpec> args = {kiln::arg("x", DType::f32, {kiln::dyn("b"), kiln::dyn("s"), D}),
                                             kiln::arg("cache", DType::f32, {kiln::dyn("b"), 2, kiln::dyn("p"), D})};
    kiln::Graph g = kiln::trace("positions", args, [&](const std::vector<Var>& in) {
        const Dim past = in[1].dim(2), seq = in[0].dim(1);
        const Var pos = kiln::arange(past, seq);
        return std::vector<Var>{pos, in[0] + kiln::narrow(table, 0, past, seq), in[0] + kiln::gather(table, pos, 0),
                                in[0] * kiln::unsqueeze(kiln::arange(past + seq, seq, -2, DType::f32), -1)};
    });
    Calls calls;
    std::uint64_t seed = 58100;
    for (auto [b, s, p] : std::vector<std::array<std::int64_t, 3>>{{1, 3, 0}, {2, 1, 5}, {1, 4, 12}, {2, 0, 3}, {1, 16, 0}, {2, 2, 14}})
        calls.push_back({input({b, s, D}, ++seed, DType::f32), input({b, 2, p, D}, ++seed, DType::f32)});
    check_everywhere(g, calls, [&](const std::vector<Tensor>& in) {
        const std::int64_t s = in[0].dim(1), p = in[1].dim(2);
        const RTensor x = ref::from_kiln(in[0]);
        const RTensor pos = ref::arange(p, s, 1, DType::i64);
        const RTensor emb = ref::add(x, ref::narrow(rtable, 0, p, s), DType::f32);
        const RTensor down = ref::unsqueeze(ref::arange(p + s, s, -2, DType::f32), {-1});
        return std::vector<RTensor>{pos, emb, emb, ref::mul(x, down, DType::f32)};
    }, /*fused=*/true);
    // The narrow's group reads ?p from the bindings; its kernel agrees with the interpreter,
    // and the GPU printer (whose device runs are tested on GPU hosts) prints it.
    const auto plan = kiln::jit::lower_function(g.impl());
    bool symbol_param = false;
    for (const auto& gr : plan->groups) {
        if (!gr->kernel) continue;
        for (const auto& src : gr->kernel->param_sources) {
            if (src.symbol != "p") continue;
            symbol_param = true;
            CHECK(src.buffer == -1);
            CHECK(kiln::kir::print(*gr->kernel).find(" = ?p\n") != std::string::npos);
        }
        for (auto dialect : {kiln::tiers::gpu::Dialect::cuda, kiln::tiers::gpu::Dialect::hip}) {
            const auto src = kiln::tiers::gpu::print_source(*gr->kernel, {}, dialect);
            CHECK_MESSAGE(src.ok, gr->group.name << ": " << src.why);
        }
    }
    CHECK(symbol_param);
    for (std::size_t k : {0, 2, 5}) ref::check_lowered_graph(g, calls[k]);
}

TEST_CASE("ops.dynamic: arange with steps 1 and -2 on numeric dtypes, static and symbolic lengths") {
    for (DType dt : {DType::i64, DType::f32, DType::i32, DType::f64, DType::f16, DType::i8, DType::u8}) {
        INFO("dt = ", ref::dname(dt));
        kiln::Graph g = kiln::trace("arange", {kiln::arg("x", DType::f32, {kiln::dyn("n")})}, [&](const std::vector<Var>& in) {
            const Dim n = in[0].dim(0);
            return std::vector<Var>{kiln::arange(0, 7, 1, dt), kiln::arange(5, 6, -2, dt), kiln::arange(-3, 0, 1, dt),
                                    kiln::arange(n, n, -2, dt), kiln::arange(2, n * Dim(2) - Dim(1), 3, dt)};
        });
        kiln::Function f = ref::interp_engine().load(g);
        for (std::int64_t n : {1, 4, 9}) {
            CAPTURE(n);
            const auto out = f({Tensor::zeros({n})});
            REQUIRE(out.size() == 5);
            ref::check_close(out[0], ref::arange(0, 7, 1, dt), dt, ref::tol_for(dt), "0..6");
            ref::check_close(out[1], ref::arange(5, 6, -2, dt), dt, ref::tol_for(dt), "5, 3, ..., -5");
            ref::check_close(out[2], ref::arange(-3, 0, 1, dt), dt, ref::tol_for(dt), "empty");
            ref::check_close(out[3], ref::arange(n, n, -2, dt), dt, ref::tol_for(dt), "n, n-2, ...");
            ref::check_close(out[4], ref::arange(2, 2 * n - 1, 3, dt), dt, ref::tol_for(dt), "2, 5, ... (2n-1 values)");
        }
    }
    // i8 wraps as cast does: 120, 125, 130 -> -126.
    kiln::Graph g = kiln::trace("wrap", {}, [](const std::vector<Var>&) { return kiln::arange(120, 3, 5, DType::i8); });
    CHECK(ref::run_graph(g, {})[0].to_vector<std::int8_t>() == std::vector<std::int8_t>{120, 125, -126});
}

TEST_CASE("ops.dynamic: a narrow out of range fails the call with kiln::Error naming narrow, the values and the dim") {
    const std::vector<kiln::ArgSpec> args = {kiln::arg("x", DType::f32, {2, kiln::dyn("n")}),
                                             kiln::arg("y", DType::f32, {kiln::dyn("m")})};
    kiln::Graph g = kiln::trace("window", args, [](const std::vector<Var>& in) {
        const Dim n = in[0].dim(1), m = in[1].dim(0);
        return std::vector<Var>{kiln::narrow(in[0], 1, m, 3) + 1.0, kiln::narrow(in[0], -1, n - m, 2) * 2.0,
                                kiln::narrow(in[0], 1, 0, n - m)};
    });
    auto call = [](kiln::Function& f, std::int64_t n, std::int64_t m) {
        return f({Tensor::randn({2, n}, static_cast<std::uint64_t>(59000 + n)), Tensor::randn({m}, 59100)});
    };
    std::vector<kiln::Options> options = {diff::interpreter_options()};
    for (int tier : {1, 2})
        if (kiln::test::have_tier(tier)) options.push_back(diff::forced_tier_options(tier));
    for (const kiln::Options& o : options) {
        CAPTURE(o.tier1_threshold);
        kiln::Function f = kiln::Engine(o).load(g);
        for (int round = 0; round < 2; ++round) {  // a failed call leaves the function usable
            const auto ok = call(f, 7, 3);
            const RTensor x = ref::from_kiln(Tensor::randn({2, 7}, 59007));
            ref::check_close(ok[0], ref::add(ref::narrow(x, 1, 3, 3), ref::full({}, 1.0), DType::f32), DType::f32, {}, "ok 0");
            ref::check_close(ok[1], ref::mul(ref::narrow(x, 1, 4, 2), ref::full({}, 2.0), DType::f32), DType::f32, {}, "ok 1");
            ref::check_close(ok[2], ref::narrow(x, 1, 0, 4), DType::f32, {}, "ok 2");
            std::string msg = error_of([&] { call(f, 5, 3); });  // 3 + 3 > 5
            CHECK_MESSAGE(msg.find("narrow: start 3 + length 3 exceeds dim 5 of axis 1") != std::string::npos, msg);
            msg = error_of([&] { call(f, 4, 5); });  // start 4 - 5 = -1 (and length -1)
            CHECK_MESSAGE(msg.find("narrow: start 5 + length 3 exceeds dim 4 of axis 1") != std::string::npos, msg);
            msg = error_of([&] { call(f, 3, 2); });  // second output: start 1, length 2 fits; first: 2 + 3 > 3
            CHECK_MESSAGE(msg.find("narrow: start 2 + length 3 exceeds dim 3 of axis 1") != std::string::npos, msg);
        }
    }
    // Only the second narrow out of range: a negative start.
    kiln::Graph g2 = kiln::trace("window2", args, [](const std::vector<Var>& in) {
        return kiln::narrow(in[0], 1, in[0].dim(1) - in[1].dim(0), 1) - 1.0;
    });
    kiln::Function f2 = kiln::Engine(diff::interpreter_options()).load(g2);
    std::string msg = error_of([&] { call(f2, 2, 3); });
    CHECK_MESSAGE(msg.find("narrow: start -1 must be >= 0") != std::string::npos, msg);
    kiln::Graph g3 = kiln::trace("window3", args, [](const std::vector<Var>& in) {
        return kiln::arange(0, in[0].dim(1) - in[1].dim(0));
    });
    kiln::Function f3 = kiln::Engine(diff::interpreter_options()).load(g3);
    msg = error_of([&] { call(f3, 2, 3); });
    CHECK_MESSAGE(msg.find("arange: length -1 must be >= 0") != std::string::npos, msg);
    CHECK(f3({Tensor::randn({2, 5}, 1), Tensor::randn({3}, 2)})[0].to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1});
}

TEST_CASE("ops.dynamic: trace-time errors of narrow and arange name the op and the rule") {
    const std::vector<kiln::ArgSpec> args = {kiln::arg("x", DType::f32, {2, 7})};
    auto traced = [&](const std::function<Var(const Var&)>& body) {
        return error_of([&] { kiln::trace("e", args, [&](const std::vector<Var>& in) { return body(in[0]); }); });
    };
    CHECK(traced([](const Var& x) { return kiln::narrow(x, 1, 5, 3); }).find("narrow: start 5 + length 3 exceeds dim 7 of axis 1") !=
          std::string::npos);
    CHECK(traced([](const Var& x) { return kiln::narrow(x, 2, 0, 1); }).find("narrow: axis 2 is out of range for rank 2") !=
          std::string::npos);
    CHECK(traced([](const Var& x) { return kiln::narrow(x, 0, -1, 1); }).find("narrow: start -1 must be >= 0") != std::string::npos);
    CHECK(traced([](const Var& x) { return kiln::narrow(x, 0, 0, -2); }).find("narrow: length -2 must be >= 0") != std::string::npos);
    CHECK(traced([](const Var& x) { return kiln::narrow(x, 0, kiln::dyn("zz"), 1); })
              .find("narrow: start ?zz uses ?zz, which is no dim of a value of this trace") != std::string::npos);
    CHECK(traced([](const Var&) { return kiln::arange(0, 4, 0); }).find("arange: step must be nonzero") != std::string::npos);
    CHECK(traced([](const Var&) { return kiln::arange(0, 4, 1, DType::boolean); }).find("arange: dtype must be numeric") !=
          std::string::npos);
    CHECK(traced([](const Var&) { return kiln::arange(0, kiln::dyn("q")); }).find("arange: length ?q uses ?q") != std::string::npos);
    const std::string outside = error_of([] { kiln::arange(0, 3); });
    CHECK_MESSAGE(outside.find("arange: used outside kiln::trace") != std::string::npos, outside);
}

TEST_CASE("ops.dynamic: traced narrow and arange round-trip through the text IR and run the same") {
    const std::vector<kiln::ArgSpec> args = {kiln::arg("x", DType::f32, {kiln::dyn("b"), kiln::dyn("s"), 3}),
                                             kiln::arg("cache", DType::f32, {kiln::dyn("b"), kiln::dyn("p"), 3})};
    kiln::Graph g = kiln::trace("text", args, [](const std::vector<Var>& in) {
        const Dim p = in[1].dim(1), s = in[0].dim(1);
        const Var all = kiln::concat({in[1], in[0]}, 1);  // [?b, ?p+?s, 3]
        return std::vector<Var>{kiln::narrow(all, 1, p, s) - in[0], kiln::arange(p + s - Dim(1), s, -1, DType::f32),
                                kiln::narrow(all, -2, 0, p + s - Dim(1))};
    });
    const std::string text = g.to_string();
    CHECK(text.find("narrow(%2) {axis=1, length=<?s>, start=<?p>} : f32[?b,?s,3]") != std::string::npos);
    CHECK(text.find("arange() {dtype=f32, length=<?s>, start=<?p+?s-1>, step=-1} : f32[?s]") != std::string::npos);
    CHECK(text.find("length=<?p+?s-1>, start=<0>") != std::string::npos);
    const kiln::Graph back = kiln::Graph::parse(text);
    CHECK(back.to_string() == text);
    CHECK(kiln::ir::structurally_equal(*g.impl(), *back.impl()));
    CHECK(kiln::ir::structural_hash(*g.impl()) == kiln::ir::structural_hash(*back.impl()));
    const std::vector<Tensor> in = {Tensor::randn({2, 3, 3}, 60000), Tensor::randn({2, 4, 3}, 60001)};
    const auto a = ref::run_graph(g, in), b = ref::run_graph(back, in);
    REQUIRE(a.size() == 3);
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(ref::max_rel_diff(a[i], b[i]) == 0.0);
    CHECK(ref::max_rel_diff(a[0], Tensor::zeros({2, 3, 3})) == 0.0);
    CHECK(a[1].to_vector<float>() == std::vector<float>{6, 5, 4});
    CHECK(a[2].shape() == Shape{2, 6, 3});
}
