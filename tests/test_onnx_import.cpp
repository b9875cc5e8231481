// The ONNX importer: models built from ONNX protobuf messages (an MLP and a CNN) give the
// same outputs as the same models traced with Kiln's API; symbolic dims; load-time inputs;
// and malformed or unsupported models give kiln::Error naming the node, op and attribute.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "reference.h"
#include "skip.h"

#if defined(KILN_HAVE_ONNX)
#include "tests/onnx/model_builder.h"

#include <cstdio>
#include <fstream>
#include <string>

using namespace kiln;
namespace ot = onnx_test;

namespace {

Options interp() {
    Options o;
    o.jit = false;
    return o;
}

// The message of the kiln::Error that `f` throws ("" when it throws none).
template <class F> std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

void check_same(const Graph& a, const Graph& b, const std::vector<Shape>& shapes) {
    Function fa = Engine(interp()).load(a), fb = Engine(interp()).load(b);
    std::uint64_t seed = 100;
    for (const Shape& s : shapes) {
        Tensor x = Tensor::randn(s, seed++);
        auto ya = fa({x}), yb = fb({x});
        REQUIRE(ya.size() == yb.size());
        for (std::size_t i = 0; i < ya.size(); ++i) {
            CHECK(ya[i].shape() == yb[i].shape());
            CHECK(ref::max_rel_diff(ya[i], yb[i]) < 1e-5);
        }
    }
}

}  // namespace

TEST_CASE("onnx: an MLP from protobuf messages matches the traced MLP") {
    ot::Mlp mlp;
    Graph g = load_onnx_from_memory(ot::bytes(mlp.onnx()));
    REQUIRE(g.inputs().size() == 1);
    CHECK(g.inputs()[0].name == "x");
    CHECK(g.inputs()[0].dims[0] == dyn("batch"));  // dim_param becomes a symbol
    CHECK(g.inputs()[0].dims[1] == Dim(16));
    CHECK(g.name() == "test_graph");
    check_same(g, mlp.traced(), {{1, 16}, {7, 16}, {32, 16}});
}

TEST_CASE("onnx: a CNN from protobuf messages matches the traced CNN") {
    ot::Cnn cnn;
    Graph g = load_onnx_from_memory(ot::bytes(cnn.onnx()));
    check_same(g, cnn.traced(), {{1, 3, 12, 12}, {4, 3, 12, 12}});
    // And through the tiered engine (compiled where a tier exists), against the interpreter.
    Options o;
    o.async_compile = false;
    o.tier2_threshold = 0;
    Function fj = Engine(o).load(g), fi = Engine(interp()).load(g);
    Tensor x = Tensor::randn({2, 3, 12, 12}, 5);
    for (int i = 0; i < 2; ++i) CHECK(ref::max_rel_diff(fj({x})[0], fi({x})[0]) < 1e-4);
}

TEST_CASE("onnx: load_onnx reads a file; inspect_onnx reports inputs, outputs and ops") {
    ot::Mlp mlp;
    std::string path = "onnx_import_mlp.onnx";
    {
        std::ofstream out(path, std::ios::binary);
        out << ot::bytes(mlp.onnx());
    }
    Graph g = load_onnx(path);
    CHECK(g.num_nodes() > 4);
    OnnxModelInfo info = inspect_onnx(path);
    CHECK(info.opset == 13);
    CHECK(info.inputs.size() == 1);
    CHECK(info.outputs.size() == 1);
    CHECK(info.op_types == std::vector<std::string>{"Gemm", "Relu", "Softmax"});
    CHECK(info.load_time_inputs.empty());
    CHECK(error_of([&] { load_onnx("no_such_model.onnx"); }).find("cannot open") != std::string::npos);
    std::remove(path.c_str());
}

