#include "src/kir/kir.h"

#include "src/support/check.h"

namespace kiln::kir {
namespace {
constexpr std::string_view kTypeNames[] = {"f32", "f64", "i8", "u8", "i32", "i64", "bool", "index"};
constexpr std::string_view kUnaryNames[] = {
#define X(n) #n,
    KIR_UNARY_OPS(X)
#undef X
};
constexpr std::string_view kBinaryNames[] = {
#define X(n) #n,
    KIR_BINARY_OPS(X)
#undef X
};

std::shared_ptr<Expr> make(ExprKind k, Type t) {
    auto e = std::make_shared<Expr>();
    e->kind = k;
    e->type = t;
    return e;
}
}  // namespace

bool is_comparison(BinaryOp op) {
    return op == BinaryOp::eq || op == BinaryOp::ne || op == BinaryOp::lt || op == BinaryOp::le ||
           op == BinaryOp::gt || op == BinaryOp::ge;
}
std::string_view type_name(Type t) { return kTypeNames[static_cast<int>(t)]; }
std::string_view op_name(UnaryOp op) { return kUnaryNames[static_cast<int>(op)]; }
std::string_view op_name(BinaryOp op) { return kBinaryNames[static_cast<int>(op)]; }

Type compute_type(DType d) {
    switch (d) {
    case DType::f32: case DType::f16: case DType::bf16: return Type::f32;
    case DType::f64: return Type::f64;
    case DType::i8: return Type::i8;
    case DType::u8: return Type::u8;
    case DType::i32: return Type::i32;
    case DType::i64: return Type::i64;
    case DType::boolean: return Type::boolean;
    }
    return Type::f32;
}
bool is_float(Type t) { return t == Type::f32 || t == Type::f64; }

bool same_expr(const Expr& a, const Expr& b) {
    if (&a == &b) return true;
    if (a.kind != b.kind || a.type != b.type || a.i != b.i || a.id != b.id || a.uop != b.uop || a.bop != b.bop ||
        a.args.size() != b.args.size())
        return false;
    if (a.kind == ExprKind::Const && !(a.f == b.f)) return false;
    for (std::size_t i = 0; i < a.args.size(); ++i)
        if (!same_expr(a.args[i], b.args[i])) return false;
    return true;
}
bool same_expr(const ExprRef& a, const ExprRef& b) {
    if (a == b) return true;
    return a && b && same_expr(*a, *b);
}
bool uses_var(const ExprRef& e, int var) {
    if (!e) return false;
    if (e->kind == ExprKind::Var && e->id == var) return true;
    for (const auto& a : e->args)
        if (uses_var(a, var)) return true;
    return false;
}

ExprRef constant(Type t, double value) {
    auto e = make(ExprKind::Const, t);
    if (is_float(t)) e->f = value;
    else e->i = static_cast<std::int64_t>(value);
    return e;
}
ExprRef index_const(std::int64_t v) {
    auto e = make(ExprKind::Const, Type::index);
    e->i = v;
    return e;
}
ExprRef param(int id) {
    auto e = make(ExprKind::Param, Type::index);
    e->id = id;
    return e;
}
ExprRef outer() { return make(ExprKind::Outer, Type::index); }
ExprRef var(int id) {
    auto e = make(ExprKind::Var, Type::index);
    e->id = id;
    return e;
}
ExprRef temp(int id, Type t) {
    auto e = make(ExprKind::Temp, t);
    e->id = id;
    return e;
}
ExprRef load(int buffer, Type t, ExprRef index) {
    KILN_CHECK(index && index->type == Type::index, "kir::load: the index must have index type");
    auto e = make(ExprKind::Load, t);
    e->id = buffer;
    e->args = {std::move(index)};
    return e;
}
ExprRef unary(UnaryOp op, ExprRef a) {
    KILN_CHECK(a != nullptr, "kir::unary: null operand");
    auto e = make(ExprKind::Unary, a->type);
    e->uop = op;
    e->args = {std::move(a)};
    return e;
}
ExprRef binary(BinaryOp op, ExprRef a, ExprRef b) {
    KILN_CHECK(a && b && a->type == b->type, "kir::binary " << op_name(op) << ": operand types differ");
    auto e = make(ExprKind::Binary, is_comparison(op) ? Type::boolean : a->type);
    e->bop = op;
    e->args = {std::move(a), std::move(b)};
    return e;
}
ExprRef select(ExprRef cond, ExprRef a, ExprRef b) {
    KILN_CHECK(cond && cond->type == Type::boolean, "kir::select: the condition must be boolean");
    KILN_CHECK(a && b && a->type == b->type, "kir::select: branch types differ");
    auto e = make(ExprKind::Select, a->type);
    e->args = {std::move(cond), std::move(a), std::move(b)};
    return e;
}
ExprRef cast(Type t, ExprRef a) {
    KILN_CHECK(a != nullptr, "kir::cast: null operand");
    if (a->type == t) return a;
    auto e = make(ExprKind::Cast, t);
    e->args = {std::move(a)};
    return e;
}

StmtRef loop(int v, ExprRef begin, ExprRef end, std::vector<StmtRef> body) {
    KILN_CHECK(begin && end && begin->type == Type::index && end->type == Type::index, "kir::loop: bounds must be index");
    auto s = std::make_shared<Stmt>();
    s->kind = StmtKind::Loop;
    s->var = v;
    s->begin = std::move(begin);
    s->end = std::move(end);
    s->body = std::move(body);
    return s;
}
StmtRef store(int buffer, ExprRef index, ExprRef value) {
    KILN_CHECK(index && index->type == Type::index && value, "kir::store: bad operands");
    auto s = std::make_shared<Stmt>();
    s->kind = StmtKind::Store;
    s->buffer = buffer;
    s->index = std::move(index);
    s->value = std::move(value);
    return s;
}
StmtRef assign(int t, ExprRef value) {
    KILN_CHECK(value != nullptr, "kir::assign: null value");
    auto s = std::make_shared<Stmt>();
    s->kind = StmtKind::Assign;
    s->var = t;
    s->value = std::move(value);
    return s;
}

std::int64_t eval_index(const ExprRef& e, const std::int64_t* params) {
    switch (e->kind) {
    case ExprKind::Const: return e->i;
    case ExprKind::Param: return params[e->id];
    case ExprKind::Binary: {
        std::int64_t a = eval_index(e->args[0], params), b = eval_index(e->args[1], params);
        switch (e->bop) {
        case BinaryOp::add: return a + b;
        case BinaryOp::sub: return a - b;
        case BinaryOp::mul: return a * b;
        case BinaryOp::div: return b == 0 ? 0 : a / b;
        case BinaryOp::max: return a > b ? a : b;
        case BinaryOp::min: return a < b ? a : b;
        default: break;
        }
        break;
    }
    case ExprKind::Select: {
        const ExprRef& c = e->args[0];
        KILN_CHECK(c->kind == ExprKind::Binary && c->args[0]->type == Type::index, "kir::eval_index: unsupported condition");
        std::int64_t a = eval_index(c->args[0], params), b = eval_index(c->args[1], params);
        bool t = false;
        switch (c->bop) {
        case BinaryOp::eq: t = a == b; break;
        case BinaryOp::ne: t = a != b; break;
        case BinaryOp::lt: t = a < b; break;
        case BinaryOp::le: t = a <= b; break;
        case BinaryOp::gt: t = a > b; break;
        case BinaryOp::ge: t = a >= b; break;
        default: KILN_UNREACHABLE("kir::eval_index: unsupported condition");
        }
        return eval_index(e->args[t ? 1 : 2], params);
    }
    default: break;
    }
    KILN_UNREACHABLE("kir::eval_index: not an index expression of params");
}

}  // namespace kiln::kir
