// The IR's text form (printer, parser), the verifier and the structural hash.
#include <doctest/doctest.h>

#include "src/ir/ir.h"
#include "src/ir/parser.h"
#include "src/ir/printer.h"
#include "src/ir/shape_infer.h"
#include "src/ir/verifier.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>

namespace {

using namespace kiln;
using namespace kiln::ir;

// Builds a graph node by node; types come from infer_type, as the tracer does it.
struct Builder {
    Graph g;
    SymbolGen gen;

    explicit Builder(std::string name = "g") { g.name = std::move(name); }
    ValueId push(Node n) {
        g.nodes.push_back(std::move(n));
        return static_cast<ValueId>(g.nodes.size() - 1);
    }
    ValueId input(const std::string& name, DType dtype, std::vector<Dim> dims) {
        Node n;
        n.op = Op::input;
        n.attrs.set("name", name);
        n.type = {dtype, std::move(dims)};
        ValueId id = push(std::move(n));
        g.inputs.push_back(id);
        return id;
    }
    ValueId constant(const Tensor& t) {
        Node n;
        n.op = Op::constant;
        n.value = t;
        n.type = static_type(t.dtype(), t.shape());
        return push(std::move(n));
    }
    ValueId add(Op op, std::vector<ValueId> in, Attrs attrs = {}) {
        std::vector<const TensorType*> types;
        for (ValueId v : in) types.push_back(&g.nodes[static_cast<std::size_t>(v)].type);
        Node n;
        n.op = op;
        n.type = infer_type(op, types, attrs, &gen);
        n.inputs = std::move(in);
        n.attrs = std::move(attrs);
        return push(std::move(n));
    }
};

std::string repeat(const std::string& s, int n) {
    std::string r;
    for (int i = 0; i < n; ++i) r += s;
    return r;
}

// The message of the kiln::Error that `f` throws ("" and a failed check if none).
template <class F> std::string error_of(F&& f) {
    try {
        f();
    } catch (const kiln::Error& e) {
        return e.what();
    }
    FAIL_CHECK("expected a kiln::Error");
    return "";
}

std::string parse_error(const std::string& text) {
    return error_of([&] { parse(text); });
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void check_round_trip(const Graph& g) {
    std::string text = print(g);
    std::shared_ptr<const Graph> back = parse(text);
    CHECK(structurally_equal(g, *back));
    CHECK(structural_hash(g) == structural_hash(*back));
    CHECK(back->name == g.name);
    CHECK(print(*back) == text);
}

const std::string kOnes784 = repeat("0000803f", 784);

const std::string kExample = "graph \"mlp\" {\n"
                             "  %0 = input() {name=\"x\"} : f32[?batch,784]\n"
                             "  %1 = constant() {data=0x" + kOnes784 + "} : f32[784]\n"
                             "  %2 = matmul(%0, %1) : f32[?batch]\n"
                             "  %3 = sum(%2) {axes=[0], keepdim=0} : f32[]\n"
                             "  %4 = reshape(%0) {shape=<?batch,28,28>} : f32[?batch,28,28]\n"
                             "  %5 = cast(%4) {dtype=i64} : i64[?batch,28,28]\n"
                             "  %6 = clamp(%0) {hi=6.0, lo=-1.5} : f32[?batch,784]\n"
                             "  return %3, %4\n"
                             "}\n";

Builder example_builder() {
    Builder b("mlp");
    ValueId x = b.input("x", DType::f32, {dyn("batch"), 784});
    ValueId w = b.constant(Tensor::ones({784}));
    ValueId m = b.add(Op::matmul, {x, w});
    ValueId s = b.add(Op::sum, {m}, Attrs().set("axes", std::vector<std::int64_t>{0}).set("keepdim", std::int64_t{0}));
    ValueId r = b.add(Op::reshape, {x}, Attrs().set("shape", std::vector<Dim>{dyn("batch"), 28, 28}));
    b.add(Op::cast, {r}, Attrs().set("dtype", DType::i64));
    b.add(Op::clamp, {x}, Attrs().set("lo", -1.5).set("hi", 6.0));
    b.g.outputs = {s, r};
    return b;
}

}  // namespace

TEST_CASE("ir text: the documented example prints and parses back exactly") {
    Builder b = example_builder();
    CHECK(print(b.g) == kExample);
    std::shared_ptr<const Graph> g = parse(kExample);
    CHECK(structurally_equal(*g, b.g));
    CHECK(print(*g) == kExample);
    CHECK(g->inputs == std::vector<ValueId>{0});
    CHECK(g->outputs == std::vector<ValueId>{3, 4});
    CHECK(g->nodes[1].value.to_vector<float>() == std::vector<float>(784, 1.0f));
    check_round_trip(b.g);
}

TEST_CASE("ir text: comments and free whitespace are accepted") {
    std::string text = "# a comment\n graph   \"t\"{%0=input(){name=\"a\"}:f32[ 2 ]  # trailing\n"
                       "%1 = neg( %0 )\n\t: f32[2]\n return %1 , %1 } # done\n";
    std::shared_ptr<const Graph> g = parse(text);
    REQUIRE(g->nodes.size() == 2);
    CHECK(g->outputs == std::vector<ValueId>{1, 1});
    CHECK(print(*g) == "graph \"t\" {\n"
                       "  %0 = input() {name=\"a\"} : f32[2]\n"
                       "  %1 = neg(%0) : f32[2]\n"
                       "  return %1, %1\n"
                       "}\n");
}

TEST_CASE("ir text: an empty return, constants of every dtype and scalars round-trip") {
    Builder b("consts");
    b.constant(Tensor::from_vector<double>({1.5, -2.0}, {2}));
    b.constant(Tensor::from_vector<std::int64_t>({-1, 7, 1LL << 40}, {3, 1}));
    b.constant(Tensor::from_vector<std::int32_t>({-5}, {}));
    b.constant(Tensor::from_vector<bool>({true, false, true}, {3}));
    b.constant(Tensor::from_vector<std::uint8_t>({255, 0}, {2}));
    b.constant(Tensor::from_vector<std::int8_t>({-128}, {1}));
    b.constant(Tensor::full({2}, 0.5, DType::f16));
    b.constant(Tensor::full({2}, 0.5, DType::bf16));
    b.constant(Tensor::zeros({0, 3}));
    check_round_trip(b.g);
    CHECK(contains(print(b.g), "%8 = constant() {data=0x} : f32[0,3]"));
    CHECK(contains(print(b.g), "return\n}"));
    // A non-contiguous value prints in logical (row-major) order.
    Builder t("t");
    t.constant(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1).contiguous());
    Builder v("t");
    Node n;
    n.op = Op::constant;
    n.value = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);
    n.type = static_type(DType::f32, {3, 2});
    v.push(n);
    CHECK(print(v.g) == print(t.g));
}

