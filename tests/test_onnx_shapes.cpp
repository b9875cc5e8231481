// Shape values in the ONNX importer (src/onnx/sym_value.h, ops_symbolic.cpp): small models
// with symbolic input dims whose shape subgraphs (Shape, Gather, Concat, arithmetic, ...)
// Kiln folds at load time into symbolic dims give the expected graph and, on the
// interpreter at several sizes, the values of a naive computation; shape subgraphs Kiln
// cannot carry exactly give a kiln::Error naming the node; and shape values used as data
// are computed at run time.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "error_of.h"
#include "skip.h"

#if defined(KILN_HAVE_ONNX)
#include "tests/onnx/model_builder.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using namespace kiln;
namespace ot = onnx_test;
using TP = ot::pb::TensorProto;

namespace {

Options interp() {
    Options o;
    o.jit = false;
    return o;
}

using kiln::test::error_of;

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

int onnx_type(DType t) {
    switch (t) {
    case DType::f32: return TP::FLOAT;
    case DType::f64: return TP::DOUBLE;
    case DType::i32: return TP::INT32;
    case DType::i64: return TP::INT64;
    case DType::u8: return TP::UINT8;
    case DType::boolean: return TP::BOOL;
    default: FAIL("no ONNX type for " << dtype_name(t)); return 0;
    }
}

// A TensorProto of any of the dtypes above, its values as raw_data.
void fill(ot::pb::TensorProto* p, const Tensor& t) {
    p->set_data_type(onnx_type(t.dtype()));
    for (auto d : t.shape()) p->add_dims(d);
    Tensor c = t.contiguous();
    p->set_raw_data(std::string(static_cast<const char*>(c.data()), static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype())));
}
void init(ot::pb::GraphProto* g, const std::string& name, const Tensor& t) {
    auto* p = g->add_initializer();
    p->set_name(name);
    fill(p, t);
}
void ints(ot::pb::GraphProto* g, const std::string& name, const std::vector<std::int64_t>& v) {
    init(g, name, Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())}));
}
void scalar(ot::pb::GraphProto* g, const std::string& name, std::int64_t v) {
    init(g, name, Tensor::from_vector(std::vector<std::int64_t>{v}, {}));
}
// A graph output with its element type and no declared shape.
void out(ot::pb::GraphProto* g, const std::string& name, int elem) {
    ot::output(g, name, elem, {});
    g->mutable_output(g->output_size() - 1)->mutable_type()->mutable_tensor_type()->clear_shape();
}
void tensor_attr(ot::pb::NodeProto* n, const std::string& name, const Tensor& t) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(ot::pb::AttributeProto::TENSOR);
    fill(a->mutable_t(), t);
}
std::string S(const char* s) { return s; }  // a dim_param
ot::DimSpec N(std::int64_t v) { return v; }

// Shape(x) -> "<prefix>shape"; Gather of index i (a scalar) -> "<prefix>d<i>" for each i.
void dims_of(ot::pb::GraphProto* g, const std::string& x, const std::string& prefix, const std::vector<std::int64_t>& idx) {
    ot::node(g, "Shape", {x}, {prefix + "shape"});
    for (std::int64_t i : idx) {
        const std::string k = prefix + "idx" + std::to_string(i);
        scalar(g, k, i);
        ot::node(g, "Gather", {prefix + "shape", k}, {prefix + "d" + std::to_string(i)});
    }
}
// Unsqueeze(v, axes [0]) -> out (opset 13: axes as an input).
void unsq(ot::pb::GraphProto* g, const std::string& v, const std::string& o) {
    bool have_axes = false;
    for (const auto& i : g->initializer()) have_axes |= i.name() == "axes0";
    if (!have_axes) ints(g, "axes0", {0});
    ot::node(g, "Unsqueeze", {v, "axes0"}, {o});
}

Graph load(const ot::pb::ModelProto& m) { return load_onnx_from_memory(ot::bytes(m)); }

// A tensor of shape s with distinct values (for its first 1000 elements).
Tensor iota(const Shape& s, DType dt = DType::f32) {
    std::int64_t n = 1;
    for (auto d : s) n *= d;
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 1000) * 0.5 - 3;
    return Tensor::from_vector(v, s).astype(dt);
}

}  // namespace

