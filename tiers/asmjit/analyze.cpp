// What tier 1 compiles, and which loops become vector loops (see analyze.h).
#include "tiers/asmjit/analyze.h"
#include "tiers/kir_forms.h"

#include <algorithm>
#include <unordered_set>

namespace kiln::tiers::asmjit_tier {
namespace {

using kir::BinaryOp;
using kir::Expr;
using kir::ExprKind;
using kir::ExprRef;
using kir::Stmt;
using kir::StmtKind;
using kir::Type;
using kir::UnaryOp;

[[noreturn]] void fail(Bailout b, std::string msg) { throw Unsupported{b, std::move(msg)}; }
[[noreturn]] void malformed(const std::string& what) { fail(Bailout::backend_error, "malformed kernel: " + what); }

std::string on(std::string_view op, Type t) { return std::string(op) + " on " + std::string(kir::type_name(t)); }

// ---- what the scalar code generator handles (the interpreter's ops on its types) ----

class Checker {
public:
    explicit Checker(const kir::Kernel& k) : k_(k) {}

    void run() {
        if (k_.matmul) fail(Bailout::unsupported_op, "matmul kernels run through the GEMM driver (matmul.h)");
        if (k_.num_vars < 0) malformed("negative num_vars");
        if (k_.params.size() != k_.param_sources.size()) malformed("params and param sources differ");
        if (k_.extent) expr(k_.extent, Type::index);  // the runtime's, not the code's
        stmts(k_.body);
    }

private:
    const kir::Kernel& k_;
    std::unordered_set<const Expr*> seen_;

    void stmts(const std::vector<kir::StmtRef>& ss) {
        for (const auto& s : ss) {
            if (!s) malformed("null statement");
            switch (s->kind) {
            case StmtKind::Loop:
                if (s->var < 0 || s->var >= k_.num_vars) malformed("loop variable out of range");
                expr(s->begin, Type::index);
                expr(s->end, Type::index);
                stmts(s->body);
                break;
            case StmtKind::Store: {
                if (s->buffer < 0 || static_cast<std::size_t>(s->buffer) >= k_.buffers.size()) malformed("store to a buffer out of range");
                expr(s->index, Type::index);
                const Type want = kir::compute_type(k_.buffers[static_cast<std::size_t>(s->buffer)].dtype);
                if (!s->value || s->value->type != want)
                    fail(Bailout::unsupported_dtype, "store of another type than the buffer's compute type");
                expr(s->value, want);
                break;
            }
            case StmtKind::Assign:
                if (s->var < 0 || static_cast<std::size_t>(s->var) >= k_.temps.size()) malformed("assign to a temp out of range");
                expr(s->value, k_.temps[static_cast<std::size_t>(s->var)]);
                break;
            }
        }
    }

