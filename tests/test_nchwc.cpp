// The blocked channel layout (src/passes/nchwc.h, ops.def's conv2d_nchwc): the op on the
// interpreter against the double-precision reference, the pass keeping every output of
// random conv chains, converting only at a chain's edges and leaving a graph of one conv
// alone, malformed conv2d_nchwc nodes rejected with the operand and the rule named, and a
// conv's outer indices sharing an image evenly between two threads.
// Every tier against the interpreter on the blocked graphs: tests/test_differential.cpp.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "lowered.h"
#include "random_graphs.h"
#include "reference.h"
#include "src/ir/ir.h"
#include "src/kir/kir.h"
#include "src/passes/nchwc.h"

#include <cmath>
#include <limits>
#include <memory>
#include <string>

using namespace kiln;
namespace diff = kiln::test::diff;

namespace {

int count_op(const ir::Graph& g, ir::Op op) {
    int n = 0;
    for (const auto& nd : g.nodes) n += nd.op == op;
    return n;
}

Graph blocked(const Graph& g) { return Graph(std::make_shared<const ir::Graph>(passes::to_nchwc(*g.impl()))); }

struct ConvSpec {
    std::int64_t o = 0;  // output channels (depthwise: the input's)
    std::int64_t k = 1, stride = 1, pad = 0, dil = 1;
    bool depthwise = false, bias = true;
};

}  // namespace

TEST_CASE("nchwc: conv2d_nchwc on the interpreter matches the double-precision reference") {
    int ran = 0;
    for (std::uint64_t seed = 0; seed < 24; ++seed) {
        diff::Rng rng(seed);
        const DType dt = seed % 3 == 2 ? DType::f64 : DType::f32;
        const std::int64_t N = 1 + static_cast<std::int64_t>(rng() % 2), C = diff::pick(rng, std::vector<std::int64_t>{1, 3, 16, 21});
        const std::int64_t H = 4 + static_cast<std::int64_t>(rng() % 7), W = 4 + static_cast<std::int64_t>(rng() % 7);
        auto spec = [&](std::int64_t cin) {
            ConvSpec s;
            s.depthwise = diff::chance(rng, 3);
            s.o = s.depthwise ? cin : diff::pick(rng, std::vector<std::int64_t>{5, 16, 19, 32});
            s.k = diff::pick(rng, std::vector<std::int64_t>{1, 3});
            s.stride = 1 + static_cast<std::int64_t>(rng() % 2);
            s.pad = s.k == 3 ? static_cast<std::int64_t>(rng() % 2) : 0;
            s.dil = s.k == 3 && diff::chance(rng, 4) ? 2 : 1;
            s.bias = !diff::chance(rng, 3);
            return s;
        };
        const ConvSpec s1 = spec(C), s2 = spec(s1.o);
        auto out_size = [](std::int64_t in, const ConvSpec& s) -> std::int64_t {
            const std::int64_t span = in + 2 * s.pad - s.dil * (s.k - 1) - 1;
            return span < 0 ? 0 : span / s.stride + 1;
        };
        if (out_size(out_size(H, s1), s2) < 1 || out_size(out_size(W, s1), s2) < 1) continue;
        std::uint64_t ts = seed * 7 + 100;
        auto weights = [&](const ConvSpec& s, std::int64_t cin) {
            const Tensor w = Tensor::rand({s.o, s.depthwise ? 1 : cin, s.k, s.k}, ts++, dt, -1.0, 1.0);
            return std::pair{w, Tensor::rand({s.o}, ts++, dt, -1.0, 1.0)};
        };
        const auto [w1, b1] = weights(s1, C);
        const auto [w2, b2] = weights(s2, s1.o);
        const Tensor x = Tensor::rand({N, C, H, W}, ts++, dt, -1.0, 1.0);
        auto apply = [](const Var& h, const ConvSpec& s, const Tensor& w, const Tensor& b, std::int64_t cin) {
            return conv2d(h, w, s.bias ? Var(b) : Var(), {s.stride, s.stride}, {s.pad, s.pad}, {s.dil, s.dil},
                          s.depthwise ? cin : 1);
        };
        const Graph g = trace("two_convs", {arg("x", dt, {N, C, H, W})}, [&](const std::vector<Var>& in) {
            return std::vector<Var>{apply(apply(in[0], s1, w1, b1, C), s2, w2, b2, s1.o)};
        });
        const Graph bg = blocked(g);
        INFO("seed " << seed << "\n" << bg.to_string({16}));
        REQUIRE(count_op(*bg.impl(), ir::Op::conv2d_nchwc) == 2);
        REQUIRE(count_op(*bg.impl(), ir::Op::conv2d) == 0);

        auto ref_conv = [](const ref::RTensor& h, const ConvSpec& s, const Tensor& w, const Tensor& b, std::int64_t cin) {
            return ref::conv2d(h, ref::from_kiln(w), s.bias ? std::optional(ref::from_kiln(b)) : std::nullopt,
                               {s.stride, s.stride}, {s.pad, s.pad}, {s.dil, s.dil}, s.depthwise ? cin : 1);
        };
        const ref::RTensor want = ref_conv(ref_conv(ref::from_kiln(x), s1, w1, b1, C), s2, w2, b2, s1.o);
        const Tensor got = ref::interp_engine().load(bg)({x}).at(0);
        CHECK(ref::check_close(got, want, dt, ref::tol_for(dt, 4.0), "seed " + std::to_string(seed)));
        ++ran;
    }
    CHECK(ran >= 16);
}