TEST_CASE("onnx shapes: Reshape to dims gathered from Shape keeps them symbolic") {
    // x[?b,?s,8] -> Reshape(x, Concat(Unsqueeze(Gather(Shape(x),0)), Unsqueeze(Gather(Shape(x),1)), [2], [4]))
    // and Reshape(x, Concat(Unsqueeze(?b * ?s), [8])), Reshape(x, Unsqueeze(ReduceProd(Shape(x)))).
    ot::pb::ModelProto m = ot::model(13);
    auto* g = m.mutable_graph();
    ot::input(g, "x", TP::FLOAT, {S("b"), S("s"), N(8)});
    dims_of(g, "x", "x_", {0, 1});
    unsq(g, "x_d0", "b1");
    unsq(g, "x_d1", "s1");
    ints(g, "c2", {2});
    ints(g, "c4", {4});
    ints(g, "c8", {8});
    ot::attr(ot::node(g, "Concat", {"b1", "s1", "c2", "c4"}, {"shape4"}), "axis", std::int64_t{0});
    ot::node(g, "Reshape", {"x", "shape4"}, {"y4"}, "reshape4");
    ot::node(g, "Mul", {"x_d0", "x_d1"}, {"bs"});
    unsq(g, "bs", "bs1");
    ot::attr(ot::node(g, "Concat", {"bs1", "c8"}, {"shape2"}), "axis", std::int64_t{0});
    ot::node(g, "Reshape", {"x", "shape2"}, {"y2"}, "reshape2");
    ot::attr(ot::node(g, "ReduceProd", {"x_shape"}, {"numel"}), "keepdims", std::int64_t{1});
    ot::node(g, "Reshape", {"x", "numel"}, {"y1"}, "reshape1");
    out(g, "y4", TP::FLOAT);
    out(g, "y2", TP::FLOAT);
    out(g, "y1", TP::FLOAT);
    Graph gr = load(m);
    const Dim b = dyn("b"), s = dyn("s");
    REQUIRE(gr.outputs().size() == 3);
    CHECK(gr.outputs()[0].dims == std::vector<Dim>{b, s, 2, 4});
    CHECK(gr.outputs()[1].dims == std::vector<Dim>{b * s, 8});
    CHECK(gr.outputs()[2].dims == std::vector<Dim>{b * s * Dim(8)});
    const std::string text = gr.to_string();
    CAPTURE(text);
    CHECK(has(text, "?b*?s"));
    CHECK(has(text, "8*?b*?s"));
    CHECK(!has(text, "concat"));  // folded: no shape arithmetic at run time
    Function f = Engine(interp()).load(gr);
    for (auto sz : {std::pair<std::int64_t, std::int64_t>{1, 1}, {2, 3}, {3, 5}}) {
        const std::int64_t bb = sz.first, ss = sz.second;
        CAPTURE(bb);
        CAPTURE(ss);
        Tensor x = iota({bb, ss, 8});
        auto y = f({x});
        CHECK(y[0].shape() == Shape{bb, ss, 2, 4});
        CHECK(y[1].shape() == Shape{bb * ss, 8});
        CHECK(y[2].shape() == Shape{bb * ss * 8});
        for (const Tensor& t : y) CHECK(t.to_doubles() == x.to_doubles());
    }
}