TEST_CASE("onnx: inputs an op needs while loading are reported and can be given") {
    ot::pb::ModelProto m = ot::model(13);
    auto* g = m.mutable_graph();
    ot::input(g, "x", ot::pb::TensorProto::FLOAT, {std::int64_t{2}, std::int64_t{6}});
    ot::input(g, "shape", ot::pb::TensorProto::INT64, {std::int64_t{2}});
    ot::node(g, "Reshape", {"x", "shape"}, {"y"}, "reshape1");
    ot::output(g, "y", ot::pb::TensorProto::FLOAT, {std::int64_t{3}, std::int64_t{4}});
    std::string bytes = ot::bytes(m);
    OnnxModelInfo info = inspect_onnx_from_memory(bytes);
    CHECK(info.load_time_inputs == std::vector<std::string>{"shape"});
    std::string err = error_of([&] { load_onnx_from_memory(bytes); });
    CHECK(err.find("reshape1") != std::string::npos);
    CHECK(err.find("must be known when the model is loaded") != std::string::npos);
    OnnxOptions opts;
    opts.input_values["shape"] = Tensor::from_vector(std::vector<std::int64_t>{3, -1}, {2});
    Graph gr = load_onnx_from_memory(bytes, opts);
    REQUIRE(gr.inputs().size() == 1);
    Tensor x = Tensor::randn({2, 6}, 1);
    Tensor y = Engine(interp()).load(gr)({x})[0];
    CHECK(y.shape() == Shape{3, 4});
    CHECK(y.to_vector<float>() == x.to_vector<float>());
    opts.input_values["nope"] = x;
    CHECK(error_of([&] { load_onnx_from_memory(bytes, opts); }).find("'nope' is not an input") != std::string::npos);
}

TEST_CASE("onnx: malformed files give kiln::Error") {
    std::string good = ot::bytes(ot::Cnn().onnx());
    // Truncated anywhere.
    for (std::size_t cut : {std::size_t{0}, std::size_t{1}, std::size_t{7}, good.size() / 3, good.size() / 2, good.size() - 1}) {
        INFO("cut at " << cut);
        std::string e = error_of([&] { load_onnx_from_memory(std::string_view(good).substr(0, cut)); });
        CHECK(!e.empty());
    }
    // Not an ONNX file at all.
    CHECK(!error_of([] { load_onnx_from_memory("\x89PNG\r\n\x1a\n not a model"); }).empty());
    CHECK(!error_of([] { load_onnx_from_memory(std::string(64, '\xff')); }).empty());
    // A model with no opset of the default domain.
    ot::pb::ModelProto m = ot::Mlp().onnx();
    m.mutable_opset_import(0)->set_domain("com.example");
    CHECK(error_of([&] { load_onnx_from_memory(ot::bytes(m)); }).find("opset") != std::string::npos);
    // An initializer whose raw data does not match its dims.
    m = ot::Mlp().onnx();
    m.mutable_graph()->mutable_initializer(0)->add_dims(3);
    CHECK(error_of([&] { load_onnx_from_memory(ot::bytes(m)); }).find("raw_data") != std::string::npos);
    // A node reading a value nothing defines.
    m = ot::Mlp().onnx();
    m.mutable_graph()->mutable_node(1)->set_input(0, "ghost");
    CHECK(error_of([&] { load_onnx_from_memory(ot::bytes(m)); }).find("'ghost' is not defined") != std::string::npos);
    // A declared output type that the graph does not compute.
    m = ot::Mlp().onnx();
    m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(ot::pb::TensorProto::INT64);
    CHECK(error_of([&] { load_onnx_from_memory(ot::bytes(m)); }).find("declared i64") != std::string::npos);
    // Dims whose product overflows even when one of them is 0 (found by the fuzzer).
    ot::pb::TensorProto huge;
    huge.set_data_type(ot::pb::TensorProto::FLOAT);
    for (std::int64_t d : {std::int64_t{0}, std::int64_t{1} << 40, std::int64_t{1} << 40}) huge.add_dims(d);
    CHECK(error_of([&] { onnx_tensor_from_memory(huge.SerializeAsString()); }).find("too many elements") != std::string::npos);
    // A TensorProto that is not one.
    CHECK(!error_of([] { onnx_tensor_from_memory("\x0a\xff\xff\xff\xff\x0f"); }).empty());
}