    void expr(const ExprRef& e, Type want) {
        if (!e) malformed("null expression");
        if (e->type != want) malformed("an expression of an unexpected type");
        if (!seen_.insert(e.get()).second) return;
        const Type t = e->type;
        auto arity = [&](std::size_t n) {
            if (e->args.size() != n) malformed("wrong number of operands");
            for (const auto& a : e->args)
                if (!a) malformed("null operand");
        };
        switch (e->kind) {
        case ExprKind::Const: return;
        case ExprKind::Param:
            if (t != Type::index || e->id < 0 || static_cast<std::size_t>(e->id) >= k_.params.size()) malformed("param out of range");
            return;
        case ExprKind::Outer:
            if (t != Type::index) malformed("outer index of a non-index type");
            return;
        case ExprKind::Var:
            if (t != Type::index || e->id < 0 || e->id >= k_.num_vars) malformed("loop variable out of range");
            return;
        case ExprKind::Temp:
            if (e->id < 0 || static_cast<std::size_t>(e->id) >= k_.temps.size() || k_.temps[static_cast<std::size_t>(e->id)] != t)
                malformed("bad temp reference");
            return;
        case ExprKind::Load: {
            arity(1);
            if (e->id < 0 || static_cast<std::size_t>(e->id) >= k_.buffers.size()) malformed("load from a buffer out of range");
            const kir::Buffer& b = k_.buffers[static_cast<std::size_t>(e->id)];
            if (t != kir::compute_type(b.dtype))
                fail(Bailout::unsupported_dtype, "load of " + std::string(kir::type_name(t)) + " from a " +
                                                     std::string(dtype_name(b.dtype)) + " buffer");
            expr(e->args[0], Type::index);
            return;
        }
        case ExprKind::Unary: {
            arity(1);
            expr(e->args[0], t);
            const UnaryOp op = e->uop;
            const bool ok = kir::is_float(t)  ? op != UnaryOp::logical_not
                          : t == Type::boolean ? op == UnaryOp::logical_not
                                               : (op == UnaryOp::neg || op == UnaryOp::abs || op == UnaryOp::relu ||
                                                  op == UnaryOp::sign);
            if (!ok) fail(Bailout::unsupported_op, on(kir::op_name(op), t));
            return;
        }
        case ExprKind::Binary: {
            arity(2);
            const Type at = e->args[0]->type;
            expr(e->args[0], at);
            expr(e->args[1], at);
            const BinaryOp op = e->bop;
            if (t != (kir::is_comparison(op) ? Type::boolean : at)) malformed("binary result type");
            bool ok = kir::is_comparison(op);
            if (at == Type::boolean) ok = ok || op == BinaryOp::logical_and || op == BinaryOp::logical_or;
            else if (kir::is_float(at)) ok = ok || (op != BinaryOp::logical_and && op != BinaryOp::logical_or);
            else ok = ok || op == BinaryOp::add || op == BinaryOp::sub || op == BinaryOp::mul || op == BinaryOp::div ||
                      op == BinaryOp::max || op == BinaryOp::min;
            if (!ok) fail(Bailout::unsupported_op, on(kir::op_name(op), at));
            return;
        }
        case ExprKind::Select:
            arity(3);
            expr(e->args[0], Type::boolean);
            expr(e->args[1], t);
            expr(e->args[2], t);
            return;
        case ExprKind::Cast:
            arity(1);
            expr(e->args[0], e->args[0]->type);
            return;
        }
        malformed("unknown expression kind");
    }
};

// ---- temps: in which innermost loop each one appears ----

// Per temp, the innermost loops (nullptr: the outer body) where it is read or assigned.
using Regions = std::vector<std::vector<const Stmt*>>;

void collect_expr(const ExprRef& e, const Stmt* region, Regions& r, std::unordered_set<const Expr*>& seen) {
    if (!seen.insert(e.get()).second) return;
    if (e->kind == ExprKind::Temp) {
        auto& v = r[static_cast<std::size_t>(e->id)];
        if (std::find(v.begin(), v.end(), region) == v.end()) v.push_back(region);
    }
    for (const auto& a : e->args) collect_expr(a, region, r, seen);
}

void collect(const std::vector<kir::StmtRef>& ss, const Stmt* region, Regions& r,
             std::unordered_map<const Stmt*, std::unordered_set<const Expr*>>& seen) {
    for (const auto& s : ss) {
        auto& sn = seen[region];
        switch (s->kind) {
        case StmtKind::Loop:
            collect_expr(s->begin, region, r, sn);
            collect_expr(s->end, region, r, sn);
            collect(s->body, s.get(), r, seen);
            break;
        case StmtKind::Store:
            collect_expr(s->index, region, r, sn);
            collect_expr(s->value, region, r, sn);
            break;
        case StmtKind::Assign: {
            collect_expr(s->value, region, r, sn);
            auto& v = r[static_cast<std::size_t>(s->var)];
            if (std::find(v.begin(), v.end(), region) == v.end()) v.push_back(region);
            break;
        }
        }
    }
}

// ---- vector loops ----

struct NotVector {
    std::string why;
};

class VectorCheck {
public:
    VectorCheck(const kir::Kernel& k, LoopPlan& p, LoopVar v, const Stmt* region, const Regions& regions)
        : k_(k), p_(p), v_(v), region_(region), regions_(regions) {}