TEST_CASE("onnx shapes: Expand, ConstantOfShape and the expand -1 pattern take symbolic dims") {
    ot::pb::ModelProto m = ot::model(13);
    auto* g = m.mutable_graph();
    ot::input(g, "x", TP::FLOAT, {S("b"), S("s"), N(8)});
    const Tensor w = Tensor::randn({1, 1, 8}, 3), w2 = Tensor::randn({1, 8}, 4);
    init(g, "w", w);
    init(g, "w2", w2);
    ot::node(g, "Shape", {"x"}, {"xs"});
    ints(g, "i0", {0});
    ot::node(g, "Gather", {"xs", "i0"}, {"b1"});  // [?b]
    ints(g, "one", {1});
    ints(g, "eight", {8});
    ot::attr(ot::node(g, "Concat", {"b1", "one", "eight"}, {"eshape"}), "axis", std::int64_t{0});
    ot::node(g, "Expand", {"w", "eshape"}, {"e"}, "expand_w");  // [?b,1,8]
    tensor_attr(ot::node(g, "ConstantOfShape", {"xs"}, {"c"}, "fill"), "value", Tensor::full({1}, 3.5));
    // PyTorch's w2.expand(b, -1): shape [?b, -1]; Where(Equal(shape, -1), ones, shape) -> [?b, 1].
    ints(g, "minus1", {-1});
    ot::attr(ot::node(g, "Concat", {"b1", "minus1"}, {"tshape"}), "axis", std::int64_t{0});
    ot::node(g, "Equal", {"tshape", "minus1"}, {"is_neg"});
    ints(g, "ones", {1, 1});
    ot::node(g, "Where", {"is_neg", "ones", "tshape"}, {"wshape"});
    ot::node(g, "Expand", {"w2", "wshape"}, {"e2"}, "expand_minus1");  // [?b, 8]
    out(g, "e", TP::FLOAT);
    out(g, "c", TP::FLOAT);
    out(g, "e2", TP::FLOAT);
    Graph gr = load(m);
    const Dim b = dyn("b"), s = dyn("s");
    CHECK(gr.outputs()[0].dims == std::vector<Dim>{b, 1, 8});
    CHECK(gr.outputs()[1].dims == std::vector<Dim>{b, s, 8});
    CHECK(gr.outputs()[2].dims == std::vector<Dim>{b, 8});
    CAPTURE(gr.to_string());
    CHECK(!has(gr.to_string(), "where"));  // the condition folded
    Function f = Engine(interp()).load(gr);
    for (auto sz : {std::pair<std::int64_t, std::int64_t>{1, 2}, {3, 1}, {4, 5}}) {
        const std::int64_t bb = sz.first, ss = sz.second;
        CAPTURE(bb);
        CAPTURE(ss);
        auto y = f({iota({bb, ss, 8})});
        REQUIRE(y[0].shape() == Shape{bb, 1, 8});
        REQUIRE(y[1].shape() == Shape{bb, ss, 8});
        REQUIRE(y[2].shape() == Shape{bb, 8});
        const auto wv = w.to_doubles(), w2v = w2.to_doubles(), e = y[0].to_doubles(), e2 = y[2].to_doubles();
        for (std::int64_t i = 0; i < bb * 8; ++i) {
            CHECK(e[static_cast<std::size_t>(i)] == wv[static_cast<std::size_t>(i % 8)]);
            CHECK(e2[static_cast<std::size_t>(i)] == w2v[static_cast<std::size_t>(i % 8)]);
        }
        for (double v : y[1].to_doubles()) CHECK(v == 3.5);
    }
}

