// Activations that ONNX defines as compositions of elementwise math.
#include "src/onnx/registry.h"

namespace kiln::onnx_import {
namespace {

Var zero_like(const Var& x) { return scalar_like(x, 0.0); }

void floating(const NodeCtx& c, const Var& x) {
    c.require(is_floating(x.dtype()), "", "expected a floating input, got " + std::string(dtype_name(x.dtype())));
}

void leaky_relu(NodeCtx& c) {
    Var x = c.in(0);
    floating(c, x);
    double alpha = c.attr_f("alpha", 0.01);
    c.set_out(0, where(x < 0.0, x * alpha, x));
}
void prelu(NodeCtx& c) {
    Var x = c.in(0), slope = c.in(1);
    c.set_out(0, where(x < zero_like(x), x * slope, x));
}
void elu(NodeCtx& c) {
    Var x = c.in(0);
    floating(c, x);
    double alpha = c.attr_f("alpha", 1.0);
    c.set_out(0, where(x < 0.0, (exp(x) - 1.0) * alpha, x));
}
void selu(NodeCtx& c) {
    Var x = c.in(0);
    floating(c, x);
    double alpha = c.attr_f("alpha", 1.67326319217681884765625);
    double gamma = c.attr_f("gamma", 1.05070102214813232421875);
    c.set_out(0, where(x <= 0.0, exp(x) * (alpha * gamma) - alpha * gamma, x * gamma));
}
void celu(NodeCtx& c) {
    Var x = c.in(0);
    floating(c, x);
    double alpha = c.attr_f("alpha", 1.0);
    c.set_out(0, maximum(x, zero_like(x)) + minimum(zero_like(x), (exp(x / alpha) - 1.0) * alpha));
}
void hard_sigmoid(NodeCtx& c) {
    Var x = c.in(0);
    floating(c, x);
    double alpha = c.attr_f("alpha", 0.2), beta = c.attr_f("beta", 0.5);
    c.set_out(0, clamp(x * alpha + beta, 0.0, 1.0));
}
void hard_swish(NodeCtx& c) {
    Var x = c.in(0);
    floating(c, x);
    c.set_out(0, x * clamp(x * (1.0 / 6.0) + 0.5, 0.0, 1.0));
}
void softplus(NodeCtx& c) {
    Var x = c.in(0);
    floating(c, x);
    c.set_out(0, log(exp(x) + 1.0));
}
void softsign(NodeCtx& c) {
    Var x = c.in(0);
    floating(c, x);
    c.set_out(0, x / (abs(x) + 1.0));
}
void thresholded_relu(NodeCtx& c) {
    Var x = c.in(0);
    floating(c, x);
    double alpha = c.attr_f("alpha", 1.0);
    c.set_out(0, where(x > alpha, x, zero_like(x)));
}
void shrink(NodeCtx& c) {
    Var x = c.in(0);
    floating(c, x);
    double bias = c.attr_f("bias", 0.0), lambd = c.attr_f("lambd", 0.5);
    c.set_out(0, where(x < -lambd, x + bias, where(x > lambd, x - bias, zero_like(x))));
}
void mish(NodeCtx& c) {
    Var x = c.in(0);
    floating(c, x);
    c.set_out(0, x * tanh(log(exp(x) + 1.0)));
}
void gelu_(NodeCtx& c) {
    Var x = c.in(0);
    floating(c, x);
    std::string approx = c.attr_s("approximate", "none");
    c.require(approx == "none" || approx == "tanh", "approximate", "expected \"none\" or \"tanh\", got \"" + approx + "\"");
    c.set_out(0, gelu(x, approx == "tanh"));
}

}  // namespace

void add_activation_ops(Registry& r) {
    r["LeakyRelu"] = {leaky_relu, {"alpha"}, {}};
    r["PRelu"] = {prelu, {}, {}};
    r["Elu"] = {elu, {"alpha"}, {}};
    r["Selu"] = {selu, {"alpha", "gamma"}, {}};
    r["Celu"] = {celu, {"alpha"}, {}};
    r["HardSigmoid"] = {hard_sigmoid, {"alpha", "beta"}, {}};
    r["HardSwish"] = {hard_swish, {}, {}};
    r["Softplus"] = {softplus, {}, {}};
    r["Softsign"] = {softsign, {}, {}};
    r["ThresholdedRelu"] = {thresholded_relu, {"alpha"}, {}};
    r["Shrink"] = {shrink, {"bias", "lambd"}, {}};
    r["Mish"] = {mish, {}, {}};
    r["Gelu"] = {gelu_, {"approximate"}, {}};
}

}  // namespace kiln::onnx_import