TEST_CASE("nchwc: the pass keeps every output of random conv chains (interpreter, NCHW against blocked)") {
    Options o = ref::interp_options(), ob = o;
    ob.nchwc = "1";
    int rewritten = 0;
    for (std::uint64_t seed : diff::seeds(7500, 24)) {
        const diff::Case c = diff::nchwc_case(seed);
        const ir::Graph bg = passes::to_nchwc(*c.graph.impl());
        const int convs = count_op(*c.graph.impl(), ir::Op::conv2d);
        if (convs >= 2) {
            CHECK(count_op(bg, ir::Op::conv2d_nchwc) == convs);
            CHECK(count_op(bg, ir::Op::conv2d) == 0);
            ++rewritten;
        }
        Function f = Engine(o).load(c.graph), fb = Engine(ob).load(c.graph);
        for (const auto& call : c.calls) {
            const std::vector<Tensor> want = f(call), got = fb(call);
            REQUIRE(got.size() == want.size());
            for (std::size_t i = 0; i < want.size(); ++i) {
                const std::string d = diff::compare(got[i], want[i], c.tol_scale);
                CHECK_MESSAGE(d.empty(), "output " << i << ": " << d << "\n" << diff::describe(c));
            }
        }
    }
    CHECK(rewritten >= 12);
}

TEST_CASE("nchwc: a chain converts at its edges only") {
    // A stem conv, an inverted residual block (1x1 expand, relu6, depthwise 3x3, relu6, 1x1
    // project, residual add), squeeze-excite, a global pool and a linear head.
    const Tensor w0 = Tensor::rand({24, 3, 3, 3}, 1, DType::f32, -0.5, 0.5), w1 = Tensor::rand({72, 24, 1, 1}, 2, DType::f32, -0.5, 0.5);
    const Tensor w2 = Tensor::rand({72, 1, 3, 3}, 3, DType::f32, -0.5, 0.5), w3 = Tensor::rand({24, 72, 1, 1}, 4, DType::f32, -0.5, 0.5);
    const Tensor s1 = Tensor::rand({6, 24, 1, 1}, 5, DType::f32, -0.5, 0.5), s2 = Tensor::rand({24, 6, 1, 1}, 6, DType::f32, -0.5, 0.5);
    const Tensor fc = Tensor::rand({10, 24}, 7, DType::f32, -0.5, 0.5);
    const Graph g = trace("block", {arg("x", DType::f32, {dyn("N"), 3, 16, 16})}, [&](const std::vector<Var>& in) {
        Var h = relu(conv2d(in[0], w0, Var(), {2, 2}, {1, 1}));
        Var e = clamp(conv2d(h, w1), 0.0, 6.0);
        e = clamp(conv2d(e, w2, Var(), {1, 1}, {1, 1}, {1, 1}, 72), 0.0, 6.0);
        h = conv2d(e, w3) + h;
        Var s = sigmoid(conv2d(relu(conv2d(global_avg_pool2d(h), s1)), s2));
        h = h * s;
        return std::vector<Var>{linear(flatten(global_avg_pool2d(h), 1, 3), fc)};
    });
    const Graph bg = blocked(g);
    const ir::Graph& b = *bg.impl();
    INFO(bg.to_string({16}));
    CHECK(count_op(b, ir::Op::conv2d_nchwc) == 6);
    int to_nchw = 0;  // reshapes of a permuted blocked value into NCHW
    for (const auto& nd : b.nodes)
        to_nchw += nd.op == ir::Op::reshape && nd.type.rank() == 4 &&
                   b.nodes[static_cast<std::size_t>(nd.inputs[0])].op == ir::Op::permute;
    CHECK(to_nchw == 1);  // back to NCHW once, after the last pool
    CHECK(count_op(b, ir::Op::pad) == 0);      // the stem reads the NCHW input as it is
    for (const auto& nd : b.nodes)
        if (nd.op == ir::Op::conv2d_nchwc)
            CHECK(nd.attrs.i("blocked_input") == (b.nodes[static_cast<std::size_t>(nd.inputs[0])].op == ir::Op::input ? 0 : 1));
    // And the engine option runs it: same outputs as NCHW.
    Options ob = ref::interp_options();
    ob.nchwc = "1";
    const Tensor x = Tensor::rand({2, 3, 16, 16}, 8, DType::f32, -1.0, 1.0);
    const Tensor want = ref::interp_engine().load(g)({x}).at(0), got = Engine(ob).load(g)({x}).at(0);
    CHECK(ref::max_rel_diff(got, want) < 1e-5);
}