TEST_CASE("ir text: one node of every op, with its attributes, round-trips") {
    Builder b("all_ops");
    Dim B = dyn("B");
    ValueId x = b.input("x", DType::f32, {B, 3, 8, 8});
    ValueId v = b.input("v", DType::f32, {B, 8});
    ValueId v8 = b.input("v8", DType::f32, {8});
    ValueId flag = b.input("flag", DType::boolean, {B, 8});
    ValueId idx = b.input("idx", DType::i64, {5});
    ValueId c3 = b.constant(Tensor::randn({3}, 1));
    ValueId w = b.constant(Tensor::randn({4, 3, 3, 3}, 2));
    ValueId bias = b.constant(Tensor::randn({4}, 3));
    ValueId m = b.constant(Tensor::randn({8, 4}, 4));
    using Ints = std::vector<std::int64_t>;
    using I = std::int64_t;
    auto reduce = [](Ints axes, I keep) { return Attrs().set("axes", std::move(axes)).set("keepdim", keep); };
    auto axis = [](I a) { return Attrs().set("axis", a); };

    for (Op op : {Op::neg, Op::abs, Op::exp, Op::log, Op::sqrt, Op::rsqrt, Op::reciprocal, Op::sin, Op::cos, Op::tanh,
                  Op::sigmoid, Op::relu, Op::silu, Op::erf, Op::floor, Op::ceil, Op::round, Op::sign})
        b.add(op, {v});
    b.add(Op::gelu, {v}, Attrs().set("approx", I{1}));
    b.add(Op::logical_not, {flag});
    b.add(Op::cast, {v}, Attrs().set("dtype", DType::bf16));
    b.add(Op::clamp, {v}, Attrs().set("lo", -0.25).set("hi", 1e-5));
    for (Op op : {Op::add, Op::sub, Op::mul, Op::div, Op::pow, Op::maximum, Op::minimum, Op::eq, Op::ne, Op::lt, Op::le,
                  Op::gt, Op::ge})
        b.add(op, {v, v8});
    b.add(Op::where, {flag, v, v8});
    for (Op op : {Op::sum, Op::mean, Op::max, Op::min, Op::prod}) b.add(op, {x}, reduce({1, 3}, op == Op::sum ? 1 : 0));
    b.add(Op::argmax, {v}, reduce({1}, 0));
    b.add(Op::argmin, {v}, reduce({0}, 1));
    b.add(Op::softmax, {v}, axis(1));
    b.add(Op::log_softmax, {v}, axis(0));
    b.add(Op::layer_norm, {v, v8, v8}, Attrs().set("eps", 1e-5));
    b.add(Op::rms_norm, {v, v8}, Attrs().set("eps", 1e-6));
    b.add(Op::batch_norm, {x, c3, c3, c3, c3}, Attrs().set("eps", 0.001));
    b.add(Op::matmul, {v, m});
    auto conv = Attrs().set("stride", Ints{2, 1}).set("padding", Ints{1, 0}).set("dilation", Ints{1, 2}).set("groups", I{1});
    b.add(Op::conv2d, {x, w, bias}, conv);
    b.add(Op::conv2d, {x, w}, conv);
    // conv2d_nchwc: NCHW in, then blocked in (depthwise), with and without the bias.
    ValueId wb = b.constant(Tensor::randn({1, 3, 3, 3, 16}, 5)), bb = b.constant(Tensor::randn({1, 16}, 6));
    ValueId wd = b.constant(Tensor::randn({1, 1, 3, 3, 16}, 7));
    auto nchwc = [&](I blocked, I dw) {
        return Attrs().set("stride", Ints{1, 2}).set("padding", Ints{1, 1}).set("dilation", Ints{1, 1})
            .set("blocked_input", blocked).set("depthwise", dw);
    };
    ValueId xb = b.add(Op::conv2d_nchwc, {x, wb, bb}, nchwc(0, 0));
    b.add(Op::conv2d_nchwc, {xb, wd}, nchwc(1, 1));
    auto pool = Attrs().set("kernel", Ints{2, 2}).set("stride", Ints{2, 2}).set("padding", Ints{0, 1});
    b.add(Op::max_pool2d, {x}, pool);
    b.add(Op::avg_pool2d, {x}, pool);
    b.add(Op::global_avg_pool2d, {x});
    b.add(Op::reshape, {x}, Attrs().set("shape", std::vector<Dim>{B * Dim(3), 64}));
    b.add(Op::permute, {x}, Attrs().set("perm", Ints{0, 2, 3, 1}));
    ValueId u = b.add(Op::unsqueeze, {v}, Attrs().set("axes", Ints{0, 2}));
    b.add(Op::squeeze, {u}, Attrs().set("axes", Ints{0, 2}));
    b.add(Op::broadcast_to, {v8}, Attrs().set("shape", std::vector<Dim>{4, B, 8}));
    auto slice = [](I ax, I start, I end, I step) {
        return Attrs().set("axis", ax).set("start", start).set("end", end).set("step", step);
    };
    b.add(Op::slice, {v}, slice(1, -7, 7, 2));
    b.add(Op::slice, {v}, slice(0, 1, std::numeric_limits<I>::max(), 2));  // a fresh symbol
    b.add(Op::concat, {v, v, v}, axis(0));
    b.add(Op::concat, {v}, axis(1));
    b.add(Op::gather, {v, idx}, axis(1));
    auto narrow = [](I ax, Dim start, Dim length) {
        return Attrs().set("axis", ax).set("start", std::vector<Dim>{start}).set("length", std::vector<Dim>{length});
    };
    b.add(Op::narrow, {x}, narrow(2, 1, 6));
    b.add(Op::narrow, {v}, narrow(0, B - Dim(2), Dim(2)));  // symbolic start, and length
    auto arange = [](Dim start, Dim length, I step, DType dt) {
        return Attrs().set("start", std::vector<Dim>{start}).set("length", std::vector<Dim>{length}).set("step", step).set("dtype", dt);
    };
    b.add(Op::arange, {}, arange(-3, 5, 1, DType::i64));
    b.add(Op::arange, {}, arange(B, B * Dim(2) - Dim(1), -2, DType::f32));
    b.add(Op::pad, {v}, Attrs().set("pads", Ints{1, 0, 2, 3}).set("value", -0.5));
    b.g.outputs = {static_cast<ValueId>(b.g.nodes.size() - 1), x, c3};

    std::set<Op> seen;
    for (const Node& n : b.g.nodes) seen.insert(n.op);
    int num_ops = 0;
#define KILN_OP(id, kind, min_in, max_in) ++num_ops;
#include "src/ir/ops.def"
    CHECK(static_cast<int>(seen.size()) == num_ops);

    verify(b.g);
    std::string text = print(b.g);
    // Fresh symbols (slice and pad of ?B) print and parse like any other.
    CHECK(contains(text, "?_1"));
    CHECK(contains(text, "{axes=[1,3], keepdim=1}"));
    CHECK(contains(text, "{shape=<3*?B,64>}"));
    CHECK(contains(text, "{dtype=bf16}"));
    CHECK(contains(text, "{hi=1.0000000000000001e-05, lo=-0.25}"));
    CHECK(contains(text, "end=9223372036854775807"));
    CHECK(contains(text, "concat(%1, %1, %1) {axis=0} : f32[3*?B,8]"));
    CHECK(contains(text, "narrow(%0) {axis=2, length=<6>, start=<1>} : f32[?B,3,6,8]"));
    CHECK(contains(text, "narrow(%1) {axis=0, length=<2>, start=<?B-2>} : f32[2,8]"));
    CHECK(contains(text, "arange() {dtype=i64, length=<5>, start=<-3>, step=1} : i64[5]"));
    CHECK(contains(text, "arange() {dtype=f32, length=<2*?B-1>, start=<?B>, step=-2} : f32[2*?B-1]"));
    check_round_trip(b.g);
}