    void run(const std::vector<kir::StmtRef>& body) {
        p_.assigned.assign(k_.temps.size(), 0);
        std::vector<int> stores(k_.buffers.size(), 0);
        for (const auto& s : body) {
            if (s->kind == StmtKind::Loop) throw NotVector{"a nested loop"};
            if (s->kind == StmtKind::Assign) p_.assigned[static_cast<std::size_t>(s->var)] = 1;
            if (s->kind == StmtKind::Store && ++stores[static_cast<std::size_t>(s->buffer)] > 1)
                throw NotVector{"a buffer stored twice"};
        }
        stored_ = std::move(stores);
        store_index_.assign(k_.buffers.size(), nullptr);
        for (const auto& s : body)
            if (s->kind == StmtKind::Store) store_index_[static_cast<std::size_t>(s->buffer)] = s->index.get();
        // Classify the temps assigned here: accumulators, then per-iteration temps.
        std::vector<char> defined(k_.temps.size(), 0);
        for (const auto& s : body) {
            if (s->kind != StmtKind::Assign) continue;
            const auto t = static_cast<std::size_t>(s->var);
            LoopPlan::Reduction red;
            if (accumulator_operand(*s, red)) {
                p_.reduction_of[s.get()] = static_cast<int>(p_.reductions.size());
                p_.reductions.push_back(red);
            } else if (k_.temps[t] != Type::f32 && k_.temps[t] != Type::boolean) {
                throw NotVector{"a per-iteration temp of type " + std::string(kir::type_name(k_.temps[t]))};
            }
        }
        for (const auto& [stmt, i] : p_.reduction_of) {
            const int t = p_.reductions[static_cast<std::size_t>(i)].temp;
            int assigns = 0;
            for (const auto& s : body)
                if (s->kind == StmtKind::Assign && s->var == t) ++assigns;
            if (assigns != 1) throw NotVector{"an accumulator assigned twice"};
            reduction_temp_.push_back(t);
        }
        for (const auto& s : body) {
            check_defined(s, defined);
            if (s->kind == StmtKind::Assign && p_.reduction_of.count(s.get())) {
                const auto& r = p_.reductions[static_cast<std::size_t>(p_.reduction_of.at(s.get()))];
                lane_value(r.operand);
                continue;
            }
            if (s->kind == StmtKind::Store) {
                if (k_.buffers[static_cast<std::size_t>(s->buffer)].dtype != DType::f32) throw NotVector{"a store that is not f32"};
                if (coefficient(*s->index, v_, p_.assigned) != 1) throw NotVector{"a store that is not unit-stride"};
                lane_value(s->value);
            } else {
                lane_value(s->value);
                const auto t = static_cast<std::size_t>(s->var);
                // A per-iteration temp: assigned before any read in the body, and used only here.
                const auto& reg = regions_[t];
                if (reg.size() != 1 || reg[0] != region_) throw NotVector{"a temp used outside the loop"};
                defined[t] = 1;
            }
        }
    }

private:
    const kir::Kernel& k_;
    LoopPlan& p_;
    LoopVar v_;
    const Stmt* region_;
    const Regions& regions_;
    std::vector<int> stored_;
    std::vector<const Expr*> store_index_;
    std::vector<int> reduction_temp_;

    // t = t op x or t = x op t (op add, max or min on f32), or a NaN-skipping extreme
    // t = select(x > t, x, t) (`<`: min; tiers/kir_forms.h), x not reading t: fills `red`.
    bool accumulator_operand(const Stmt& s, LoopPlan::Reduction& red) const {
        const Expr& e = *s.value;
        if (k_.temps[static_cast<std::size_t>(s.var)] != Type::f32) return false;
        ExprRef x;
        bool max = false;
        if (e.kind == ExprKind::Binary && (e.bop == BinaryOp::add || e.bop == BinaryOp::max || e.bop == BinaryOp::min)) {
            auto is_t = [&](const ExprRef& a) { return a->kind == ExprKind::Temp && a->id == s.var; };
            x = is_t(e.args[0]) ? e.args[1] : is_t(e.args[1]) ? e.args[0] : nullptr;
            red = {s.var, e.bop, x, false};
        } else if ((x = nan_skipping_extreme(s.var, e, max))) {
            red = {s.var, max ? BinaryOp::max : BinaryOp::min, x, true};
        }
        return x && !reads_temp(*x, s.var);
    }
    static bool reads_temp(const Expr& e, int t) {
        if (e.kind == ExprKind::Temp && e.id == t) return true;
        for (const auto& a : e.args)
            if (reads_temp(*a, t)) return true;
        return false;
    }

