#pragma once
// The source printer's pieces (private to tiers/gpu): the prelude of helper functions
// (print_prelude.cpp), the expression and statement printer (print_expr.cpp), and the
// kernel's frame, the generic and the matmul form (print_cuda.cpp, which implements
// gpu_source.h).
#include "tiers/gpu/gpu_source.h"

#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::tiers::gpu::detail {

// Thrown inside the printer for what it cannot express; print_source turns it into
// GpuSource::why (it never leaves the printer).
struct Unsupported {
    std::string why;
};

// ---- prelude (print_prelude.cpp) ----

// The C type of a KIR type in the printed source (index: long long).
const char* c_type(kir::Type t);
// The C type of a buffer's elements (f16/bf16: unsigned short; bool: unsigned char).
const char* storage_type(DType d);
// A literal of type t with value v (floats: the value rounded to t, exactly; non-finite
// values by their bits), e.g. "1.5f", "(-3LL)", "(signed char)(-1)".
std::string float_literal(kir::Type t, double v);
std::string int_literal(kir::Type t, std::int64_t v);

// The helper functions a kernel may call, by name ("kiln_max_f32", "kiln_f32_to_f16", ...).
// `names` holds the ones the kernel calls; the prelude prints them, and the helpers they
// call, in one fixed order.
std::string prelude(const std::set<std::string>& names, Dialect d);
// Whether `name` is a helper of the prelude (the printer asks only for those).
bool is_helper(const std::string& name);

// ---- the warp-per-row form (print_rows.cpp) ----

// A row kernel run by 32 lanes per outer index: the top-level loops over the row are split
// across the 32 lanes (lane j takes iterations j, j + 32, ...), each reduction temp of a
// split loop is combined across the lanes after it (a butterfly of shuffles, so every lane
// holds the total), the other top-level statements run in every lane alike, and top-level
// stores are made by lane 0. On CUDA the 32 lanes are a warp; on HIP they are a wavefront
// of 32 (RDNA) or half of one of 64 (CDNA), whose shuffles are bounded to their 32 lanes.
struct WarpReduction {
    int temp = -1;
    // add, max or min (t = t op e); or gt / lt for the select form t = select(e > t, e, t) /
    // select(e < t, e, t) (tiers/kir_forms.h: a max or min that skips NaN, as softmax's row
    // maximum is).
    kir::BinaryOp op = kir::BinaryOp::add;
    bool select = false;
    kir::Type type = kir::Type::f32;  // f32 or f64
};
struct WarpPlan {
    // Per top-level loop statement of the kernel's body that is split: its reductions.
    std::vector<std::pair<const kir::Stmt*, std::vector<WarpReduction>>> loops;
    const std::vector<WarpReduction>* find(const kir::Stmt* s) const {
        for (const auto& [stmt, r] : loops)
            if (stmt == s) return &r;
        return nullptr;
    }
};
// The plan for kernel `k`, or false when the form does not apply (see print_rows.cpp).
bool plan_warp_rows(const kir::Kernel& k, WarpPlan* plan);

// ---- expressions and statements (print_expr.cpp) ----

class Printer {
public:
    Printer(const kir::Kernel& k, const kir::Specialization& spec, Dialect dialect) : k_(k), spec_(spec), dialect_(dialect) {}

    // Prints statements at the current indent.
    void stmts(const std::vector<kir::StmtRef>& body);
    // An operand for `e`: a literal or a name. Every computed subexpression is hoisted into
    // a const local printed before the current statement (so each is computed once, as the
    // evaluator does), except inside a select branch that loads: the branches then become
    // an if/else, so that only the chosen branch loads.
    std::string expr(const kir::ExprRef& e);
    // Prints one line at the current indent.
    void line(const std::string& s);
    // Prints prefix + expr(e) + suffix as one statement: the values it hoists are scoped to it.
    void expr_line(const std::string& prefix, const kir::ExprRef& e, const std::string& suffix);
    void open(const std::string& s);  // line(s + " {") and indent
    void close();                     // dedent and "}"
    // The name of helper `name` (which the prelude will print).
    std::string helper(const std::string& name);

    // What was printed, and what it used.
    std::string out;
    std::set<std::string> helpers;
    std::set<int> buffers_used;
    std::set<int> temps_used;
    int indent = 0;

    const kir::Kernel& kernel() const { return k_; }
    // The warp-per-row form's plan, while printing that form (else null).
    const WarpPlan* warp = nullptr;
    // The vector form (print_cuda.cpp), while it prints one lane: a load or store at exactly
    // the outer index of one of these buffers reads or writes this operand (a lane of a
    // 128-bit vector, e.g. "vl0.y") instead of the buffer.
    std::unordered_map<int, std::string> lanes;
    // The variable of loop variable `id`.
    static std::string var_name(int id) { return "v" + std::to_string(id); }
    static std::string temp_name(int id) { return "t" + std::to_string(id); }
    static std::string buffer_name(int id) { return "b" + std::to_string(id); }

private:
    const kir::Kernel& k_;
    const kir::Specialization& spec_;
    const Dialect dialect_;
    // Hoisted subexpressions of the scope being printed, with an undo log (a scope's
    // entries go when it ends: a statement, a branch).
    std::unordered_map<const kir::Expr*, std::string> memo_;
    std::vector<const kir::Expr*> memo_log_;
    std::unordered_map<const kir::Expr*, bool> loads_;  // does the expression load?
    int next_ = 0;
    int depth_ = 0;  // loops open around the statement being printed

    void stmt(const kir::Stmt& s);
    void pop_memo(std::size_t mark);
    bool has_load(const kir::ExprRef& e);
    std::string hoist(const kir::Expr& e, const std::string& text);
    std::string compute(const kir::Expr& e);
    std::string select(const kir::Expr& e);
    std::string unary(const kir::Expr& e, const std::string& x);
    std::string binary(const kir::Expr& e, const std::string& x, const std::string& y);
    std::string cast(const kir::Expr& e, const std::string& x);
    std::string load(const kir::Expr& e);
    std::string param(int id);
    void check_buffer(int id);
};

}  // namespace kiln::tiers::gpu::detail