TEST_CASE("onnx shapes: Range over symbolic bounds, a KV cache's ?past+?seq and exact Div") {
    // kv = Concat(past[1,2,?past,4], k[1,2,?seq,4], axis 2) has ?past+?seq rows; position ids
    // Range(?past, ?past+?seq, 1) have ?seq; Range(0, ?seq, 1) cast to f32 is added to k; and
    // Reshape(k, [4*?seq/2, -1]) divides exactly.
    ot::pb::ModelProto m = ot::model(13);
    auto* g = m.mutable_graph();
    ot::input(g, "past", TP::FLOAT, {N(1), N(2), S("past"), N(4)});
    ot::input(g, "k", TP::FLOAT, {N(1), N(2), S("seq"), N(4)});
    ot::attr(ot::node(g, "Concat", {"past", "k"}, {"kv"}, "cat_kv"), "axis", std::int64_t{2});
    dims_of(g, "kv", "kv_", {2});
    dims_of(g, "past", "p_", {2});
    dims_of(g, "k", "k_", {2});
    scalar(g, "zero", 0);
    scalar(g, "step", 1);
    ot::node(g, "Range", {"p_d2", "kv_d2", "step"}, {"pos"}, "position_ids");
    ot::node(g, "Range", {"zero", "k_d2", "step"}, {"r"}, "range_seq");
    ot::attr(ot::node(g, "Cast", {"r"}, {"rf"}), "to", std::int64_t{TP::FLOAT});
    ints(g, "ax1", {1});
    ot::node(g, "Unsqueeze", {"rf", "ax1"}, {"rf1"});  // [?seq, 1]
    ot::node(g, "Add", {"k", "rf1"}, {"kr"});
    scalar(g, "four", 4);
    scalar(g, "two", 2);
    ot::node(g, "Mul", {"four", "k_d2"}, {"k4"});
    ot::node(g, "Div", {"k4", "two"}, {"k2"});  // 4*?seq / 2 = 2*?seq
    unsq(g, "k2", "k2_1");
    ints(g, "minus1", {-1});
    ot::attr(ot::node(g, "Concat", {"k2_1", "minus1"}, {"rshape"}), "axis", std::int64_t{0});
    ot::node(g, "Reshape", {"k", "rshape"}, {"kk"}, "reshape_div");
    out(g, "kv", TP::FLOAT);
    out(g, "pos", TP::INT64);
    out(g, "kr", TP::FLOAT);
    out(g, "kk", TP::FLOAT);
    Graph gr = load(m);
    const Dim past = dyn("past"), seq = dyn("seq");
    CHECK(gr.outputs()[0].dims == std::vector<Dim>{1, 2, past + seq, 4});
    CHECK(gr.outputs()[1].dims == std::vector<Dim>{seq});
    CHECK(gr.outputs()[2].dims == std::vector<Dim>{1, 2, seq, 4});
    CHECK(gr.outputs()[3].dims == std::vector<Dim>{Dim(2) * seq, 4});
    const std::string text = gr.to_string();
    CAPTURE(text);
    CHECK(has(text, "?past+?seq"));
    CHECK(has(text, "2*?seq"));
    CHECK(has(text, "arange"));
    Function f = Engine(interp()).load(gr);
    for (auto sz : {std::pair<std::int64_t, std::int64_t>{0, 1}, {3, 1}, {2, 5}}) {
        const std::int64_t pp = sz.first, ss = sz.second;
        CAPTURE(pp);
        CAPTURE(ss);
        Tensor pt = iota({1, 2, pp, 4}), kt = Tensor::randn({1, 2, ss, 4}, 9);
        auto y = f({pt, kt});
        REQUIRE(y[0].shape() == Shape{1, 2, pp + ss, 4});
        REQUIRE(y[1].shape() == Shape{ss});
        REQUIRE(y[3].shape() == Shape{2 * ss, 4});
        std::vector<std::int64_t> ids;
        for (std::int64_t i = 0; i < ss; ++i) ids.push_back(pp + i);
        CHECK(y[1].to_vector<std::int64_t>() == ids);
        const auto k = kt.to_doubles(), kr = y[2].to_doubles();
        for (std::size_t i = 0; i < k.size(); ++i) CHECK(kr[i] == doctest::Approx(k[i] + static_cast<double>((i / 4) % static_cast<std::size_t>(ss))));
        CHECK(y[3].to_doubles() == k);
        // kv: per head, past's rows then k's.
        const auto p = pt.to_doubles(), kv = y[0].to_doubles();
        for (std::int64_t h = 0; h < 2; ++h)
            for (std::int64_t r = 0; r < pp + ss; ++r)
                for (std::int64_t c = 0; c < 4; ++c) {
                    const double want = r < pp ? p[static_cast<std::size_t>((h * pp + r) * 4 + c)]
                                               : k[static_cast<std::size_t>((h * ss + r - pp) * 4 + c)];
                    CHECK(kv[static_cast<std::size_t>((h * (pp + ss) + r) * 4 + c)] == want);
                }
    }
}

