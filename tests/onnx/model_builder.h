#pragma once
// Builds small ONNX models from protobuf messages, for the importer's tests and fuzz target
// (no files, no downloads): a helper per message kind, and two models, an MLP and a CNN,
// whose weights are Kiln tensors so that the same model can be traced with Kiln's API.
#include <kiln/kiln.h>

#include <onnx/onnx_pb.h>

#include <cstring>
#include <string>
#include <variant>
#include <vector>

namespace onnx_test {

namespace pb = ::onnx;
using DimSpec = std::variant<std::int64_t, std::string>;  // a size or a dim_param

inline pb::ModelProto model(std::int64_t opset = 13) {
    pb::ModelProto m;
    m.set_ir_version(8);
    m.set_producer_name("kiln-tests");
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m.mutable_graph()->set_name("test_graph");
    return m;
}

inline void set_type(pb::ValueInfoProto* v, const std::string& name, int elem, const std::vector<DimSpec>& dims) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (const auto& d : dims) {
        auto* dim = shape->add_dim();
        if (std::holds_alternative<std::int64_t>(d)) dim->set_dim_value(std::get<std::int64_t>(d));
        else dim->set_dim_param(std::get<std::string>(d));
    }
}
inline void input(pb::GraphProto* g, const std::string& name, int elem, const std::vector<DimSpec>& dims) {
    set_type(g->add_input(), name, elem, dims);
}
inline void output(pb::GraphProto* g, const std::string& name, int elem, const std::vector<DimSpec>& dims) {
    set_type(g->add_output(), name, elem, dims);
}

// An initializer (f32 or i64) with the tensor's values as raw_data.
inline void initializer(pb::GraphProto* g, const std::string& name, const kiln::Tensor& t) {
    auto* p = g->add_initializer();
    p->set_name(name);
    p->set_data_type(t.dtype() == kiln::DType::i64 ? pb::TensorProto::INT64 : pb::TensorProto::FLOAT);
    for (auto d : t.shape()) p->add_dims(d);
    kiln::Tensor c = t.contiguous();
    p->set_raw_data(std::string(static_cast<const char*>(c.data()), static_cast<std::size_t>(c.numel()) * kiln::dtype_size(c.dtype())));
}

