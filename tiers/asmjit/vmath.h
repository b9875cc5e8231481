#pragma once
// Internal to tiers/asmjit: f32 transcendental functions as straight-line sequences of
// lane-wise operations (no branches, no calls), written once against a small interface
// that the code generator implements for every vector width (xmm lanes for scalar code,
// ymm or zmm for vector loops). The same sequence therefore gives the same value in a
// vector loop, in its masked tail and in scalar code.
//
// Accuracy (the formulas and coefficients are those of the LLVM tier, tiers/llvm/vmath.cpp,
// so that tier 1 and tier 2 agree): exp within ~1 ulp, log ~1 ulp, tanh ~1.5 ulp, erf
// ~2.5 ulp of the interpreter's libm results; NaN in gives NaN out, infinities and
// subnormals follow the interpreter. sin/cos are not here (the tier calls libm for them).
#include <cstdint>

namespace kiln::tiers::asmjit_tier {

// Handles of values held by the implementation: F is a vector of f32 lanes (or of i32
// lanes, for the bit operations), K a lane mask.
struct F {
    int id = -1;
};
struct K {
    int id = -1;
};

// Comparison predicates (the x86 encoding): ordered ones are false on NaN, `ne` and
// `nle_uq` true.
enum class Cmp : std::uint8_t { eq_oq = 0x00, lt_os = 0x01, le_os = 0x02, unord_q = 0x03, ne_uq = 0x04, nle_uq = 0x06,
                                ge_os = 0x0D, gt_os = 0x0E };

class LaneOps {
public:
    virtual F constant(float v) = 0;
    virtual F bits(std::uint32_t v) = 0;  // every lane holds these 32 bits
    virtual F add(F a, F b) = 0;
    virtual F sub(F a, F b) = 0;
    virtual F mul(F a, F b) = 0;
    virtual F div(F a, F b) = 0;
    virtual F fma(F a, F b, F c) = 0;  // a * b + c, one rounding
    // x86 minps/maxps: a < b ? a : b (a > b ? a : b); b when either is NaN.
    virtual F min_x86(F a, F b) = 0;
    virtual F max_x86(F a, F b) = 0;
    virtual F round(F a, int mode) = 0;  // 0 nearest even, 1 down, 2 up, 3 toward zero
    virtual F bit_and(F a, F b) = 0;
    virtual F bit_or(F a, F b) = 0;
    virtual F bit_xor(F a, F b) = 0;
    virtual K cmp(F a, F b, Cmp p) = 0;
    virtual F select(K m, F a, F b) = 0;  // m ? a : b, lane by lane
    // i32 lanes.
    virtual F to_i32(F a) = 0;    // f32 -> i32, rounding to nearest even (exact on integers)
    virtual F from_i32(F a) = 0;  // i32 -> f32
    virtual F add_i32(F a, F b) = 0;
    virtual F sub_i32(F a, F b) = 0;
    virtual F shl_i32(F a, int n) = 0;
    virtual F shr_i32(F a, int n) = 0;  // logical
    virtual F sar_i32(F a, int n) = 0;  // arithmetic

protected:
    ~LaneOps() = default;
};

F vexp(LaneOps& o, F x);
F vlog(LaneOps& o, F x);
F vtanh(LaneOps& o, F x);
F verf(LaneOps& o, F x);
F vsigmoid(LaneOps& o, F x);  // stable for both signs, as the interpreter
F vgelu_tanh(LaneOps& o, F x);
F vgelu_erf(LaneOps& o, F x);
F vsilu(LaneOps& o, F x);
F vabs(LaneOps& o, F x);
F vneg(LaneOps& o, F x);
F vcopysign(LaneOps& o, F mag, F sign);
K visnan(LaneOps& o, F x);

}  // namespace kiln::tiers::asmjit_tier
