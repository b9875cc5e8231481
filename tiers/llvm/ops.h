#pragma once
// Internal to tiers/llvm: each KIR op as LLVM instructions (ops.cpp), and the f32
// polynomials that some of them use (vmath.cpp). The KIR generator (codegen.cpp) emits an
// expression's operands and hands the op to an OpEmitter, which emits at the builder's
// insertion point; the same code serves scalar and vector types. What each op computes is
// the interpreter's formula (src/core/scalar_ops.h): exactly for integer ops, casts,
// comparisons, f64 ops (libm calls) and the f16/bf16 conversions; within the tier tests'
// tolerance for the f32 polynomials (codegen.h lists them).
#include "src/kir/kir.h"

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_map>

namespace llvm {
class IRBuilderBase;
class Module;
class Type;
class Value;
}  // namespace llvm

namespace kiln::tiers::llvm_tier {

class OpEmitter {
public:
    // `module` receives the declarations of the libm functions that f64 ops call.
    OpEmitter(llvm::IRBuilderBase& b, llvm::Module& module) : b_(b), m_(module) {}

    // Throw CodegenError (codegen.h) for an op on a type the interpreter does not define.
    llvm::Value* emit_unary(kir::UnaryOp op, kir::Type t, llvm::Value* x);
    llvm::Value* emit_binary(kir::BinaryOp op, kir::Type t, llvm::Value* x, llvm::Value* y);
    llvm::Value* emit_cast(kir::Type from, kir::Type to, llvm::Value* v);  // core::convert

    // f16 / bf16 (bit-exact with kiln::Half and kiln::BFloat16; bf16 -> f32 is
    // bf16_to_float, codegen.h).
    llvm::Value* half_to_float(llvm::Value* h16);
    llvm::Value* float_to_half(llvm::Value* f);
    llvm::Value* float_to_bf16(llvm::Value* f);

    llvm::Type* ltype(kir::Type t);  // the LLVM type of values of KIR type t (a scalar)
    // The ops below work on vectors of `lanes` elements (0: on scalars) from here on: the
    // constants and intermediate types they make themselves follow (lanes_of).
    void set_lanes(unsigned lanes) { lanes_ = lanes; }
    llvm::Value* fconst(llvm::Type* ty, double v);

private:
    llvm::Value* u32(std::uint32_t v);
    llvm::Type* lanes_of(llvm::Type* scalar) const;  // `scalar`, or a vector of it (set_lanes)
    llvm::Value* isnan(llvm::Value* x);
    llvm::Value* fma(llvm::Value* a, llvm::Value* b, llvm::Value* c);  // llvm.fmuladd
    llvm::Value* libm(const char* name, llvm::Value* x);                // a call of double name(double)
    [[noreturn]] void unsupported(std::string_view op, kir::Type t);
    llvm::Value* float_unary(kir::UnaryOp op, kir::Type t, llvm::Value* x);
    llvm::Value* sigmoid(llvm::Value* x, bool f32);
    llvm::Value* x_sigmoid_f32(llvm::Value* x, llvm::Value* z);
    // A sigmoid 1 / (1 + exp(-z)) that x_sigmoid_f32 emitted (f32), which a product with it
    // folds into (emit_binary, mul): its z and its denominator; nulls for any other value.
    struct EmittedSigmoid {
        llvm::Value* z = nullptr;
        llvm::Value* denominator = nullptr;
    };
    EmittedSigmoid emitted_sigmoid(llvm::Value* v) const;
    std::unordered_map<const llvm::Value*, llvm::Value*> sigmoids_;  // f32 sigmoid's division -> its z
    llvm::Value* compare(kir::BinaryOp op, kir::Type t, llvm::Value* x, llvm::Value* y);

    // ---- f32 polynomials (vmath.cpp) ----
    template <std::size_t N> llvm::Value* horner(const float (&c)[N], llvm::Value* x);
    llvm::Value* exp_f32(llvm::Value* x);
    // exp(-z) for sigmoid: 0 below the smallest normal result, inf from z ~ -88.37; with
    // nan_in_numerator the caller's numerator carries z's NaN (vmath.cpp).
    llvm::Value* exp_sigmoid_f32(llvm::Value* z, bool nan_in_numerator);
    llvm::Value* log_f32(llvm::Value* x);
    llvm::Value* tanh_f32(llvm::Value* x);
    llvm::Value* erf_f32(llvm::Value* x);
    llvm::Value* sincos_f32(llvm::Value* x, bool cosine);

    llvm::IRBuilderBase& b_;
    llvm::Module& m_;
    unsigned lanes_ = 0;
};

}  // namespace kiln::tiers::llvm_tier