inline pb::NodeProto* node(pb::GraphProto* g, const std::string& op, const std::vector<std::string>& in,
                           const std::vector<std::string>& out, const std::string& name = "") {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? out.at(0) + "_node" : name);
    for (const auto& s : in) n->add_input(s);
    for (const auto& s : out) n->add_output(s);
    return n;
}
inline void attr(pb::NodeProto* n, const std::string& name, std::int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(pb::AttributeProto::INT);
    a->set_i(v);
}
inline void attr(pb::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(pb::AttributeProto::FLOAT);
    a->set_f(v);
}
inline void attr(pb::NodeProto* n, const std::string& name, const std::vector<std::int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(pb::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
}

inline std::string bytes(const pb::ModelProto& m) { return m.SerializeAsString(); }

// ---- an MLP: x[batch, 16] -> Gemm(W1^T) + b1 -> Relu -> Gemm(W2^T) + b2 -> Softmax ----
struct Mlp {
    kiln::Tensor w1 = kiln::Tensor::randn({32, 16}, 11), b1 = kiln::Tensor::randn({32}, 12);
    kiln::Tensor w2 = kiln::Tensor::randn({10, 32}, 13), b2 = kiln::Tensor::randn({10}, 14);

    pb::ModelProto onnx() const {
        pb::ModelProto m = model(13);
        pb::GraphProto* g = m.mutable_graph();
        input(g, "x", pb::TensorProto::FLOAT, {std::string("batch"), std::int64_t{16}});
        initializer(g, "w1", w1);
        initializer(g, "b1", b1);
        initializer(g, "w2", w2);
        initializer(g, "b2", b2);
        attr(node(g, "Gemm", {"x", "w1", "b1"}, {"h"}, "fc1"), "transB", std::int64_t{1});
        node(g, "Relu", {"h"}, {"hr"}, "relu1");
        attr(node(g, "Gemm", {"hr", "w2", "b2"}, {"logits"}, "fc2"), "transB", std::int64_t{1});
        attr(node(g, "Softmax", {"logits"}, {"y"}, "softmax"), "axis", std::int64_t{-1});
        output(g, "y", pb::TensorProto::FLOAT, {std::string("batch"), std::int64_t{10}});
        return m;
    }
    kiln::Graph traced() const {
        return kiln::trace("mlp", {kiln::arg("x", kiln::DType::f32, {kiln::dyn("batch"), 16})},
                           [&](const std::vector<kiln::Var>& in) {
                               kiln::Var h = kiln::relu(kiln::linear(in[0], w1, b1));
                               return std::vector<kiln::Var>{kiln::softmax(kiln::linear(h, w2, b2), -1)};
                           });
    }
};

// ---- a CNN: x[N, 3, 12, 12] -> Conv 3x3 pad 1 -> Relu -> MaxPool 2 -> Conv 3x3 groups 2
//      -> BatchNormalization -> Relu -> GlobalAveragePool -> Flatten -> Gemm ----
struct Cnn {
    kiln::Tensor c1w = kiln::Tensor::randn({8, 3, 3, 3}, 21), c1b = kiln::Tensor::randn({8}, 22);
    kiln::Tensor c2w = kiln::Tensor::randn({8, 4, 3, 3}, 23);
    kiln::Tensor mean = kiln::Tensor::randn({8}, 24), var = kiln::Tensor::rand({8}, 25, kiln::DType::f32, 0.5, 2.0);
    kiln::Tensor gamma = kiln::Tensor::rand({8}, 26, kiln::DType::f32, 0.5, 1.5), beta = kiln::Tensor::randn({8}, 27);
    kiln::Tensor fw = kiln::Tensor::randn({5, 8}, 28), fb = kiln::Tensor::randn({5}, 29);

    pb::ModelProto onnx() const {
        pb::ModelProto m = model(13);
        pb::GraphProto* g = m.mutable_graph();
        input(g, "x", pb::TensorProto::FLOAT, {std::string("N"), std::int64_t{3}, std::int64_t{12}, std::int64_t{12}});
        for (auto& [name, t] : std::vector<std::pair<std::string, kiln::Tensor>>{
                 {"c1w", c1w}, {"c1b", c1b}, {"c2w", c2w}, {"mean", mean}, {"var", var}, {"gamma", gamma},
                 {"beta", beta}, {"fw", fw}, {"fb", fb}})
            initializer(g, name, t);
        auto* c1 = node(g, "Conv", {"x", "c1w", "c1b"}, {"c1"}, "conv1");
        attr(c1, "kernel_shape", std::vector<std::int64_t>{3, 3});
        attr(c1, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
        node(g, "Relu", {"c1"}, {"r1"}, "relu1");
        auto* p = node(g, "MaxPool", {"r1"}, {"p1"}, "pool1");
        attr(p, "kernel_shape", std::vector<std::int64_t>{2, 2});
        attr(p, "strides", std::vector<std::int64_t>{2, 2});
        auto* c2 = node(g, "Conv", {"p1", "c2w"}, {"c2"}, "conv2");
        attr(c2, "group", std::int64_t{2});
        attr(c2, "strides", std::vector<std::int64_t>{1, 1});
        auto* bn = node(g, "BatchNormalization", {"c2", "gamma", "beta", "mean", "var"}, {"bn"}, "bn2");
        attr(bn, "epsilon", 1e-5f);
        node(g, "Relu", {"bn"}, {"r2"}, "relu2");
        node(g, "GlobalAveragePool", {"r2"}, {"gap"}, "gap");
        attr(node(g, "Flatten", {"gap"}, {"flat"}, "flatten"), "axis", std::int64_t{1});
        attr(node(g, "Gemm", {"flat", "fw", "fb"}, {"y"}, "fc"), "transB", std::int64_t{1});
        output(g, "y", pb::TensorProto::FLOAT, {std::string("N"), std::int64_t{5}});
        return m;
    }
    kiln::Graph traced() const {
        return kiln::trace("cnn", {kiln::arg("x", kiln::DType::f32, {kiln::dyn("N"), 3, 12, 12})},
                           [&](const std::vector<kiln::Var>& in) {
                               kiln::Var h = kiln::relu(kiln::conv2d(in[0], c1w, c1b, {1, 1}, {1, 1}));
                               h = kiln::max_pool2d(h, {2, 2}, {2, 2});
                               h = kiln::conv2d(h, c2w, kiln::Var(), {1, 1}, {0, 0}, {1, 1}, 2);
                               h = kiln::relu(kiln::batch_norm(h, mean, var, gamma, beta, 1e-5));
                               h = kiln::flatten(kiln::global_avg_pool2d(h), 1);
                               return std::vector<kiln::Var>{kiln::linear(h, fw, fb)};
                           });
    }
};

}  // namespace onnx_test