    // Every temp assigned in the loop that the statement reads must be a per-iteration temp
    // assigned earlier in this iteration; accumulators are read only by their own update
    // (whose operand does not read them).
    void check_defined(const kir::StmtRef& s, const std::vector<char>& defined) {
        std::unordered_set<const Expr*> seen;
        auto walk = [&](auto& self, const Expr& e) -> void {
            if (!seen.insert(&e).second) return;
            if (e.kind == ExprKind::Temp && p_.assigned[static_cast<std::size_t>(e.id)]) {
                if (std::find(reduction_temp_.begin(), reduction_temp_.end(), e.id) != reduction_temp_.end())
                    throw NotVector{"an accumulator read inside its loop"};
                if (!defined[static_cast<std::size_t>(e.id)]) throw NotVector{"a temp carried from one iteration to the next"};
            }
            for (const auto& a : e.args) self(self, *a);
        };
        if (s->kind == StmtKind::Store) walk(walk, *s->index);
        if (p_.reduction_of.count(s.get())) walk(walk, *p_.reductions[static_cast<std::size_t>(p_.reduction_of.at(s.get()))].operand);
        else walk(walk, *s->value);
    }

    // Is e a value that depends on the loop variable? Throws NotVector for a varying value
    // the vector code cannot compute.
    bool lane_value(const ExprRef& e) {
        if (auto it = p_.varying.find(e.get()); it != p_.varying.end()) return it->second;
        const bool v = classify(*e);
        p_.varying[e.get()] = v;
        return v;
    }

