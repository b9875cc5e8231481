// What ONNX opsets 18 to 21 changed, as newer exporters emit it: GroupNormalization (scale and
// bias per group at 18, per channel at 21), Split's num_outputs, Pad's axes input, Cast's
// saturate; each against a naive computation in the test on the interpreter. An opset newer
// than Kiln knows is a kiln::Error.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "error_of.h"
#include "reference.h"

#if defined(KILN_HAVE_ONNX)
#include "tests/onnx/model_builder.h"

#include <cmath>
#include <functional>
#include <string>

using namespace kiln;
namespace ot = onnx_test;

namespace {

using kiln::test::error_of;

std::vector<Tensor> run(const ot::pb::ModelProto& m, const std::vector<Tensor>& in) {
    return Engine(ref::interp_options()).load(load_onnx_from_memory(ot::bytes(m)))(in);
}

using ot::pb::TensorProto;

}  // namespace

TEST_CASE("onnx opsets: GroupNormalization per group (18) and per channel (21)") {
    const std::int64_t N = 2, C = 6, H = 3, W = 5, G = 3;
    for (std::int64_t opset : {18, 21}) {
        CAPTURE(opset);
        const std::int64_t per = opset >= 21 ? C : G;
        ot::pb::ModelProto m = ot::model(opset);
        auto* g = m.mutable_graph();
        ot::input(g, "x", TensorProto::FLOAT, {std::string("n"), C, H, W});
        Tensor scale = Tensor::randn({per}, 3), bias = Tensor::randn({per}, 4);
        ot::initializer(g, "scale", scale);
        ot::initializer(g, "bias", bias);
        auto* n = ot::node(g, "GroupNormalization", {"x", "scale", "bias"}, {"y"}, "gn");
        ot::attr(n, "num_groups", G);
        ot::attr(n, "epsilon", 1e-3f);
        ot::output(g, "y", TensorProto::FLOAT, {std::string("n"), C, H, W});
        Tensor x = Tensor::randn({N, C, H, W}, 5);
        Tensor y = run(m, {x})[0];
        REQUIRE(y.shape() == Shape{N, C, H, W});
        auto xv = x.to_doubles(), yv = y.to_doubles(), sv = scale.to_doubles(), bv = bias.to_doubles();
        const std::int64_t per_group = C / G * H * W;
        double worst = 0;
        for (std::int64_t b = 0; b < N; ++b)
            for (std::int64_t k = 0; k < G; ++k) {
                const std::int64_t base = (b * C + k * (C / G)) * H * W;
                double mean = 0, var = 0;
                for (std::int64_t i = 0; i < per_group; ++i) mean += xv[static_cast<std::size_t>(base + i)];
                mean /= double(per_group);
                for (std::int64_t i = 0; i < per_group; ++i) {
                    const double d = xv[static_cast<std::size_t>(base + i)] - mean;
                    var += d * d;
                }
                var /= double(per_group);
                for (std::int64_t i = 0; i < per_group; ++i) {
                    const std::int64_t ch = k * (C / G) + i / (H * W);
                    const auto p = static_cast<std::size_t>(opset >= 21 ? ch : k);
                    const double want = (xv[static_cast<std::size_t>(base + i)] - mean) / std::sqrt(var + 1e-3) * sv[p] + bv[p];
                    worst = std::max(worst, std::fabs(yv[static_cast<std::size_t>(base + i)] - want));
                }
            }
        CHECK(worst < 1e-5);
    }
    // Scale of the wrong length for the opset names the node.
    ot::pb::ModelProto m = ot::model(21);
    auto* g = m.mutable_graph();
    ot::input(g, "x", TensorProto::FLOAT, {std::int64_t{1}, C, H, W});
    ot::initializer(g, "scale", Tensor::randn({G}, 3));
    ot::initializer(g, "bias", Tensor::randn({G}, 4));
    ot::attr(ot::node(g, "GroupNormalization", {"x", "scale", "bias"}, {"y"}, "gn21"), "num_groups", G);
    ot::output(g, "y", TensorProto::FLOAT, {std::int64_t{1}, C, H, W});
    const std::string e = error_of([&] { load_onnx_from_memory(ot::bytes(m)); });
    CHECK(e.find("gn21") != std::string::npos);
    CHECK(e.find("6 (channels)") != std::string::npos);
}