TEST_CASE("nchwc: KILN_NCHWC=auto blocks depthwise-separable chains only") {
    using passes::NchwcMode;
    auto graph = [](bool depthwise, bool squeeze_excite) {
        const Tensor w0 = Tensor::rand({16, 3, 3, 3}, 1, DType::f32, -0.5, 0.5), w1 = Tensor::rand({16, 1, 3, 3}, 2, DType::f32, -0.5, 0.5);
        const Tensor w2 = Tensor::rand({16, 16, 3, 3}, 3, DType::f32, -0.5, 0.5), w3 = Tensor::rand({16, 16, 1, 1}, 4, DType::f32, -0.5, 0.5);
        return trace("g", {arg("x", DType::f32, {1, 3, 16, 16})}, [&](const std::vector<Var>& in) {
            Var h = relu(conv2d(in[0], w0, Var(), {1, 1}, {1, 1}));
            for (int i = 0; i < 2; ++i)
                h = depthwise ? relu(conv2d(h, w1, Var(), {1, 1}, {1, 1}, {1, 1}, 16)) : relu(conv2d(h, w2, Var(), {1, 1}, {1, 1}));
            if (squeeze_excite) h = h * sigmoid(conv2d(global_avg_pool2d(h), w3));
            return std::vector<Var>{h};
        });
    };
    CHECK(passes::nchwc_applies(*graph(true, false).impl(), NchwcMode::where_it_pays));
    CHECK_FALSE(passes::nchwc_applies(*graph(false, false).impl(), NchwcMode::where_it_pays));  // dense 3x3 convs
    CHECK(passes::nchwc_applies(*graph(true, true).impl(), NchwcMode::where_it_pays));  // with squeeze-excite too
    CHECK(passes::nchwc_applies(*graph(false, true).impl(), NchwcMode::all));
    CHECK_FALSE(passes::nchwc_applies(*graph(true, false).impl(), NchwcMode::off));
    // The engine's default is auto: the depthwise chain runs blocked (its groups are
    // conv2d_nchwc ones), the dense one and KILN_NCHWC=0 as loaded; the same values.
    auto blocked_groups = [](const Function& fn) {
        int n = 0;
        for (const auto& gs : fn.stats().groups) n += gs.name.find("conv2d_nchwc") != std::string::npos;
        return n;
    };
    const Tensor x = Tensor::rand({1, 3, 16, 16}, 9, DType::f32, -1.0, 1.0);
    Function f = Engine(ref::interp_options()).load(graph(true, false));
    const Tensor got = f({x}).at(0);
    CHECK(blocked_groups(f) == 3);
    CHECK(blocked_groups(Engine(ref::interp_options()).load(graph(false, false))) == 0);
    Options o0 = ref::interp_options();
    o0.nchwc = "0";
    Function f0 = Engine(o0).load(graph(true, false));
    CHECK(ref::max_rel_diff(got, f0({x}).at(0)) < 1e-5);
    CHECK(blocked_groups(f0) == 0);
    o0.nchwc = "yes";
    CHECK_THROWS_AS(o0.validate(), Error);
}

