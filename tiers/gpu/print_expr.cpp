// Expressions and statements of the printed source (see print_p.h). Each op follows its
// formula in src/core/scalar_ops.h and casts follow core::convert, exactly:
// - every computed value is held in a local of its KIR type, so integer results wrap to
//   their width at every op, as the evaluator's do; integer add/sub/mul/neg compute in
//   unsigned long long (wrapping, never undefined);
// - float ops are the device's IEEE operations and correctly rounded division and square
//   root (the compile options turn fast math off); transcendental functions are the
//   device's (a few ulps, like the CPU tiers' within the tests' tolerance);
// - index arithmetic (type index) is plain long long arithmetic: the runtime never runs a
//   kernel whose offsets overflow int64. Index division by anything but a positive constant
//   goes through the helper that gives 0 for a zero divisor.
#include "tiers/gpu/print_p.h"

#include <sstream>

namespace kiln::tiers::gpu::detail {

using kir::BinaryOp;
using kir::Expr;
using kir::ExprKind;
using kir::ExprRef;
using kir::Stmt;
using kir::StmtKind;
using kir::Type;
using kir::UnaryOp;

namespace {

[[noreturn]] void unsupported(const std::string& why) { throw Unsupported{why}; }

bool is_int(Type t) { return t == Type::i8 || t == Type::u8 || t == Type::i32 || t == Type::i64 || t == Type::index; }
// The helpers' name of an integer type (index computes as i64).
std::string int_name(Type t) { return t == Type::index ? "i64" : std::string(kir::type_name(t)); }
std::string wrap(const char* op, Type t, const std::string& x, const std::string& y) {
    return "(" + std::string(c_type(t)) + ")((unsigned long long)" + x + " " + op + " (unsigned long long)" + y + ")";
}

}  // namespace

// ---- output ----

void Printer::line(const std::string& s) {
    out.append(static_cast<std::size_t>(4 * indent), ' ');
    out += s;
    out += '\n';
}
void Printer::expr_line(const std::string& prefix, const ExprRef& e, const std::string& suffix) {
    const std::size_t mark = memo_log_.size();
    const std::string v = expr(e);
    line(prefix + v + suffix);
    pop_memo(mark);
}
void Printer::open(const std::string& s) {
    line(s + " {");
    ++indent;
}
void Printer::close() {
    --indent;
    line("}");
}

std::string Printer::helper(const std::string& name) {
    if (!is_helper(name)) unsupported("no helper " + name);  // a printer bug, reported as a bail-out
    helpers.insert(name);
    return name;
}

// ---- statements ----

void Printer::stmts(const std::vector<kir::StmtRef>& body) {
    for (const kir::StmtRef& s : body) {
        if (!s) unsupported("a null statement");
        // A statement's hoisted values are valid only in it: the next one may follow an
        // assignment to a temporary they read.
        const std::size_t mark = memo_log_.size();
        stmt(*s);
        pop_memo(mark);
    }
}

void Printer::stmt(const Stmt& s) {
    switch (s.kind) {
    case StmtKind::Loop: {
        if (s.var < 0) unsupported("a loop variable with a negative id");
        if (!s.begin || !s.end) unsupported("a loop without bounds");
        const std::string b = expr(s.begin), e = expr(s.end), v = var_name(s.var);
        const std::vector<WarpReduction>* split = warp && depth_ == 0 ? warp->find(&s) : nullptr;
        if (split) open("for (long long " + v + " = " + b + " + lane; " + v + " < " + e + "; " + v + " += 32)");
        else open("for (long long " + v + " = " + b + "; " + v + " < " + e + "; ++" + v + ")");
        ++depth_;
        stmts(s.body);
        --depth_;
        close();
        // What one lane stored in the loop, another may read in a later one. A HIP wavefront
        // runs its lanes in lock step, and its lanes' memory operations reach one L1 cache in
        // order: a fence keeps the compiler from moving a later load above the loop's stores.
        if (split) line(dialect_ == Dialect::cuda ? "__syncwarp();" : "__threadfence_block();");
        if (split)
            for (const WarpReduction& r : *split) {  // every lane gets the total of the lanes' partial results
                const std::string t = temp_name(r.temp), T = c_type(r.type), n(kir::type_name(r.type));
                std::string combine = t + " + o";
                if (r.select) {
                    const char* cmp = r.op == BinaryOp::gt ? " > " : " < ";
                    combine = "(o" + std::string(cmp) + t + ") ? o : " + t;
                } else if (r.op == BinaryOp::max || r.op == BinaryOp::min) {
                    combine = helper("kiln_" + std::string(kir::op_name(r.op)) + "_" + n) + "(" + t + ", o)";
                }
                open("for (int s = 16; s > 0; s >>= 1)");
                // HIP: the width keeps a wave64's two rows apart (the lanes xor within 32).
                line("const " + T + " o = " +
                     (dialect_ == Dialect::cuda ? "__shfl_xor_sync(0xffffffffu, " + t + ", s)" : "__shfl_xor(" + t + ", s, 32)") + ";");
                line(t + " = " + combine + ";");
                close();
            }
        return;
    }
    case StmtKind::Store: {
        check_buffer(s.buffer);
        if (!s.index || !s.value) unsupported("a store without operands");
        const DType dt = k_.buffers[static_cast<std::size_t>(s.buffer)].dtype;
        if (s.value->type != kir::compute_type(dt)) unsupported("a store of " + std::string(kir::type_name(s.value->type)) + " into a buffer of another type");
        const std::string i = expr(s.index), v = expr(s.value);
        std::string value = v;
        if (dt == DType::f16) value = helper("kiln_f32_to_f16") + "(" + v + ")";
        else if (dt == DType::bf16) value = helper("kiln_f32_to_bf16") + "(" + v + ")";
        else if (dt == DType::boolean) value = "(unsigned char)(" + v + " ? 1 : 0)";
        buffers_used.insert(s.buffer);
        if (auto lane = lanes.find(s.buffer); lane != lanes.end() && s.index->kind == ExprKind::Outer) {
            line(lane->second + " = " + value + ";");
            return;
        }
        const bool one_lane = warp && depth_ == 0;  // a row's single value: lane 0 stores it
        line((one_lane ? "if (lane == 0) " : "") + buffer_name(s.buffer) + "[" + i + "] = " + value + ";");
        return;
    }
    case StmtKind::Assign: {
        if (s.var < 0 || static_cast<std::size_t>(s.var) >= k_.temps.size()) unsupported("an assignment to an unknown temporary");
        if (!s.value || s.value->type != k_.temps[static_cast<std::size_t>(s.var)]) unsupported("an assignment of another type to a temporary");
        const std::string v = expr(s.value);
        temps_used.insert(s.var);
        line(temp_name(s.var) + " = " + v + ";");
        return;
    }
    }
    unsupported("an unknown statement kind");
}

// ---- expressions ----

void Printer::pop_memo(std::size_t mark) {
    while (memo_log_.size() > mark) {
        memo_.erase(memo_log_.back());
        memo_log_.pop_back();
    }
}

std::string Printer::hoist(const Expr& e, const std::string& text) {
    const std::string name = "x" + std::to_string(next_++);
    line("const " + std::string(c_type(e.type)) + " " + name + " = " + text + ";");
    memo_.emplace(&e, name);
    memo_log_.push_back(&e);
    return name;
}

bool Printer::has_load(const ExprRef& e) {
    if (auto it = loads_.find(e.get()); it != loads_.end()) return it->second;
    bool r = e->kind == ExprKind::Load;
    for (const ExprRef& a : e->args) r = r || (a && has_load(a));
    loads_.emplace(e.get(), r);
    return r;
}

std::string Printer::param(int id) {
    if (id < 0 || static_cast<std::size_t>(id) >= k_.params.size()) unsupported("a param out of range");
    const auto i = static_cast<std::size_t>(id);
    if (i < spec_.params.size() && spec_.params[i]) return int_literal(Type::index, *spec_.params[i]);
    return "a.param[" + std::to_string(id) + "]";
}

void Printer::check_buffer(int id) {
    if (id < 0 || static_cast<std::size_t>(id) >= k_.buffers.size()) unsupported("a buffer out of range");
}

std::string Printer::expr(const ExprRef& ref) {
    if (!ref) unsupported("a null expression");
    const Expr& e = *ref;
    for (const ExprRef& a : e.args)
        if (!a) unsupported("a null operand");
    switch (e.kind) {
    case ExprKind::Const: return kir::is_float(e.type) ? float_literal(e.type, e.f) : int_literal(e.type, e.i);
    case ExprKind::Param: return param(e.id);
    case ExprKind::Outer: return "outer";
    case ExprKind::Var:
        if (e.id < 0) unsupported("a loop variable with a negative id");
        return var_name(e.id);
    case ExprKind::Temp:
        if (e.id < 0 || static_cast<std::size_t>(e.id) >= k_.temps.size() || k_.temps[static_cast<std::size_t>(e.id)] != e.type)
            unsupported("a read of an unknown temporary");
        temps_used.insert(e.id);
        return temp_name(e.id);
    default: break;
    }
    if (auto it = memo_.find(&e); it != memo_.end()) return it->second;
    if (e.kind == ExprKind::Select && e.args.size() == 3 && (has_load(e.args[1]) || has_load(e.args[2]))) return select(e);
    return hoist(e, compute(e));
}

// A select whose branches load: only the chosen branch runs (it may load out of range).
std::string Printer::select(const Expr& e) {
    if (e.args[0]->type != Type::boolean) unsupported("a malformed select");
    const std::string c = expr(e.args[0]);
    const std::string name = "x" + std::to_string(next_++);
    line(std::string(c_type(e.type)) + " " + name + ";");
    for (int branch = 1; branch <= 2; ++branch) {
        if (branch == 1) open("if (" + c + ")");
        else open("else");
        const std::size_t mark = memo_log_.size();
        const std::string v = expr(e.args[static_cast<std::size_t>(branch)]);
        line(name + " = " + v + ";");
        pop_memo(mark);
        close();
    }
    memo_.emplace(&e, name);
    memo_log_.push_back(&e);
    return name;
}

std::string Printer::compute(const Expr& e) {
    switch (e.kind) {
    case ExprKind::Load: return load(e);
    case ExprKind::Unary:
        if (e.args.size() != 1) unsupported("a unary op without one operand");
        return unary(e, expr(e.args[0]));
    case ExprKind::Binary: {
        if (e.args.size() != 2) unsupported("a binary op without two operands");
        const std::string x = expr(e.args[0]), y = expr(e.args[1]);
        return binary(e, x, y);
    }
    case ExprKind::Select: {
        if (e.args.size() != 3 || e.args[0]->type != Type::boolean) unsupported("a malformed select");
        const std::string c = expr(e.args[0]), x = expr(e.args[1]), y = expr(e.args[2]);
        return "(" + c + " ? " + x + " : " + y + ")";
    }
    case ExprKind::Cast:
        if (e.args.size() != 1) unsupported("a cast without one operand");
        return cast(e, expr(e.args[0]));
    default: break;
    }
    unsupported("an unknown expression kind");
}

std::string Printer::load(const Expr& e) {
    check_buffer(e.id);
    if (e.args.size() != 1) unsupported("a load without an index");
    const DType dt = k_.buffers[static_cast<std::size_t>(e.id)].dtype;
    if (e.type != kir::compute_type(dt)) unsupported("a load that does not give its buffer's compute type");
    buffers_used.insert(e.id);
    if (auto lane = lanes.find(e.id); lane != lanes.end() && e.args[0]->kind == ExprKind::Outer) return lane->second;
    const std::string el = buffer_name(e.id) + "[" + expr(e.args[0]) + "]";
    if (dt == DType::f16) return helper("kiln_f16_to_f32") + "(" + el + ")";
    if (dt == DType::bf16) return helper("kiln_bf16_to_f32") + "(" + el + ")";
    if (dt == DType::boolean) return "(" + el + " != 0)";
    return el;
}

std::string Printer::unary(const Expr& e, const std::string& x) {
    const Type t = e.type;
    const std::string op(kir::op_name(e.uop));
    if (t == Type::boolean) {
        if (e.uop == UnaryOp::logical_not) return "!" + x;
    } else if (kir::is_float(t)) {
        const std::string f = t == Type::f32 ? "f" : "", n(kir::type_name(t)), one = float_literal(t, 1.0);
        switch (e.uop) {
        case UnaryOp::neg: return "-" + x;
        case UnaryOp::abs: return "fabs" + f + "(" + x + ")";
        case UnaryOp::exp: case UnaryOp::log: case UnaryOp::sqrt: case UnaryOp::sin: case UnaryOp::cos:
        case UnaryOp::tanh: case UnaryOp::erf: case UnaryOp::floor: case UnaryOp::ceil:
            return op + f + "(" + x + ")";
        case UnaryOp::rsqrt: return one + " / sqrt" + f + "(" + x + ")";  // not rsqrtf: it rounds differently
        case UnaryOp::reciprocal: return one + " / " + x;
        case UnaryOp::round: return "rint" + f + "(" + x + ")";  // half to even in the default rounding mode
        case UnaryOp::sigmoid: case UnaryOp::relu: case UnaryOp::gelu_erf: case UnaryOp::gelu_tanh:
        case UnaryOp::silu: case UnaryOp::sign:
            return helper("kiln_" + op + "_" + n) + "(" + x + ")";
        case UnaryOp::logical_not: break;
        }
    } else if (is_int(t)) {
        const std::string T = c_type(t);
        const bool is_signed = t != Type::u8;
        switch (e.uop) {
        case UnaryOp::neg: return "(" + T + ")(0ull - (unsigned long long)" + x + ")";
        case UnaryOp::abs: return is_signed ? helper("kiln_abs_" + int_name(t)) + "(" + x + ")" : x;
        case UnaryOp::relu: return is_signed ? "(" + x + " > 0 ? " + x + " : (" + T + ")0)" : x;
        case UnaryOp::sign: return is_signed ? "(" + T + ")((" + x + " > 0) - (" + x + " < 0))" : "(" + T + ")(" + x + " != 0)";
        default: break;
        }
    }
    unsupported(op + " on " + std::string(kir::type_name(t)));
}

std::string Printer::binary(const Expr& e, const std::string& x, const std::string& y) {
    const Type t = e.args[0]->type;
    if (e.args[1]->type != t) unsupported("a binary op on operands of different types");
    const std::string op(kir::op_name(e.bop));
    switch (e.bop) {  // comparisons: the same in every type (IEEE for floats; false < true)
    case BinaryOp::eq: return "(" + x + " == " + y + ")";
    case BinaryOp::ne: return "(" + x + " != " + y + ")";
    case BinaryOp::lt: return "(" + x + " < " + y + ")";
    case BinaryOp::le: return "(" + x + " <= " + y + ")";
    case BinaryOp::gt: return "(" + x + " > " + y + ")";
    case BinaryOp::ge: return "(" + x + " >= " + y + ")";
    default: break;
    }
    if (t == Type::boolean) {
        if (e.bop == BinaryOp::logical_and) return "(" + x + " && " + y + ")";  // both operands are computed already
        if (e.bop == BinaryOp::logical_or) return "(" + x + " || " + y + ")";
    } else if (kir::is_float(t)) {
        const std::string n(kir::type_name(t));
        switch (e.bop) {
        case BinaryOp::add: return x + " + " + y;
        case BinaryOp::sub: return x + " - " + y;
        case BinaryOp::mul: return x + " * " + y;
        case BinaryOp::div: return x + " / " + y;
        case BinaryOp::pow: return std::string(t == Type::f32 ? "powf(" : "pow(") + x + ", " + y + ")";
        case BinaryOp::max: case BinaryOp::min: return helper("kiln_" + op + "_" + n) + "(" + x + ", " + y + ")";
        default: break;
        }
    } else if (t == Type::index) {
        const ExprRef& d = e.args[1];
        switch (e.bop) {
        case BinaryOp::add: return x + " + " + y;
        case BinaryOp::sub: return x + " - " + y;
        case BinaryOp::mul: return x + " * " + y;
        case BinaryOp::div:
            if (d->kind == ExprKind::Const && d->i > 0) return x + " / " + y;
            return helper("kiln_div_i64") + "(" + x + ", " + y + ")";
        case BinaryOp::max: return "(" + y + " > " + x + " ? " + y + " : " + x + ")";
        case BinaryOp::min: return "(" + y + " < " + x + " ? " + y + " : " + x + ")";
        default: break;
        }
    } else if (is_int(t)) {
        switch (e.bop) {
        case BinaryOp::add: return wrap("+", t, x, y);
        case BinaryOp::sub: return wrap("-", t, x, y);
        case BinaryOp::mul: return wrap("*", t, x, y);
        case BinaryOp::div: return helper("kiln_div_" + int_name(t)) + "(" + x + ", " + y + ")";
        case BinaryOp::max: return "(" + y + " > " + x + " ? " + y + " : " + x + ")";
        case BinaryOp::min: return "(" + y + " < " + x + " ? " + y + " : " + x + ")";
        default: break;
        }
    }
    unsupported(op + " on " + std::string(kir::type_name(t)));
}

// core::convert: to bool, x != 0 (NaN too); float to integer saturates, NaN -> 0; the
// rest are C conversions (round to nearest for to-float, wrapping for integer narrowing).
std::string Printer::cast(const Expr& e, const std::string& x) {
    const Type to = e.type, from = e.args[0]->type;
    if (to == from) return x;
    if (to == Type::boolean) return "(" + x + " != 0)";
    if (is_int(to) && kir::is_float(from)) return helper("kiln_sat_" + int_name(to)) + "((double)" + x + ")";
    return "(" + std::string(c_type(to)) + ")" + x;
}

}  // namespace kiln::tiers::gpu::detail