TEST_CASE("onnx opsets: Split with num_outputs (18) gives ceil-sized parts, the last smaller") {
    ot::pb::ModelProto m = ot::model(18);
    auto* g = m.mutable_graph();
    ot::input(g, "x", TensorProto::FLOAT, {std::string("b"), std::int64_t{7}});
    auto* n = ot::node(g, "Split", {"x"}, {"a", "b", "c"}, "split3");
    ot::attr(n, "axis", std::int64_t{1});
    ot::attr(n, "num_outputs", std::int64_t{3});
    for (const char* o : {"a", "b", "c"}) ot::output(g, o, TensorProto::FLOAT, {std::string("b"), std::string("k")});
    Tensor x = Tensor::randn({2, 7}, 9);
    std::vector<Tensor> out = run(m, {x});
    REQUIRE(out.size() == 3);
    CHECK(out[0].shape() == Shape{2, 3});
    CHECK(out[1].shape() == Shape{2, 3});
    CHECK(out[2].shape() == Shape{2, 1});
    auto xv = x.to_vector<float>();
    CHECK(out[2].to_vector<float>() == std::vector<float>{xv[6], xv[13]});
    CHECK(out[1].to_vector<float>() == std::vector<float>{xv[3], xv[4], xv[5], xv[10], xv[11], xv[12]});
}

TEST_CASE("onnx opsets: Pad with an axes input (18) pads those axes only") {
    ot::pb::ModelProto m = ot::model(18);
    auto* g = m.mutable_graph();
    ot::input(g, "x", TensorProto::FLOAT, {std::int64_t{2}, std::int64_t{3}});
    ot::initializer(g, "pads", Tensor::from_vector(std::vector<std::int64_t>{1, 2}, {2}));
    ot::initializer(g, "value", Tensor::full({}, 5.0));
    ot::initializer(g, "axes", Tensor::from_vector(std::vector<std::int64_t>{-1}, {1}));
    ot::node(g, "Pad", {"x", "pads", "value", "axes"}, {"y"}, "pad_axes");
    ot::output(g, "y", TensorProto::FLOAT, {std::int64_t{2}, std::int64_t{6}});
    Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor y = run(m, {x})[0];
    CHECK(y.shape() == Shape{2, 6});
    CHECK(y.to_vector<float>() == std::vector<float>{5, 1, 2, 3, 5, 5, 5, 4, 5, 6, 5, 5});
}

TEST_CASE("onnx opsets: Cast's saturate (19) is accepted; an opset newer than 21 is an error") {
    ot::pb::ModelProto m = ot::model(19);
    auto* g = m.mutable_graph();
    ot::input(g, "x", TensorProto::FLOAT, {std::int64_t{3}});
    auto* n = ot::node(g, "Cast", {"x"}, {"y"}, "cast19");
    ot::attr(n, "to", std::int64_t{TensorProto::INT32});
    ot::attr(n, "saturate", std::int64_t{1});
    ot::output(g, "y", TensorProto::INT32, {std::int64_t{3}});
    Tensor y = run(m, {Tensor::from_vector(std::vector<float>{1.5f, -2.5f, 7.0f}, {3})})[0];
    CHECK(y.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, -2, 7});

    m.mutable_opset_import(0)->set_version(22);
    const std::string e = error_of([&] { load_onnx_from_memory(ot::bytes(m)); });
    CHECK(e.find("opset 22") != std::string::npos);
    CHECK(e.find("newer than Kiln knows") != std::string::npos);
}

#endif  // KILN_HAVE_ONNX