TEST_CASE("onnx shapes: GPT-2's causal mask, a Slice of a constant from ?k-?q to ?k, becomes a narrow") {
    // bias[:, :, k_len - q_len : k_len, :k_len] of a [1,1,16,16] lower-triangular bool mask.
    ot::pb::ModelProto m = ot::model(13);
    auto* g = m.mutable_graph();
    ot::input(g, "q", TP::FLOAT, {N(1), N(2), S("q"), N(4)});
    ot::input(g, "k", TP::FLOAT, {N(1), N(2), S("k"), N(4)});
    std::vector<std::uint8_t> tri(16 * 16);
    for (std::size_t i = 0; i < 16; ++i)
        for (std::size_t j = 0; j < 16; ++j) tri[i * 16 + j] = j <= i ? 1 : 0;
    init(g, "bias", Tensor::from_vector(tri, {1, 1, 16, 16}).astype(DType::boolean));
    dims_of(g, "q", "q_", {2});
    dims_of(g, "k", "k_", {2});
    ot::node(g, "Sub", {"k_d2", "q_d2"}, {"start"});
    unsq(g, "start", "start1");
    unsq(g, "k_d2", "klen1");
    ints(g, "zero1", {0});
    ot::attr(ot::node(g, "Concat", {"start1", "zero1"}, {"starts"}), "axis", std::int64_t{0});
    ot::attr(ot::node(g, "Concat", {"klen1", "klen1"}, {"ends"}), "axis", std::int64_t{0});
    ints(g, "axes23", {2, 3});
    ot::node(g, "Slice", {"bias", "starts", "ends", "axes23"}, {"mask"}, "causal_mask");
    // Scores masked with it: Where(mask, q @ k^T, -1e4).
    ot::attr(ot::node(g, "Transpose", {"k"}, {"kt"}), "perm", std::vector<std::int64_t>{0, 1, 3, 2});
    ot::node(g, "MatMul", {"q", "kt"}, {"scores"});
    init(g, "neg", Tensor::full({}, -1e4));
    ot::node(g, "Where", {"mask", "scores", "neg"}, {"masked"});
    out(g, "mask", TP::BOOL);
    out(g, "masked", TP::FLOAT);
    Graph gr = load(m);
    const Dim q = dyn("q"), k = dyn("k");
    CHECK(gr.outputs()[0].dims == std::vector<Dim>{1, 1, q, k});
    CHECK(gr.outputs()[1].dims == std::vector<Dim>{1, 2, q, k});
    const std::string text = gr.to_string();
    CAPTURE(text);
    CHECK(has(text, "narrow"));
    CHECK(has(text, "?k-?q"));
    Function f = Engine(interp()).load(gr);
    for (auto sz : {std::pair<std::int64_t, std::int64_t>{1, 5}, {3, 3}, {2, 7}}) {
        const std::int64_t ql = sz.first, kl = sz.second;
        CAPTURE(ql);
        CAPTURE(kl);
        Tensor qt = Tensor::randn({1, 2, ql, 4}, 5), kt = Tensor::randn({1, 2, kl, 4}, 6);
        auto y = f({qt, kt});
        REQUIRE(y[0].shape() == Shape{1, 1, ql, kl});
        REQUIRE(y[1].shape() == Shape{1, 2, ql, kl});
        const auto mask = y[0].to_doubles(), masked = y[1].to_doubles(), qv = qt.to_doubles(), kv = kt.to_doubles();
        for (std::int64_t i = 0; i < ql; ++i)
            for (std::int64_t j = 0; j < kl; ++j) {
                const bool visible = j <= kl - ql + i;  // row kl - ql + i of the triangle
                CHECK(mask[static_cast<std::size_t>(i * kl + j)] == (visible ? 1.0 : 0.0));
                for (std::int64_t h = 0; h < 2; ++h) {
                    double dot = 0;
                    for (std::int64_t c = 0; c < 4; ++c)
                        dot += qv[static_cast<std::size_t>((h * ql + i) * 4 + c)] * kv[static_cast<std::size_t>((h * kl + j) * 4 + c)];
                    const double got = masked[static_cast<std::size_t>((h * ql + i) * kl + j)];
                    CHECK(got == doctest::Approx(visible ? dot : -1e4).epsilon(1e-5));
                }
            }
    }
    // A query longer than the keys: the narrow's start ?k-?q is negative, an error at run time.
    CHECK(!error_of([&] { f({Tensor::randn({1, 2, 3, 4}, 5), Tensor::randn({1, 2, 2, 4}, 6)}); }).empty());
}