TEST_CASE("ir text: floats round-trip bit for bit") {
    const double values[] = {1e-5, 0.1, -0.0, 0.0, 1.0, -2.5, 123456789.0, 1e300, -1e-300, 5e-324,
                             std::numeric_limits<double>::max(), std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(),
                             1.0 / 3.0, 1e16, 12345678901234567890.0};
    Builder b("floats");
    ValueId x = b.input("x", DType::f32, {4});
    for (double d : values) b.add(Op::pad, {x}, Attrs().set("pads", std::vector<std::int64_t>{0, 0}).set("value", d));
    std::string text = print(b.g);
    CHECK(contains(text, "value=1.0000000000000001e-05}"));
    CHECK(contains(text, "value=0.10000000000000001}"));
    CHECK(contains(text, "value=-0.0}"));
    CHECK(contains(text, "value=1.0}"));
    CHECK(contains(text, "value=123456789.0}"));
    CHECK(contains(text, "value=inf}"));
    CHECK(contains(text, "value=-inf}"));
    CHECK(contains(text, "value=nan}"));
    CHECK(contains(text, "value=10000000000000000.0}"));
    CHECK(contains(text, "value=1.0000000000000001e+300}"));
    std::shared_ptr<const Graph> g = parse(text);
    REQUIRE(g->nodes.size() == std::size(values) + 1);
    for (std::size_t i = 0; i < std::size(values); ++i) {
        double got = g->nodes[i + 1].attrs.f("value");
        CAPTURE(values[i]);
        if (std::isnan(values[i])) CHECK(std::isnan(got));
        else CHECK(std::bit_cast<std::uint64_t>(got) == std::bit_cast<std::uint64_t>(values[i]));
    }
    check_round_trip(b.g);
}