    bool classify(const Expr& e) {
        switch (e.kind) {
        case ExprKind::Const:
        case ExprKind::Param: return false;
        case ExprKind::Outer:
        case ExprKind::Var:
            if (v_.is(e)) throw NotVector{"the loop variable used as a value"};
            return false;
        case ExprKind::Temp: {
            if (!p_.assigned[static_cast<std::size_t>(e.id)]) return false;
            if (e.type != Type::f32 && e.type != Type::boolean) throw NotVector{"a varying temp that is not f32 or bool"};
            return true;
        }
        case ExprKind::Load: {
            const auto c = coefficient(*e.args[0], v_, p_.assigned);
            if (!c || (*c != 0 && *c != 1)) throw NotVector{"a load that is neither unit-stride nor invariant"};
            // A buffer the loop stores: read only where this iteration writes (in place).
            if (stored_[static_cast<std::size_t>(e.id)] &&
                (*c != 1 || !kir::same_expr(*e.args[0], *store_index_[static_cast<std::size_t>(e.id)])))
                throw NotVector{"a load of a buffer stored in the loop at another index"};
            if (*c == 0) return false;
            if (k_.buffers[static_cast<std::size_t>(e.id)].dtype != DType::f32) throw NotVector{"a load that is not f32"};
            return true;
        }
        default: break;
        }
        bool any = false;
        std::vector<bool> arg_varying;
        for (const auto& a : e.args) {
            const bool av = lane_value(a);
            arg_varying.push_back(av);
            any = any || av;
        }
        if (!any) return false;
        // A varying operation: f32 or bool lanes, and every uniform operand f32 (broadcast).
        for (std::size_t i = 0; i < e.args.size(); ++i)
            if (!arg_varying[i] && e.args[i]->type != Type::f32) throw NotVector{"an invariant operand that is not f32"};
        const Type at = e.args[0]->type;
        switch (e.kind) {
        case ExprKind::Unary:
            if (at == Type::boolean) return true;  // logical_not
            if (e.uop == UnaryOp::sin || e.uop == UnaryOp::cos) throw NotVector{"sin/cos (scalar libm calls)"};
            return true;
        case ExprKind::Binary:
            if (at == Type::boolean && !(e.bop == BinaryOp::logical_and || e.bop == BinaryOp::logical_or))
                throw NotVector{"a comparison of bools"};
            if (e.bop == BinaryOp::pow) throw NotVector{"pow (a scalar libm call)"};
            return true;
        case ExprKind::Select:
            if (e.type != Type::f32) throw NotVector{"a select of bools"};
            return true;
        case ExprKind::Cast:
            if ((at == Type::f32 && e.type == Type::boolean) || (at == Type::boolean && e.type == Type::f32)) return true;
            throw NotVector{"a cast from or to a type that is not f32 or bool"};
        default: break;
        }
        throw NotVector{"an unknown expression"};
    }
};

void plan_loop(const kir::Kernel& k, LoopPlan& p, LoopVar v, const Stmt* region, const std::vector<kir::StmtRef>& body,
               const Regions& regions) {
    try {
        VectorCheck(k, p, v, region, regions).run(body);
        p.vector = true;
    } catch (const NotVector& nv) {
        p.vector = false;
        p.why_scalar = nv.why;
        p.reductions.clear();
        p.reduction_of.clear();
        p.varying.clear();
    }
}

void plan_loops(const kir::Kernel& k, const std::vector<kir::StmtRef>& ss, Analysis& a, bool allow, const Regions& regions) {
    for (const auto& s : ss) {
        if (s->kind != StmtKind::Loop) continue;
        LoopPlan& p = a.loops[s.get()];
        p.assigned.assign(k.temps.size(), 0);
        const bool inner = std::none_of(s->body.begin(), s->body.end(), [](const kir::StmtRef& b) { return b->kind == StmtKind::Loop; });
        if (allow && inner) plan_loop(k, p, LoopVar{false, s->var}, s.get(), s->body, regions);
        else p.why_scalar = allow ? "not an innermost loop" : "vector loops are off";
        plan_loops(k, s->body, a, allow, regions);
    }
}

}  // namespace

std::optional<std::int64_t> coefficient(const Expr& e, const LoopVar& v, const std::vector<char>& assigned) {
    switch (e.kind) {
    case ExprKind::Const:
    case ExprKind::Param: return 0;
    case ExprKind::Outer:
    case ExprKind::Var: return v.is(e) ? 1 : 0;
    case ExprKind::Temp:
        if (static_cast<std::size_t>(e.id) < assigned.size() && assigned[static_cast<std::size_t>(e.id)]) return std::nullopt;
        return 0;
    case ExprKind::Binary: {
        const auto a = coefficient(*e.args[0], v, assigned), b = coefficient(*e.args[1], v, assigned);
        if (!a || !b) return std::nullopt;
        if (e.type != Type::index) return (*a == 0 && *b == 0) ? std::optional<std::int64_t>(0) : std::nullopt;
        switch (e.bop) {
        case BinaryOp::add: return *a + *b;
        case BinaryOp::sub: return *a - *b;
        case BinaryOp::mul:
            if (*a == 0 && *b == 0) return 0;
            if (*b == 0 && e.args[1]->kind == ExprKind::Const) return *a * e.args[1]->i;
            if (*a == 0 && e.args[0]->kind == ExprKind::Const) return *b * e.args[0]->i;
            return std::nullopt;
        default: return (*a == 0 && *b == 0) ? std::optional<std::int64_t>(0) : std::nullopt;
        }
    }
    default: break;
    }
    for (const auto& a : e.args) {
        const auto c = coefficient(*a, v, assigned);
        if (!c || *c != 0) return std::nullopt;
    }
    return 0;
}

Analysis analyze(const kir::Kernel& k, bool allow_vectors) {
    Checker(k).run();
    Regions regions(k.temps.size());
    std::unordered_map<const Stmt*, std::unordered_set<const Expr*>> seen;
    collect(k.body, nullptr, regions, seen);
    Analysis a;
    a.outer.assigned.assign(k.temps.size(), 0);
    const bool flat = std::none_of(k.body.begin(), k.body.end(), [](const kir::StmtRef& s) { return s->kind == StmtKind::Loop; });
    if (allow_vectors && flat) plan_loop(k, a.outer, LoopVar{true, -1}, nullptr, k.body, regions);
    else a.outer.why_scalar = allow_vectors ? "the body has loops" : "vector loops are off";
    plan_loops(k, k.body, a, allow_vectors, regions);
    return a;
}

}  // namespace kiln::tiers::asmjit_tier
