// The text form of a kernel (KILN_DUMP=kir). Example:
//
//   kernel g1.add_relu
//     buffer b0 in0: f32
//     buffer b1 out0: f32 (output)
//     param p0 in0.d0 = dim 0 of b0
//     temp t0: f64
//     for outer in [0, p0):
//       for v0 in [0, 784):
//         b1[outer * 784 + v0] = relu(add(b0[outer * 784 + v0], b2[v0]))
//
// Index arithmetic is printed infix; other operations as op(args), loads as bN[index],
// constants with a type suffix unless f32/index/bool (1.5f64, 3i8).
#include "src/kir/kir.h"

#include <iomanip>
#include <limits>
#include <sstream>

namespace kiln::kir {
namespace {

void print_expr(std::ostream& os, const Expr& e);

void print_const(std::ostream& os, const Expr& e) {
    if (is_float(e.type)) {
        std::ostringstream s;
        s << std::setprecision(17) << e.f;
        os << s.str();
        if (e.type != Type::f32) os << type_name(e.type);
        return;
    }
    if (e.type == Type::boolean) {
        os << (e.i ? "true" : "false");
        return;
    }
    os << e.i;
    if (e.type != Type::index) os << type_name(e.type);
}

const char* infix(BinaryOp op) {
    switch (op) {
    case BinaryOp::add: return " + ";
    case BinaryOp::sub: return " - ";
    case BinaryOp::mul: return " * ";
    case BinaryOp::div: return " / ";
    case BinaryOp::eq: return " == ";
    case BinaryOp::ne: return " != ";
    case BinaryOp::lt: return " < ";
    case BinaryOp::le: return " <= ";
    case BinaryOp::gt: return " > ";
    case BinaryOp::ge: return " >= ";
    default: return nullptr;
    }
}

void print_expr(std::ostream& os, const Expr& e) {
    switch (e.kind) {
    case ExprKind::Const: print_const(os, e); return;
    case ExprKind::Param: os << "p" << e.id; return;
    case ExprKind::Outer: os << "outer"; return;
    case ExprKind::Var: os << "v" << e.id; return;
    case ExprKind::Temp: os << "t" << e.id; return;
    case ExprKind::Load:
        os << "b" << e.id << "[";
        print_expr(os, *e.args[0]);
        os << "]";
        return;
    case ExprKind::Unary:
        os << op_name(e.uop) << "(";
        print_expr(os, *e.args[0]);
        os << ")";
        return;
    case ExprKind::Binary:
        if (e.args[0]->type == Type::index && infix(e.bop) != nullptr) {
            os << "(";
            print_expr(os, *e.args[0]);
            os << infix(e.bop);
            print_expr(os, *e.args[1]);
            os << ")";
        } else {
            os << op_name(e.bop) << "(";
            print_expr(os, *e.args[0]);
            os << ", ";
            print_expr(os, *e.args[1]);
            os << ")";
        }
        return;
    case ExprKind::Select:
        os << "select(";
        print_expr(os, *e.args[0]);
        os << ", ";
        print_expr(os, *e.args[1]);
        os << ", ";
        print_expr(os, *e.args[2]);
        os << ")";
        return;
    case ExprKind::Cast:
        os << type_name(e.type) << "(";
        print_expr(os, *e.args[0]);
        os << ")";
        return;
    }
}

void print_stmts(std::ostream& os, const std::vector<StmtRef>& body, int indent) {
    for (const StmtRef& s : body) {
        os << std::string(static_cast<std::size_t>(indent), ' ');
        switch (s->kind) {
        case StmtKind::Loop:
            os << "for v" << s->var << " in [";
            print_expr(os, *s->begin);
            os << ", ";
            print_expr(os, *s->end);
            os << "):\n";
            print_stmts(os, s->body, indent + 2);
            break;
        case StmtKind::Store:
            os << "b" << s->buffer << "[";
            print_expr(os, *s->index);
            os << "] = ";
            print_expr(os, *s->value);
            os << "\n";
            break;
        case StmtKind::Assign:
            os << "t" << s->var << " = ";
            print_expr(os, *s->value);
            os << "\n";
            break;
        }
    }
}

}  // namespace

std::string print(const Kernel& k) {
    std::ostringstream os;
    os << "kernel " << k.name << "\n";
    for (std::size_t i = 0; i < k.buffers.size(); ++i)
        os << "  buffer b" << i << " " << k.buffers[i].name << ": " << k.buffers[i].dtype
           << (k.buffers[i].output ? " (output)" : "") << "\n";
    for (std::size_t i = 0; i < k.derived.size(); ++i) {
        const Derived& d = k.derived[i];
        os << "  derived d" << i << " of b" << d.source << ": " << d.groups << " x " << d.rows << " x " << d.cols;
        if (d.winograd) os << " as Winograd F(4x4, 3x3) points in tiles of " << d.lanes << " rows\n";
        else
            os << " in tiles of " << d.lanes << " rows" << (d.sub > 0 ? " (slabs of " + std::to_string(d.sub) + ")" : "")
               << ", transposed" << (d.transposed ? ", from the source transposed" : "") << "\n";
    }
    for (std::size_t i = 0; i < k.params.size(); ++i) {
        os << "  param p" << i << " " << k.params[i];
        if (i < k.param_sources.size()) {
            const ParamSource& s = k.param_sources[i];
            if (s.from_symbol()) os << " = ?" << s.symbol;
            else os << " = dim " << s.dim << " of b" << s.buffer;
        }
        os << "\n";
    }
    for (std::size_t i = 0; i < k.temps.size(); ++i) os << "  temp t" << i << ": " << type_name(k.temps[i]) << "\n";
    os << "  for outer in [0, ";
    if (k.extent) print_expr(os, *k.extent);
    else os << "?";
    os << "):\n";
    print_stmts(os, k.body, 4);
    if (k.matmul) {
        const MatmulHint& h = *k.matmul;
        auto e = [&](const ExprRef& x) {
            if (x) print_expr(os, *x);
            else os << "?";
        };
        os << "  matmul hint: " << type_name(h.type) << " A b" << h.a << " B b" << h.b << " -> b" << h.out << ", m ";
        e(h.m);
        os << ", n ";
        e(h.n);
        os << ", k ";
        e(h.k);
        os << ", batch ";
        e(h.batch);
        os << ", rows per outer " << h.row_block;
        if (h.col_block > 0) os << ", columns per outer " << h.col_block;
        if (h.a_packed >= 0) os << ", A packed as derived d" << h.a_packed;
        if (h.b_packed >= 0) os << ", B packed as derived d" << h.b_packed;
        if (h.winograd >= 0) os << ", A transformed as derived d" << h.winograd;
        os << "\n    batch v" << h.batch_var << ", row v" << h.row_var << ", col v"
           << h.col_var << ", acc t" << h.acc_temp << ", A offset ";
        e(h.a_offset);
        os << ", B offset ";
        e(h.b_offset);
        if (h.im2col) {
            const Im2col& c = *h.im2col;
            os << "\n    B = im2col of b" << c.x << " at ";
            e(c.x_offset);
            os << ": h ";
            e(c.h);
            os << ", w ";
            e(c.w);
            os << ", kh ";
            e(c.kh);
            os << ", kw ";
            e(c.kw);
            os << ", ow ";
            e(c.ow);
            os << ", stride " << c.stride[0] << "x" << c.stride[1] << ", pad " << c.pad[0] << "x" << c.pad[1]
               << ", dilation " << c.dilation[0] << "x" << c.dilation[1];
        }
        os << "\n    epilogue:\n";
        print_stmts(os, h.epilogue, 6);
    }
    if (k.nchwc) {
        const NchwcConv& h = *k.nchwc;
        auto e = [&](const ExprRef& x) {
            if (x) print_expr(os, *x);
            else os << "?";
        };
        os << "  nchwc hint: x b" << h.x << (h.blocked_input ? " blocked" : " nchw") << " at ";
        e(h.x_offset);
        os << ", w b" << h.w << (h.depthwise ? " depthwise" : "") << ", cin " << h.cin << ", kernel " << h.kh << "x" << h.kw
           << ", stride " << h.stride[0] << "x" << h.stride[1] << ", pad " << h.pad[0] << "x" << h.pad[1] << ", dilation "
           << h.dilation[0] << "x" << h.dilation[1] << ", blocks ";
        e(h.blocks);
        os << " (" << h.block_rows << " per outer)";
        if (h.cout != std::numeric_limits<std::int64_t>::max()) os << ", channels " << h.cout;
        os << ", pixels ";
        e(h.npix);
        os << " (" << h.col_block << " per outer)\n    batch v" << h.batch_var << ", block v" << h.block_var << ", col v"
           << h.col_var << ", lane v" << h.lane_var << ", acc t" << h.acc_temp << "\n    epilogue:\n";
        print_stmts(os, h.epilogue, 6);
    }
    return os.str();
}

}  // namespace kiln::kir