TEST_CASE("nchwc: a conv's outer indices split an image into equal shares for two threads") {
    // mobilenet_v2's 14 x 14 layers (4 and 24 blocks of 16 channels) and 7 x 7 ones (10 and
    // 20 blocks), batch 1: channel blocks in units of one block, pixels in units of one pixel
    // (in units of the kernels' tiles: 6 + 4 and 6 + 6 + 6 + 2 blocks, 112 + 84 pixels).
    auto chain = [](std::int64_t c, std::int64_t mid, std::int64_t side) {
        const Tensor w1 = Tensor::rand({mid, c, 1, 1}, 1, DType::f32, -0.5, 0.5), w2 = Tensor::rand({c, mid, 1, 1}, 2, DType::f32, -0.5, 0.5);
        return blocked(trace("chain", {arg("x", DType::f32, {1, c, side, side})}, [&](const std::vector<Var>& in) {
            return std::vector<Var>{conv2d(conv2d(in[0], w1), w2)};
        }));
    };
    struct Want {
        std::int64_t c, mid, side;
        std::int64_t blocks, block_rows, col_block;  // of the conv with `blocks` output blocks
    };
    for (const Want& want : {Want{64, 384, 14, 4, 8, 98}, Want{64, 384, 14, 24, 6, 196}, Want{160, 320, 7, 10, 5, 49},
                             Want{160, 320, 7, 20, 5, 49}}) {
        const Graph g = chain(want.c, want.mid, want.side);
        const auto plan = jit::lower_function(g.impl());
        int seen = 0;
        for (const auto& group : plan->groups) {
            if (!group->kernel || !group->kernel->nchwc) continue;
            const kir::NchwcConv& h = *group->kernel->nchwc;
            auto bound = [](const kir::ExprRef& e) {
                REQUIRE(e->kind == kir::ExprKind::Const);  // (static shapes)
                return e->i;
            };
            const std::int64_t blocks = bound(h.blocks), npix = bound(h.npix);
            if (blocks != want.blocks) continue;
            INFO(want.c << " -> " << want.mid << " at " << want.side << " x " << want.side << ": " << blocks << " blocks, " << npix << " pixels");
            CHECK(h.block_rows == want.block_rows);
            CHECK(std::min(h.col_block, npix) == want.col_block);
            ++seen;
        }
        CHECK(seen == 1);
    }
}

// conv2d_nchwc's `channels` (ops.def): the output channels past a dense conv's real count
// are 0 before its epilogue whatever their weights, bias and inputs. Here every weight and
// bias is non-zero and one input is infinite: the interpreter (f32: the blocked kernel; f64:
// the op's definition) and tier 2 (f32: the runtime kernel; f64: the loop nest) give exactly 0
// there, and agree on the real channels. Fails where a path computes the padding (1.x or NaN).
TEST_CASE("nchwc: a dense conv's channels past its real count are 0, on the interpreter and tier 2") {
    int checked = 0;
    for (DType dt : {DType::f32, DType::f64})
        for (std::int64_t ch : {5, 8, 12, 24}) {
            // The pass's graph of a conv 3 -> ch, a clamp and a second conv; then every weight and
            // bias of the first conv made non-zero, its clamped blocked output the graph's output.
            const Tensor w1 = Tensor::rand({ch, 3, 3, 3}, 1, dt, 0.25, 1.0), b1 = Tensor::rand({ch}, 2, dt, 0.5, 1.0);
            const Tensor w2 = Tensor::rand({4, ch, 1, 1}, 3, dt, -0.5, 0.5);
            const Graph traced = trace("cut", {arg("x", dt, {1, 3, 5, 6})}, [&](const std::vector<Var>& in) {
                return std::vector<Var>{conv2d(clamp(conv2d(in[0], w1, Var(b1), {1, 1}, {1, 1}), -50.0, 50.0), w2)};
            });
            ir::Graph bg = passes::to_nchwc(*traced.impl());
            ir::ValueId conv = -1, out = -1;
            for (std::size_t i = 0; i < bg.nodes.size(); ++i) {
                ir::Node& n = bg.nodes[i];
                if (n.op == ir::Op::conv2d_nchwc && conv < 0) {
                    conv = static_cast<ir::ValueId>(i);
                    CHECK(n.attrs.has("channels") == (ch % 16 != 0));
                    for (std::size_t k = 1; k < n.inputs.size(); ++k) {
                        ir::Node& c = bg.nodes[static_cast<std::size_t>(n.inputs[k])];
                        c.value = Tensor::rand(c.value.shape(), 10 + k, dt, 0.25, 1.0);
                    }
                } else if (n.op == ir::Op::clamp && conv >= 0 && out < 0 && n.inputs[0] == conv) {
                    out = static_cast<ir::ValueId>(i);
                }
            }
            REQUIRE(out >= 0);
            bg.outputs = {out};
            const Graph g(std::make_shared<const ir::Graph>(std::move(bg)));
            Tensor xin = Tensor::rand({1, 3, 5, 6}, 5, DType::f64, -1.0, 1.0);
            std::vector<double> xv = xin.to_doubles();
            xv[37] = std::numeric_limits<double>::infinity();  // channel 1, pixel (1, 1)
            xin = Tensor::from_vector(xv, {1, 3, 5, 6}).astype(dt);
            const Tensor want = ref::interp_engine().load(g)({xin}).at(0);
            Function f2 = Engine(ref::tier2_options()).load(g);
            Tensor got;
            for (int i = 0; i < 3; ++i) got = f2({xin}).at(0);
            REQUIRE(f2.stats().calls_by_tier[2] >= 1);  // (the last call ran tier-2 code)
            INFO(dtype_name(dt) << " channels " << ch);
            const std::vector<double> wv = want.to_doubles(), gv = got.to_doubles();
            REQUIRE(wv.size() == static_cast<std::size_t>((ch + 15) / 16 * 30 * 16));
            int bad = 0;
            for (std::size_t i = 0; i < wv.size(); ++i) {
                const std::int64_t channel = static_cast<std::int64_t>(i / (30 * 16)) * 16 + static_cast<std::int64_t>(i % 16);
                if (channel >= ch) {
                    if ((wv[i] != 0.0 || gv[i] != 0.0) && bad++ < 4) FAIL_CHECK("channel " << channel << ": interpreter " << wv[i] << ", tier 2 " << gv[i]);
                } else if (std::fabs(wv[i] - gv[i]) > 1e-5 * (1.0 + std::fabs(wv[i])) && bad++ < 4) {
                    FAIL_CHECK("channel " << channel << " at " << i / 16 << ": interpreter " << wv[i] << ", tier 2 " << gv[i]);
                }
            }
            CHECK(wv[16 * 7] == 50.0);  // the infinite input reaches the real channels (clamped): (1, 1)
            ++checked;
        }
    CHECK(checked == 8);
}