TEST_CASE("onnx shapes: shape values used as data are computed at run time") {
    // Cast(Shape(x), f32) * w; Shape(x) + t (an i64 input); Shape(x) and Size(x) as outputs;
    // ?s / 2 and Max(?b, 2), which do not fold, computed from the materialised dims.
    ot::pb::ModelProto m = ot::model(13);
    auto* g = m.mutable_graph();
    ot::input(g, "x", TP::FLOAT, {S("b"), S("s"), N(8)});
    ot::input(g, "t", TP::INT64, {N(3)});
    const Tensor w = Tensor::from_vector(std::vector<float>{0.5f, -2.0f, 3.0f}, {3});
    init(g, "w", w);
    ot::node(g, "Shape", {"x"}, {"xs"});
    ot::attr(ot::node(g, "Cast", {"xs"}, {"xsf"}), "to", std::int64_t{TP::FLOAT});
    ot::node(g, "Mul", {"xsf", "w"}, {"scaled"}, "scale_shape");
    ot::node(g, "Add", {"xs", "t"}, {"shifted"}, "shift_shape");
    ot::node(g, "Size", {"x"}, {"numel"});
    scalar(g, "i0", 0);
    scalar(g, "i1", 1);
    scalar(g, "two", 2);
    ot::node(g, "Gather", {"xs", "i0"}, {"b"});
    ot::node(g, "Gather", {"xs", "i1"}, {"s"});
    ot::node(g, "Div", {"s", "two"}, {"half"}, "half_s");
    ot::node(g, "Max", {"b", "two"}, {"bmax"}, "max_b");
    out(g, "scaled", TP::FLOAT);
    out(g, "shifted", TP::INT64);
    out(g, "xs", TP::INT64);
    out(g, "numel", TP::INT64);
    out(g, "half", TP::INT64);
    out(g, "bmax", TP::INT64);
    Graph gr = load(m);
    CHECK(gr.outputs()[0].dims == std::vector<Dim>{3});
    CHECK(gr.outputs()[3].dims.empty());
    CHECK(gr.outputs()[4].dims.empty());
    Function f = Engine(interp()).load(gr);
    const Tensor t = Tensor::from_vector(std::vector<std::int64_t>{10, -20, 30}, {3});
    for (auto sz : {std::pair<std::int64_t, std::int64_t>{1, 1}, {3, 2}, {2, 7}, {5, 4}}) {
        const std::int64_t bb = sz.first, ss = sz.second;
        CAPTURE(bb);
        CAPTURE(ss);
        auto y = f({iota({bb, ss, 8}), t});
        CHECK(y[0].to_doubles() == std::vector<double>{0.5 * static_cast<double>(bb), -2.0 * static_cast<double>(ss), 24.0});
        CHECK(y[1].to_vector<std::int64_t>() == std::vector<std::int64_t>{10 + bb, ss - 20, 38});
        CHECK(y[2].to_vector<std::int64_t>() == std::vector<std::int64_t>{bb, ss, 8});
        CHECK(y[3].shape() == Shape{});
        CHECK(y[3].to_vector<std::int64_t>() == std::vector<std::int64_t>{bb * ss * 8});
        CHECK(y[4].to_vector<std::int64_t>() == std::vector<std::int64_t>{ss / 2});
        CHECK(y[5].to_vector<std::int64_t>() == std::vector<std::int64_t>{std::max<std::int64_t>(bb, 2)});
    }
}

namespace {

// x[?b, ?s] f32, Shape(x) -> "xs", Gather(xs, [0]) -> "b1" ([?b]), Gather(xs, [1]) -> "s1".
ot::pb::ModelProto symbolic_model(ot::pb::GraphProto*& g) {
    ot::pb::ModelProto m = ot::model(13);
    g = m.mutable_graph();
    ot::input(g, "x", TP::FLOAT, {S("b"), S("s")});
    ot::node(g, "Shape", {"x"}, {"xs"});
    ints(g, "i0", {0});
    ints(g, "i1", {1});
    ot::node(g, "Gather", {"xs", "i0"}, {"b1"});
    ot::node(g, "Gather", {"xs", "i1"}, {"s1"});
    return m;
}

// Loads a model that must fail; its message must name the node and say `why`.
void check_rejected(ot::pb::ModelProto m, const std::string& output, const std::string& node, const std::vector<std::string>& why) {
    out(m.mutable_graph(), output, TP::FLOAT);
    const std::string e = error_of([&] { load(m); });
    CAPTURE(e);
    CHECK(has(e, "'" + node + "'"));
    for (const std::string& w : why) CHECK(has(e, w));
}

}  // namespace