TEST_CASE("onnx: unsupported ops and attributes name the node, the op and the attribute") {
    ot::pb::ModelProto m = ot::Mlp().onnx();
    m.mutable_graph()->mutable_node(1)->set_op_type("FancyRelu");
    std::string e = error_of([&] { load_onnx_from_memory(ot::bytes(m)); });
    CHECK(e.find("'relu1'") != std::string::npos);
    CHECK(e.find("FancyRelu") != std::string::npos);
    CHECK(e.find("not supported") != std::string::npos);

    // An attribute of the wrong type.
    m = ot::Mlp().onnx();
    auto* fc1 = m.mutable_graph()->mutable_node(0);
    ot::attr(fc1, "alpha", std::int64_t{2});
    e = error_of([&] { load_onnx_from_memory(ot::bytes(m)); });
    CHECK(e.find("'fc1' (Gemm)") != std::string::npos);
    CHECK(e.find("attribute 'alpha'") != std::string::npos);
    CHECK(e.find("expected type FLOAT") != std::string::npos);

    // An attribute the importer does not know: never ignored.
    m = ot::Cnn().onnx();
    ot::attr(m.mutable_graph()->mutable_node(0), "frobnicate", std::int64_t{1});
    e = error_of([&] { load_onnx_from_memory(ot::bytes(m)); });
    CHECK(e.find("'conv1' (Conv)") != std::string::npos);
    CHECK(e.find("attribute 'frobnicate' is not supported") != std::string::npos);

    // A known attribute with a value Kiln cannot represent.
    m = ot::Cnn().onnx();
    auto* pool = m.mutable_graph()->mutable_node(2);
    ot::attr(pool, "dilations", std::vector<std::int64_t>{2, 2});
    e = error_of([&] { load_onnx_from_memory(ot::bytes(m)); });
    CHECK(e.find("'pool1' (MaxPool)") != std::string::npos);
    CHECK(e.find("attribute 'dilations'") != std::string::npos);

    // Another domain.
    m = ot::Mlp().onnx();
    m.mutable_graph()->mutable_node(1)->set_domain("com.microsoft");
    CHECK(error_of([&] { load_onnx_from_memory(ot::bytes(m)); }).find("com.microsoft") != std::string::npos);
}

TEST_CASE("onnx: constant subgraphs fold, and Conv with asymmetric pads equals pad then conv") {
    // Shape -> Gather -> Unsqueeze -> Concat -> Reshape on a static input folds to constants.
    ot::pb::ModelProto m = ot::model(13);
    auto* g = m.mutable_graph();
    ot::input(g, "x", ot::pb::TensorProto::FLOAT, {std::int64_t{2}, std::int64_t{3}, std::int64_t{4}});
    ot::initializer(g, "zero", Tensor::from_vector(std::vector<std::int64_t>{0}, {}));
    ot::initializer(g, "minus1", Tensor::from_vector(std::vector<std::int64_t>{-1}, {1}));
    ot::initializer(g, "axes0", Tensor::from_vector(std::vector<std::int64_t>{0}, {1}));
    ot::node(g, "Shape", {"x"}, {"s"});
    ot::node(g, "Gather", {"s", "zero"}, {"n"});
    ot::node(g, "Unsqueeze", {"n", "axes0"}, {"n1"});
    ot::attr(ot::node(g, "Concat", {"n1", "minus1"}, {"shape"}), "axis", std::int64_t{0});
    ot::node(g, "Reshape", {"x", "shape"}, {"y"});
    ot::output(g, "y", ot::pb::TensorProto::FLOAT, {std::int64_t{2}, std::int64_t{12}});
    Graph gr = load_onnx_from_memory(ot::bytes(m));
    CHECK(gr.outputs()[0].dims == std::vector<Dim>{2, 12});

    // Conv with pads (0, 1, 1, 0) equals pad-then-conv traced by hand.
    Tensor w = Tensor::randn({2, 1, 2, 2}, 3);
    m = ot::model(13);
    g = m.mutable_graph();
    ot::input(g, "x", ot::pb::TensorProto::FLOAT, {std::int64_t{1}, std::int64_t{1}, std::int64_t{5}, std::int64_t{5}});
    ot::initializer(g, "w", w);
    ot::attr(ot::node(g, "Conv", {"x", "w"}, {"y"}), "pads", std::vector<std::int64_t>{0, 1, 1, 0});
    ot::output(g, "y", ot::pb::TensorProto::FLOAT, {});
    g->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
    Graph conv = load_onnx_from_memory(ot::bytes(m));
    Graph ref = trace("ref", {arg("x", DType::f32, {1, 1, 5, 5})}, [&](const std::vector<Var>& in) {
        return conv2d(pad(in[0], {0, 0, 0, 0, 0, 1, 1, 0}), w);
    });
    Tensor x = Tensor::randn({1, 1, 5, 5}, 4);
    Tensor a = Engine(interp()).load(conv)({x})[0], b = Engine(interp()).load(ref)({x})[0];
    CHECK(a.shape() == Shape{1, 2, 5, 5});
    CHECK(ref::max_rel_diff(a, b) < 1e-6);
}

#else
TEST_CASE("onnx: importer tests") {
    if (kiln::onnx_available()) FAIL("kiln::onnx_available() is true in a build without KILN_HAVE_ONNX");
    kiln::test::skip("Kiln was built without ONNX (KILN_WITH_ONNX=OFF or libonnx-dev missing)");
}
#endif
