// The functions tier 1's generated code calls (see callouts.h): each is the shared scalar
// formula of its op (src/core/scalar_ops.h) or kiln::Half / kiln::BFloat16's conversion.
#include "tiers/asmjit/callouts.h"

#include "src/core/scalar_ops.h"

#include <kiln/dtype.h>

namespace kiln::tiers::asmjit_tier::callouts {

namespace scalar = core::scalar;

double f64_exp(double v) { return scalar::exp(v); }
double f64_log(double v) { return scalar::log(v); }
double f64_sin(double v) { return scalar::sin(v); }
double f64_cos(double v) { return scalar::cos(v); }
double f64_tanh(double v) { return scalar::tanh(v); }
double f64_erf(double v) { return scalar::erf(v); }
double f64_sigmoid(double v) { return scalar::sigmoid(v); }
double f64_gelu_erf(double v) { return scalar::gelu_erf(v); }
double f64_gelu_tanh(double v) { return scalar::gelu_tanh(v); }
double f64_silu(double v) { return scalar::silu(v); }
double f64_pow(double a, double b) { return scalar::pow(a, b); }
float f32_sin(float v) { return scalar::sin(v); }
float f32_cos(float v) { return scalar::cos(v); }
float f32_pow(float a, float b) { return scalar::pow(a, b); }

float half_to_f32(std::uint32_t bits) {
    Half h;
    h.bits = static_cast<std::uint16_t>(bits);
    return static_cast<float>(h);
}
std::uint32_t f32_to_half(float f) { return Half(f).bits; }
std::uint32_t f32_to_bf16(float f) { return BFloat16(f).bits; }

}  // namespace kiln::tiers::asmjit_tier::callouts