TEST_CASE("onnx shapes: what cannot be folded exactly gives a kiln::Error naming the node") {
    const std::string runtime = "computed from sizes known only at run time";
    ot::pb::GraphProto* g = nullptr;
    SUBCASE("Tile repeats from Shape") {
        auto m = symbolic_model(g);
        ot::node(g, "Tile", {"x", "xs"}, {"y"}, "tile_by_shape");
        check_rejected(m, "y", "tile_by_shape", {runtime, "repeats", "[?b,?s]"});
    }
    SUBCASE("Split sizes from Shape") {
        auto m = symbolic_model(g);
        ot::attr(ot::node(g, "Split", {"x", "xs"}, {"y", "z"}, "split_by_shape"), "axis", std::int64_t{1});
        check_rejected(m, "y", "split_by_shape", {runtime, "split"});
    }
    SUBCASE("Range whose count does not divide exactly") {
        auto m = symbolic_model(g);
        scalar(g, "zero", 0);
        scalar(g, "two", 2);
        scalar(g, "i1s", 1);
        ot::node(g, "Gather", {"xs", "i1s"}, {"s"});
        ot::node(g, "Range", {"zero", "s", "two"}, {"y"}, "range_by_two");
        check_rejected(m, "y", "range_by_two", {"only an exact division"});
    }
    SUBCASE("Range with a float start that is not an integer") {
        auto m = symbolic_model(g);
        init(g, "half", Tensor::full({}, 0.5));
        init(g, "onef", Tensor::full({}, 1.0));
        scalar(g, "i1s", 1);
        ot::node(g, "Gather", {"xs", "i1s"}, {"s"});
        ot::attr(ot::node(g, "Cast", {"s"}, {"sf"}), "to", std::int64_t{TP::FLOAT});
        ot::node(g, "Range", {"half", "sf", "onef"}, {"y"}, "range_half");
        check_rejected(m, "y", "range_half", {"start (f32[])", "integral value"});
    }
    SUBCASE("Slice with a bound -?s counting from the end") {
        auto m = symbolic_model(g);
        ot::node(g, "Neg", {"s1"}, {"neg_s"});
        ints(g, "big", {std::numeric_limits<std::int64_t>::max()});
        ints(g, "ax1", {1});
        ot::node(g, "Slice", {"x", "neg_s", "big", "ax1"}, {"y"}, "slice_from_end");
        check_rejected(m, "y", "slice_from_end", {"-?s", "counts from the end"});
    }
    SUBCASE("Slice with step 2 and a symbolic bound") {
        auto m = symbolic_model(g);
        ints(g, "zero1", {0});
        ints(g, "ax1", {1});
        ints(g, "two1", {2});
        ot::node(g, "Slice", {"x", "zero1", "s1", "ax1", "two1"}, {"y"}, "slice_step2");
        check_rejected(m, "y", "slice_step2", {"needs step 1", "got 2"});
    }
    SUBCASE("Unsqueeze axes from a shape value") {
        auto m = symbolic_model(g);
        ot::node(g, "Unsqueeze", {"x", "b1"}, {"y"}, "unsqueeze_by_shape");
        check_rejected(m, "y", "unsqueeze_by_shape", {runtime, "axes", "[?b]"});
    }
    SUBCASE("Pad pads from a shape value") {
        auto m = symbolic_model(g);
        ot::attr(ot::node(g, "Concat", {"xs", "xs"}, {"pads"}), "axis", std::int64_t{0});
        ot::node(g, "Pad", {"x", "pads"}, {"y"}, "pad_by_shape");
        check_rejected(m, "y", "pad_by_shape", {runtime, "pads"});
    }
    SUBCASE("ReduceSum axes from a shape value") {
        auto m = symbolic_model(g);
        ot::node(g, "ReduceSum", {"x", "s1"}, {"y"}, "reduce_by_shape");
        check_rejected(m, "y", "reduce_by_shape", {runtime, "axes", "[?s]"});
    }
    SUBCASE("Reshape to a size that does not divide (?s / 2, computed at run time)") {
        auto m = symbolic_model(g);
        ints(g, "two1", {2});
        ot::node(g, "Div", {"s1", "two1"}, {"half"});
        ints(g, "minus1", {-1});
        ot::attr(ot::node(g, "Concat", {"half", "minus1"}, {"shape"}), "axis", std::int64_t{0});
        ot::node(g, "Reshape", {"x", "shape"}, {"y"}, "reshape_half");
        check_rejected(m, "y", "reshape_half", {"computed at run time from sizes", "give the symbolic dims fixed sizes"});
    }
    SUBCASE("Expand to a shape chosen by a condition on the sizes") {
        auto m = symbolic_model(g);
        ot::node(g, "Equal", {"b1", "s1"}, {"same"});  // ?b == ?s: not known while loading
        ot::node(g, "Where", {"same", "b1", "s1"}, {"pick"});
        ints(g, "one1", {1});
        ot::attr(ot::node(g, "Concat", {"pick", "one1"}, {"shape"}), "axis", std::int64_t{0});
        ot::node(g, "Expand", {"x", "shape"}, {"y"}, "expand_where");
        check_rejected(m, "y", "expand_where", {"computed at run time from sizes", "give the symbolic dims fixed sizes"});
    }
}