TEST_CASE("ir text: strings with quotes, backslashes and newlines round-trip") {
    const std::string name = "say \"hi\" \\ back\nslash\ttab \x01 # not a comment";
    Builder b(name);
    ValueId x = b.input(name, DType::f32, {2});
    b.input("", DType::i64, {});
    b.g.outputs = {x};
    std::string text = print(b.g);
    CHECK(contains(text, R"(graph "say \"hi\" \\ back\nslash\ttab \x01 # not a comment" {)"));
    std::shared_ptr<const Graph> g = parse(text);
    CHECK(g->name == name);
    CHECK(g->nodes[0].attrs.str("name") == name);
    CHECK(g->nodes[1].attrs.str("name").empty());
    CHECK(g->inputs == std::vector<ValueId>{0, 1});
    check_round_trip(b.g);
}

TEST_CASE("ir text: elided constants print but do not parse") {
    Builder b = example_builder();
    std::string text = print(b.g, 16);
    CHECK(contains(text, "%1 = constant() {data=<elided>} : f32[784]"));
    CHECK(print(b.g, 784) == kExample);
    std::string msg = parse_error(text);
    CHECK(contains(msg, "parse error at 3:"));
    CHECK(contains(msg, "constant data was elided when printed; print with max_constant_elements = -1 to round-trip"));
}

TEST_CASE("ir text: parse errors name the line, the column and what was expected") {
    const std::string head = "graph \"e\" {\n  %0 = input() {name=\"x\"} : f32[2]\n";
    auto with = [&](const std::string& line) { return head + line + "\n  return %0\n}\n"; };

    std::string msg = parse_error(with("  %1 = frobnicate(%0) : f32[2]"));
    CHECK(contains(msg, "parse error at 3:8: unknown op 'frobnicate'"));

    msg = parse_error(with("  %1 = neg(%1) : f32[2]"));
    CHECK(contains(msg, "parse error at 3:12: operand %1 is not defined before %1"));
    msg = parse_error(with("  %1 = add(%0, %5) : f32[2]"));
    CHECK(contains(msg, "3:16: operand %5"));

    msg = parse_error(with("  %2 = neg(%0) : f32[2]"));
    CHECK(contains(msg, "parse error at 3:3: node ids must count up from %0: expected %1, got %2"));

    msg = parse_error(with("  %1 = constant() {data=0x0000803f} : f32[2]"));
    CHECK(contains(msg, "parse error at 3:25: constant data has 4 bytes, but f32[2] needs 8"));
    msg = parse_error(with("  %1 = constant() {data=0x000} : f32[]"));
    CHECK(contains(msg, "odd number of hex digits"));
    msg = parse_error(with("  %1 = constant() {data=0x0105} : bool[2]"));  // found by fuzz_ir_parser
    CHECK(contains(msg, "parse error at 3:25: boolean constant data must hold the bytes 00 and 01, got 05 at byte 1"));
    msg = parse_error(with("  %1 = constant() : f32[2]"));
    CHECK(contains(msg, "3:19: expected '{data=0x...}' after a constant's '()', got ':'"));
    msg = parse_error(with("  %1 = constant() {data=0x00} : u8[?n]"));
    CHECK(contains(msg, "a constant's type must be static"));

    msg = parse_error(with("  %1 = neg(%0) : f33[2]"));
    CHECK(contains(msg, "parse error at 3:18: unknown dtype 'f33'"));
    msg = parse_error(with("  %1 = cast(%0) {dtype=f33} : f32[2]"));
    CHECK(contains(msg, "parse error at 3:24: expected an attribute value"));
    CHECK(contains(msg, "got 'f33'"));

    msg = parse_error(with("  %1 = neg(%0) : f32[2,,3]"));
    CHECK(contains(msg, "3:24: expected a dim (integers and ?symbols joined by '*', '+' and '-'), got ','"));
    msg = parse_error(with("  %1 = neg(%0) : f32[3*]"));
    CHECK(contains(msg, "3:24: expected a dim"));
    msg = parse_error(with("  %1 = neg(%0) : f32[?]"));
    CHECK(contains(msg, "3:23: expected a symbol name after '?'"));
    msg = parse_error(with("  %1 = neg(%0) : f32[2.5]"));
    CHECK(contains(msg, "3:22: expected a dim"));
    msg = parse_error(with("  %1 = reshape(%0) {shape=<2 3>} : f32[2,3]"));
    CHECK(contains(msg, "expected ',' or '>' after a dim, got '3'"));

    msg = parse_error(with("  %1 = neg(%0) {a=1} {b=2} : f32[2]"));
    CHECK(contains(msg, "parse error at 3:22: expected ':' before the type, got '{'"));
    msg = parse_error(with("  %1 = sum(%0) {axes=[0], axes=[0], keepdim=0} : f32[]"));
    CHECK(contains(msg, "3:27: duplicate attribute 'axes'"));
    msg = parse_error(with("  %1 = neg(%0) : f32[2"));
    CHECK(contains(msg, "4:3: expected ',' or ']' after a dim, got 'return'"));
    msg = parse_error(head + "  return %3\n}\n");
    CHECK(contains(msg, "3:10: output %3 is not a node"));
    msg = parse_error(head + "  return %0\n} extra");
    CHECK(contains(msg, "4:3: expected the end of the text after the graph's '}', got 'extra'"));
    msg = parse_error(head);
    CHECK(contains(msg, "expected a node '%1 = ...' or 'return', got end of input"));
    msg = parse_error("graph \"unterminated {\n}");
    CHECK(contains(msg, "1:7: unterminated string"));
    msg = parse_error("grph \"x\" {}");
    CHECK(contains(msg, "1:1: expected 'graph' at the start of the text, got 'grph'"));
    msg = parse_error(with("  %1 = sum(%0) {axes=[0], keepdim=99999999999999999999} : f32[]"));
    CHECK(contains(msg, "does not fit in 64 bits"));
    msg = parse_error(with("  %1 = neg(%0) : f32[2] $"));
    CHECK(contains(msg, "3:25: unexpected character '$'"));
    msg = parse_error(with("  %1 = neg(%0) : f32[2] \x01"));
    CHECK(contains(msg, "3:25: unexpected character '\\x01'"));
}

TEST_CASE("ir text: well-formed text that breaks an IR invariant is rejected by the verifier") {
    const std::string head = "graph \"e\" {\n  %0 = input() {name=\"x\"} : f32[?n,2]\n";
    auto with = [&](const std::string& line) { return head + line + "\n  return %0\n}\n"; };

    std::string msg = parse_error(with("  %1 = neg(%0) : f32[?n,3]"));
    CHECK(contains(msg, "parse error at 3:3:"));
    CHECK(contains(msg, "%1 = neg: recorded type f32[?n,3] differs from the inferred type f32[?n,2]"));
    msg = parse_error(with("  %1 = neg(%0) : i32[?n,2]"));
    CHECK(contains(msg, "%1 = neg: recorded type i32[?n,2]"));
    msg = parse_error(with("  %1 = sum(%0) : f32[]"));
    CHECK(contains(msg, "%1 = sum: missing attribute 'axes' (ints)"));
    msg = parse_error(with("  %1 = sum(%0) {axes=[0], keepdim=0.0} : f32[2]"));
    CHECK(contains(msg, "attribute 'keepdim' must be int, got float 0.0"));
    msg = parse_error(with("  %1 = neg(%0) {alpha=1} : f32[?n,2]"));
    CHECK(contains(msg, "%1 = neg: unexpected attribute 'alpha' (neg takes none)"));
    msg = parse_error(with("  %1 = add(%0) : f32[?n,2]"));
    CHECK(contains(msg, "%1 = add: has 1 operands, expected 2"));
    msg = parse_error(with("  %1 = sum(%0) {axes=[2], keepdim=0} : f32[?n]"));
    CHECK(contains(msg, "%1 = sum: sum: reduction axis 2 is out of range for rank 2"));
    msg = parse_error(with("  %1 = input() {name=\"x\"} : f32[2]"));
    CHECK(contains(msg, "3:3:"));
    CHECK(contains(msg, "input name \"x\" is used by an earlier input"));
    msg = parse_error(with("  %1 = input() : f32[2]"));
    CHECK(contains(msg, "%1 = input: missing attribute 'name' (string)"));
    msg = parse_error(with("  %1 = input() {name=\"y\"} : f32[-2]"));
    CHECK(contains(msg, "invalid dim -2"));
    msg = parse_error(with("  %1 = conv2d(%0, %0) {dilation=[1], groups=1, padding=[0,0], stride=[1,1]} : f32[1]"));
    CHECK(contains(msg, "attribute 'dilation' must hold 2 values, got [1]"));
    // A fresh symbol may be recorded under any fresh name; other dims must match exactly.
    std::shared_ptr<const Graph> g = parse(with("  %1 = slice(%0) {axis=0, end=9, start=1, step=2} : f32[?_7,2]\n"
                                                "  %2 = neg(%1) : f32[?_7,2]"));
    CHECK(g->nodes[2].type.dims[0] == dyn("_7"));
    msg = parse_error(with("  %1 = slice(%0) {axis=0, end=9, start=1, step=2} : f32[?m,2]"));
    CHECK(contains(msg, "%1 = slice: recorded type f32[?m,2] differs from the inferred type f32[?_1,2]"));
    msg = parse_error(with("  %1 = slice(%0) {axis=0, end=9, start=1, step=2} : f32[?_7,2]\n"
                           "  %2 = neg(%1) : f32[?_8,2]"));
    CHECK(contains(msg, "4:3:"));
    CHECK(contains(msg, "%2 = neg: recorded type f32[?_8,2] differs from the inferred type f32[?_7,2]"));
}

TEST_CASE("ir text: narrow and arange attributes are checked by the verifier") {
    const std::string head = "graph \"e\" {\n  %0 = input() {name=\"x\"} : f32[?n,6]\n";
    auto with = [&](const std::string& line) { return head + line + "\n  return %0\n}\n"; };
    // Well-formed: a symbolic start, a length that cancels against the dim.
    std::shared_ptr<const Graph> g = parse(with("  %1 = narrow(%0) {axis=0, length=<?n-1>, start=<1>} : f32[?n-1,6]"));
    CHECK(g->nodes[1].attrs.dims("length")[0] == dyn("n") - Dim(1));
    std::string msg = parse_error(with("  %1 = narrow(%0) {axis=1, length=<2,3>, start=<1>} : f32[?n,2]"));
    CHECK(contains(msg, "%1 = narrow: attribute 'length' must hold 1 values, got <2,3>"));
    msg = parse_error(with("  %1 = narrow(%0) {axis=1, length=[2], start=<1>} : f32[?n,2]"));
    CHECK(contains(msg, "attribute 'length' must be dims, got ints [2]"));
    msg = parse_error(with("  %1 = narrow(%0) {axis=1, length=<4>, start=<3>} : f32[?n,4]"));
    CHECK(contains(msg, "narrow: start 3 + length 4 exceeds dim 6 of axis 1"));
    msg = parse_error(with("  %1 = narrow(%0) {axis=1, length=<1>, start=<-1>} : f32[?n,1]"));
    CHECK(contains(msg, "narrow: start -1 must be >= 0"));
    msg = parse_error(with("  %1 = narrow(%0) {axis=0, length=<?n>, start=<1>} : f32[?n,6]"));  // ?n - 1 - ?n < 0
    CHECK(contains(msg, "narrow: start 1 + length ?n exceeds dim ?n of axis 0"));
    msg = parse_error(with("  %1 = narrow(%0) {axis=2, length=<1>, start=<0>} : f32[?n,6]"));
    CHECK(contains(msg, "narrow: axis 2 is out of range for rank 2"));
    msg = parse_error(with("  %1 = narrow(%0) {axis=1, length=<2>, start=<?m>} : f32[?n,2]"));
    CHECK(contains(msg, "%1 = narrow: attribute 'start' uses ?m, which is no dim of an earlier value"));
    msg = parse_error(with("  %1 = arange() {dtype=i64, length=<?n>, start=<0>, step=0} : i64[?n]"));
    CHECK(contains(msg, "arange: step must be nonzero"));
    msg = parse_error(with("  %1 = arange() {dtype=bool, length=<?n>, start=<0>, step=1} : bool[?n]"));
    CHECK(contains(msg, "arange: dtype must be numeric, got bool"));
    msg = parse_error(with("  %1 = arange() {dtype=i64, length=<-1>, start=<0>, step=1} : i64[0]"));
    CHECK(contains(msg, "arange: length -1 must be >= 0"));
    msg = parse_error(with("  %1 = arange() {dtype=i64, length=<3>, start=<9223372036854775807>, step=1} : i64[3]"));
    CHECK(contains(msg, "overflows int64"));
    msg = parse_error(with("  %1 = arange() {dtype=i64, length=<?k>, start=<0>, step=1} : i64[?k]"));
    CHECK(contains(msg, "%1 = arange: attribute 'length' uses ?k, which is no dim of an earlier value"));
    msg = parse_error(with("  %1 = arange(%0) {dtype=i64, length=<2>, start=<0>, step=1} : i64[2]"));
    CHECK(contains(msg, "%1 = arange: has 1 operands, expected 0"));
}

TEST_CASE("ir verifier: hand-broken graphs are rejected, naming the node and the rule") {
    auto broken = [](auto&& edit) {
        Builder b = example_builder();
        verify(b.g);
        edit(b.g);
        return error_of([&] { verify(b.g); });
    };
    CHECK(contains(broken([](Graph& g) { g.nodes[3].type.dims = {Dim(1)}; }),
                   "%3 = sum: recorded type f32[1] differs from the inferred type f32[]"));
    CHECK(contains(broken([](Graph& g) { g.nodes[2].inputs[1] = 5; }),
                   "%2 = matmul: operand %5 is not defined before the node"));
    CHECK(contains(broken([](Graph& g) { g.nodes[2].inputs.push_back(0); }),
                   "%2 = matmul: has 3 operands, expected 2"));
    CHECK(contains(broken([](Graph& g) { g.inputs.clear(); }),
                   "the input list [] must list the input nodes in order: [%0]"));
    CHECK(contains(broken([](Graph& g) { g.outputs.push_back(7); }), "output 2 is %7, which is not a node"));
    CHECK(contains(broken([](Graph& g) { g.outputs.push_back(-1); }), "output 2 is %-1"));
    CHECK(contains(broken([](Graph& g) { g.nodes[1].value = Tensor::ones({783}); }),
                   "%1 = constant: the value is f32[783] but the node's type is f32[784]"));
    CHECK(contains(broken([](Graph& g) { g.nodes[1].value = Tensor::ones({784}, DType::f64); }),
                   "the value is f64[784]"));
    CHECK(contains(broken([](Graph& g) { g.nodes[1].value = Tensor(); }),
                   "%1 = constant: a constant must hold a defined value"));
    CHECK(contains(broken([](Graph& g) { g.nodes[1].value = Tensor::ones({1568}).slice(0, 0, 1568, 2); }),
                   "contiguous"));
    CHECK(contains(broken([](Graph& g) { g.nodes[0].attrs = Attrs().set("name", std::int64_t{1}); }),
                   "%0 = input: attribute 'name' must be string, got int 1"));
    CHECK(contains(broken([](Graph& g) { g.nodes[5].attrs.set("dtype", std::string("i64")); }),
                   "%5 = cast: attribute 'dtype' must be dtype, got string \"i64\""));
    CHECK(contains(broken([](Graph& g) { g.nodes[6].attrs.set("lo", 7.0); }), "%6 = clamp: clamp: expected lo <= hi"));
    CHECK(contains(broken([](Graph& g) { g.name = "named"; g.nodes[4].type.dims[0] = Dim(-1); }),
                   "graph \"named\": %4 = reshape: type f32[-1,28,28] has an invalid dim -1 at axis 0"));
    // The verifier's errors are kiln::Errors that carry the node.
    Builder b = example_builder();
    b.g.nodes[4].type.dtype = DType::f64;
    try {
        verify(b.g);
        FAIL("expected a VerifyError");
    } catch (const VerifyError& e) {
        CHECK(e.node() == 4);
    }
}

TEST_CASE("ir hash: equal structures hash equal, whatever their names") {
    Builder a = example_builder(), b = example_builder();
    b.g.name = "another name";
    CHECK(structurally_equal(a.g, b.g));
    CHECK(structural_hash(a.g) == structural_hash(b.g));
    // A reparsed graph holds copies of the constants, not the same storage.
    std::shared_ptr<const Graph> p = parse(print(a.g));
    CHECK(!p->nodes[1].value.shares_storage(a.g.nodes[1].value));
    CHECK(structurally_equal(a.g, *p));
    CHECK(structural_hash(a.g) == structural_hash(*p));
    // NaN attributes are equal to themselves (bitwise comparison).
    Builder n1("n"), n2("n");
    for (Builder* nb : {&n1, &n2}) {
        ValueId x = nb->input("x", DType::f32, {2});
        nb->add(Op::pad, {x}, Attrs().set("pads", std::vector<std::int64_t>{0, 0}).set("value", std::nan("")));
    }
    CHECK(structurally_equal(n1.g, n2.g));
    CHECK(structural_hash(n1.g) == structural_hash(n2.g));
}

TEST_CASE("ir hash: one attribute, one constant byte or one edge changes the hash") {
    Builder base = example_builder();
    const std::uint64_t h = structural_hash(base.g);
    auto differs = [&](auto&& edit) {
        Builder b = example_builder();
        edit(b.g);
        CHECK(!structurally_equal(base.g, b.g));
        CHECK(!structurally_equal(b.g, base.g));
        return structural_hash(b.g) != h;
    };
    CHECK(differs([](Graph& g) { g.nodes[3].attrs.set("keepdim", std::int64_t{1}); }));
    CHECK(differs([](Graph& g) { g.nodes[3].attrs.set("keepdim", 0.0); }));  // same value, other kind
    CHECK(differs([](Graph& g) { g.nodes[6].attrs.set("hi", 6.000000000000001); }));
    CHECK(differs([](Graph& g) { g.nodes[6].attrs.set("lo", -1.5).set("zz", std::string("")); }));
    CHECK(differs([](Graph& g) { g.nodes[5].attrs.set("dtype", DType::i32); }));
    CHECK(differs([](Graph& g) { g.nodes[4].attrs.set("shape", std::vector<Dim>{dyn("batch"), 28, 28, 1}); }));
    CHECK(differs([](Graph& g) { g.nodes[0].attrs.set("name", std::string("y")); }));
    CHECK(differs([](Graph& g) {
        Tensor t = g.nodes[1].value.clone();
        static_cast<unsigned char*>(t.data())[3 * 784 - 1] ^= 1;
        g.nodes[1].value = t;
    }));
    CHECK(differs([](Graph& g) {
        Tensor t = g.nodes[1].value.clone();
        static_cast<unsigned char*>(t.data())[0] ^= 0x80;
        g.nodes[1].value = t;
    }));
    CHECK(differs([](Graph& g) { g.nodes[1].value = g.nodes[1].value.reshape({28, 28}); }));
    CHECK(differs([](Graph& g) { g.nodes[6].inputs[0] = 4; }));
    CHECK(differs([](Graph& g) { g.nodes[6].op = Op::relu; }));
    CHECK(differs([](Graph& g) { g.nodes[0].type.dims[0] = dyn("batch2"); }));
    CHECK(differs([](Graph& g) { g.nodes[0].type.dims[0] = Dim(2) * dyn("batch"); }));
    CHECK(differs([](Graph& g) { g.outputs = {4, 3}; }));
    CHECK(differs([](Graph& g) { g.outputs.push_back(3); }));
    CHECK(differs([](Graph& g) { g.inputs.clear(); }));
    // -0.0 and 0.0 are different attributes (bitwise).
    Builder z1("z"), z2("z");
    ValueId x1 = z1.input("x", DType::f32, {2}), x2 = z2.input("x", DType::f32, {2});
    z1.add(Op::pad, {x1}, Attrs().set("pads", std::vector<std::int64_t>{0, 0}).set("value", 0.0));
    z2.add(Op::pad, {x2}, Attrs().set("pads", std::vector<std::int64_t>{0, 0}).set("value", -0.0));
    CHECK(!structurally_equal(z1.g, z2.g));
    CHECK(structural_hash(z1.g) != structural_hash(z2.g));
}