TEST_CASE("nchwc: a graph with fewer than two convs is left as it is") {
    const Tensor w = Tensor::rand({8, 3, 3, 3}, 1, DType::f32, -0.5, 0.5);
    const Graph g = trace("one", {arg("x", DType::f32, {1, 3, 8, 8})}, [&](const std::vector<Var>& in) {
        return std::vector<Var>{relu(conv2d(in[0], w))};
    });
    CHECK(blocked(g).structurally_equal(g));
    // Nor are convs it cannot re-lay (a weight computed in the graph, groups of two channels).
    const Graph g2 = trace("grouped", {arg("x", DType::f32, {1, 4, 8, 8}), arg("w", DType::f32, {4, 2, 3, 3})},
                           [&](const std::vector<Var>& in) {
                               const Tensor wg = Tensor::rand({4, 2, 3, 3}, 2, DType::f32, -0.5, 0.5);
                               return std::vector<Var>{conv2d(conv2d(in[0], in[1], Var(), {1, 1}, {0, 0}, {1, 1}, 2), wg, Var(), {1, 1}, {0, 0}, {1, 1}, 2)};
                           });
    CHECK(blocked(g2).structurally_equal(g2));
}

TEST_CASE("nchwc: a malformed conv2d_nchwc is rejected naming the operand and the rule") {
    const Tensor w = Tensor::rand({24, 3, 3, 3}, 1, DType::f32, -0.5, 0.5), w2 = Tensor::rand({16, 24, 1, 1}, 2, DType::f32, -0.5, 0.5);
    const Graph g = trace("two", {arg("x", DType::f32, {1, 3, 8, 8})}, [&](const std::vector<Var>& in) {
        return std::vector<Var>{conv2d(conv2d(in[0], w), w2)};
    });
    const std::string text = blocked(g).to_string();
    REQUIRE(text.find("conv2d_nchwc") != std::string::npos);
    auto rejects = [&](const std::string& from, const std::string& to, const std::string& says) {
        std::string bad = text;
        const auto at = bad.find(from);
        REQUIRE_MESSAGE(at != std::string::npos, from);
        bad.replace(at, from.size(), to);
        try {
            (void)Graph::parse(bad);
            FAIL_CHECK("accepted: " << bad);
        } catch (const Error& e) {
            CHECK_MESSAGE(std::string(e.what()).find(says) != std::string::npos, e.what());
        }
    };
    rejects("blocked_input=1", "blocked_input=0", "input must be NCHW (rank 4)");
    rejects("blocked_input=0", "blocked_input=1", "input must be [N, Cb, H, W, B] (rank 5)");
    rejects("depthwise=0", "depthwise=2", "blocked_input and depthwise must be 0 or 1");
    // The 24-channel conv carries its real channel count; it must lie in its last block, on a
    // dense conv.
    rejects("channels=24", "channels=16", "channels must lie in the last block: (16, 32], got 16");
    rejects("channels=24", "channels=33", "channels must lie in the last block: (16, 32], got 33");
    rejects("channels=24, depthwise=0", "channels=24, depthwise=1", "channels is for dense convs only");
}