TEST_CASE("onnx shapes: extreme steps, empty operands and INT64_MIN / -1 in shape arithmetic") {
    // Regressions: Slice of a shape value with step INT64_MAX overflowed its index (reading far
    // outside the value); Add of a one-element shape value and an empty constant read an
    // element of the empty one; Div of INT64_MIN by -1 while folding is undefined (SIGFPE).
    ot::pb::ModelProto m = ot::model(13);
    auto* g = m.mutable_graph();
    ot::input(g, "x", TP::FLOAT, {S("b"), S("s")});
    ot::node(g, "Shape", {"x"}, {"xs"});
    const std::int64_t max = std::numeric_limits<std::int64_t>::max(), min = std::numeric_limits<std::int64_t>::min();
    ints(g, "zero1", {0});
    ints(g, "one1", {1});
    ints(g, "minus1", {-1});
    ints(g, "max1", {max});
    ints(g, "min1", {min});
    ints(g, "empty", {});
    ot::node(g, "Slice", {"xs", "one1", "max1", "zero1", "max1"}, {"second"}, "slice_step_max");  // [?s]
    ot::node(g, "Slice", {"xs", "minus1", "min1", "zero1", "min1"}, {"last"}, "slice_step_min");  // [?s]
    ot::node(g, "Gather", {"xs", "zero1"}, {"first"});                                           // [?b]
    ot::node(g, "Add", {"first", "empty"}, {"none"}, "add_empty");                               // []
    ot::node(g, "Add", {"empty", "second"}, {"none2"}, "add_empty2");                            // []
    ot::attr(ot::node(g, "Concat", {"first", "min1"}, {"bmin"}), "axis", std::int64_t{0});     // [?b, INT64_MIN]
    ot::node(g, "Div", {"bmin", "minus1"}, {"q"}, "div_min");                                   // at run time
    out(g, "second", TP::INT64);
    out(g, "last", TP::INT64);
    out(g, "none", TP::INT64);
    out(g, "none2", TP::INT64);
    out(g, "q", TP::INT64);
    Graph gr = load(m);
    CHECK(gr.outputs()[0].dims == std::vector<Dim>{1});
    CHECK(gr.outputs()[1].dims == std::vector<Dim>{1});
    CHECK(gr.outputs()[2].dims == std::vector<Dim>{0});
    CHECK(gr.outputs()[3].dims == std::vector<Dim>{0});
    CHECK(gr.outputs()[4].dims == std::vector<Dim>{2});
    Function f = Engine(interp()).load(gr);
    for (std::int64_t s : {1, 4}) {
        auto y = f({iota({3, s})});
        CHECK(y[0].to_vector<std::int64_t>() == std::vector<std::int64_t>{s});
        CHECK(y[1].to_vector<std::int64_t>() == std::vector<std::int64_t>{s});
        CHECK(y[2].numel() == 0);
        CHECK(y[3].numel() == 0);
        CHECK(y[4].to_vector<std::int64_t>().at(0) == -3);
    }
}

TEST_CASE("onnx shapes: repeated squaring of a size loads in bounded time") {
    // s = ?b; s = s * s forty times: ?b^(2^40) as a Dim would hold 2^40 factors. Beyond what
    // exports compute, the importer leaves the product to run time (int64 wrap-around).
    ot::pb::ModelProto m = ot::model(13);
    auto* g = m.mutable_graph();
    ot::input(g, "x", TP::FLOAT, {S("b"), S("c"), S("d")});
    ot::node(g, "Shape", {"x"}, {"xs"});
    ints(g, "i0", {0});
    ot::node(g, "Gather", {"xs", "i0"}, {"v0"});
    // A sum of symbols squared: (?b+?c+?d)^(2^k) has many terms, too.
    ot::attr(ot::node(g, "ReduceSum", {"xs"}, {"w0"}), "keepdims", std::int64_t{1});
    for (int i = 0; i < 40; ++i) {
        ot::node(g, "Mul", {"v" + std::to_string(i), "v" + std::to_string(i)}, {"v" + std::to_string(i + 1)});
        ot::node(g, "Mul", {"w" + std::to_string(i), "w" + std::to_string(i)}, {"w" + std::to_string(i + 1)});
    }
    out(g, "v40", TP::INT64);
    out(g, "w40", TP::INT64);
    Graph gr = load(m);
    Function f = Engine(interp()).load(gr);
    auto y = f({iota({1, 1, 1})});
    CHECK(y[0].to_vector<std::int64_t>() == std::vector<std::int64_t>{1});
    y = f({iota({2, 1, 1})});
    CHECK(y[0].to_vector<std::int64_t>() == std::vector<std::int64_t>{0});  // 2^(2^40) wraps to 0
    CHECK(y[1].to_vector<std::int64_t>() == std::vector<std::int64_t>{0});  // 4^(2^40) too
}

#else
TEST_CASE("onnx shapes: importer tests") { kiln::test::skip("Kiln was built without ONNX"); }
#endif
