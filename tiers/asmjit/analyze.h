#pragma once
// Internal to tiers/asmjit: what the code generator needs to know about a kernel before it
// emits anything (no asmjit here).
//
// Requires: a KIR kernel (kir.h); an ill-formed one is reported, not assumed.
// Ensures: analyze() throws Unsupported for what tier 1 does not compile this way (matmul
// kernels, which matmul.h compiles; ops on types the interpreter does not define; malformed
// kernels) and otherwise says, for
// each loop, whether it runs as a vector loop (`LoopPlan`). A loop is a vector loop when
// vectors are allowed and:
// - its body has no nested loop, stores each buffer at most once, and loads a buffer it
//   stores only at the index it stores it (in place: softmax rows reuse their output);
// - every load and store it makes at an index that depends on its variable is of an f32
//   buffer at `var + (something invariant)` (unit stride); loads at invariant indices are
//   invariant values; a store at an invariant index is not allowed;
// - the values that depend on its variable are f32 or bool (a lane mask) and are computed
//   by ops the vector code has (every f32 op but pow, sin and cos);
// - each temp assigned in it is either an accumulator (`t = t + x`, `max(t, x)`, `min(t, x)`,
//   `select(x > t, x, t)`, `select(x < t, x, t)` in f32, t read nowhere else in the loop) or a per-iteration temp (f32 or bool, assigned
//   before any read in the body, used nowhere outside the loop).
// Tests: tests/test_asmjit_tier.cpp.
#include "tiers/tier.h"

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::tiers::asmjit_tier {

// Thrown inside the tier for a kernel it does not compile; compile() returns it as a bailout.
struct Unsupported {
    Bailout bailout = Bailout::unsupported_op;
    std::string message;
};

// The variable of a loop: the outer index, or loop variable `var`.
struct LoopVar {
    bool outer = true;
    int var = -1;
    bool is(const kir::Expr& e) const {
        return outer ? e.kind == kir::ExprKind::Outer : e.kind == kir::ExprKind::Var && e.id == var;
    }
};

struct LoopPlan {
    bool vector = false;
    std::string why_scalar;                          // when not a vector loop
    std::unordered_map<const kir::Stmt*, int> reduction_of;  // accumulator updates -> index in `reductions`
    struct Reduction {
        int temp = -1;
        kir::BinaryOp op = kir::BinaryOp::add;
        kir::ExprRef operand;  // x in t = op(t, x)
        bool skips_nan = false;  // t = x > t ? x : t (`<` for min), tiers/kir_forms.h
    };
    std::vector<Reduction> reductions;
    std::vector<char> assigned;                           // per temp: assigned in the loop
    std::unordered_map<const kir::Expr*, bool> varying;   // expressions of the body: depends on the variable
};

struct Analysis {
    LoopPlan outer;                                       // the loop over [begin, end)
    std::unordered_map<const kir::Stmt*, LoopPlan> loops;  // every Loop statement
};

// Throws Unsupported.
Analysis analyze(const kir::Kernel& k, bool allow_vectors);

// The coefficient c of an index expression that is `c * v + (terms without v)` for the loop
// variable v (0 when it does not depend on v); nullopt when it is not of that form.
std::optional<std::int64_t> coefficient(const kir::Expr& e, const LoopVar& v, const std::vector<char>& assigned);

}  // namespace kiln::tiers::asmjit_tier
