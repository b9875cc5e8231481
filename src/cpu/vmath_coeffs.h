#pragma once
// The f32 polynomial coefficients that both CPU tiers inline for exp, log, tanh, erf, sin and
// cos (fitted, or from Cephes), so tier 1 and tier 2 compute the same approximations, and
// that the depthwise kernels' SiLU uses as tier 2 does (simd_depthwise.h, dw_silu). The
// reductions around them are described where each tier emits them (tiers/llvm/vmath.cpp,
// tiers/asmjit/vmath.cpp).
namespace kiln::cpu::vmath {

// exp: exp(r) = 1 + r * P(r) on |r| <= ln2/2, P of degree 5 fitted for minimax relative error
// (2.1e-9 with the coefficients rounded to float), 2^n applied in two halves (subnormal
// results, overflow).
constexpr float kExpP[] = {1.38436351e-3f, 8.37417133e-3f, 4.16680016e-2f, 1.66664317e-1f, 4.99999940e-1f, 1.0f};
// exp inside a sigmoid (tier 2's exp_sigmoid_f32): P of degree 4, fitted the same way (9.2e-8,
// 0.8 ulp): one FMA fewer on the pipes a SiLU saturates, for one ulp more in its worst case.
constexpr float kExpSigmoidP[] = {8.29030620e-3f, 4.18979761e-2f, 1.66676366e-1f, 4.99991492e-1f, 9.99999707e-1f};
// log: Cephes logf on m - 1, m in [sqrt(1/2), sqrt(2)).
constexpr float kLogP[] = {7.0376836292E-2f,  -1.1514610310E-1f, 1.1676998740E-1f,
                           -1.2420140846E-1f, 1.4249322787E-1f,  -1.6668057665E-1f,
                           2.0000714765E-1f,  -2.4999993993E-1f, 3.3333331174E-1f};
// tanh: Cephes tanhf for |x| < 0.625; (1 - e) / (1 + e) with e = exp(-2|x|) above.
constexpr float kTanhP[] = {-5.70498872745E-3f, 2.06390887954E-2f, -5.37397155531E-2f, 1.33314422036E-1f,
                            -3.33332819422E-1f};
// erf: erf(x) = x * A(x^2) for |x| < 1 (Chebyshev fit of erf(x)/x, error 1.2e-9);
// erf(x) = 1 - exp(-x^2) * B(1/x - 0.625) for 1 <= |x| <= 4 (fit of erfc(x) exp(x^2), error
// 6.5e-10); |x| > 4 gives +-1 (erf rounds to 1 in f32 from 3.92 on).
constexpr float kErfA[] = {7.8758750626854883e-5f, -0.00080168642871658695f, 0.005189087423433974f,
                           -0.026854212010626412f, 0.11283594715160218f,     -0.37612626666720331f,
                           1.1283791658483509f};
constexpr float kErfB[] = {-0.032892208538434746f, 0.026034014634299878f, 0.0044559005637013935f,
                           -0.026927345307460468f, 0.043242407102083356f, -0.046942296065290854f,
                           0.023329452647164608f,  0.043766910221260762f, -0.17239474805220902f,
                           0.38228377200157301f,   0.30595299227094106f};
// sin/cos: reduction by pi/2 in f64 (two-part Cody-Waite with FMA, exact enough for every
// |x| < 2^24 or so), then Cephes sinf/cosf on [-pi/4, pi/4].
constexpr float kSinP[] = {-1.9515295891E-4f, 8.3321608736E-3f, -1.6666654611E-1f};
constexpr float kCosP[] = {2.443315711809948E-005f, -1.388731625493765E-003f, 4.166664568298827E-002f};
}  // namespace kiln::cpu::vmath
