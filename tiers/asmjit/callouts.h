#pragma once
// Internal to tiers/asmjit: the plain C++ functions that tier 1's generated code calls
// (callouts.cpp). f64 transcendental ops and the f32 ops without a lane sequence (sin, cos,
// pow) compute with the shared scalar formulas (src/core/scalar_ops.h), so they give the
// interpreter's exact results; f16 conversions are those of kiln::Half. No asmjit type here.
#include <cstdint>

namespace kiln::tiers::asmjit_tier::callouts {

double f64_exp(double v);
double f64_log(double v);
double f64_sin(double v);
double f64_cos(double v);
double f64_tanh(double v);
double f64_erf(double v);
double f64_sigmoid(double v);
double f64_gelu_erf(double v);
double f64_gelu_tanh(double v);
double f64_silu(double v);
double f64_pow(double a, double b);
float f32_sin(float v);
float f32_cos(float v);
float f32_pow(float a, float b);

// f16 / bf16 bits (in the low 16 bits) <-> f32, rounding to nearest even.
float half_to_f32(std::uint32_t bits);
std::uint32_t f32_to_half(float f);
std::uint32_t f32_to_bf16(float f);

}  // namespace kiln::tiers::asmjit_tier::callouts
