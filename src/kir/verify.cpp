// kir::verify: the invariants every code generator may rely on.
// - the extent is an index expression of constants and params only;
// - every id is in range (buffers, params and their sources, temps, loop variables);
// - types are consistent: loads give the compute type of their buffer's dtype, stores
//   take it, operands of binary ops and branches of selects agree, conditions are bool,
//   indices and loop bounds are index, float-only ops get floats, logical ops get bools;
// - a loop variable is used only inside its loop and not rebound by a nested loop;
// - a temporary is assigned before it is used, in the same or an enclosing loop body
//   (an assignment inside a loop is not visible after the loop, which may run 0 times);
// - stores go to output buffers only. `outer` may be used anywhere in the body.
#include "src/kir/kir.h"

#include "src/support/check.h"

#include <algorithm>
#include <string>
#include <vector>

namespace kiln::kir {
namespace {

bool float_only(UnaryOp op) {
    return !(op == UnaryOp::neg || op == UnaryOp::abs || op == UnaryOp::relu || op == UnaryOp::sign ||
             op == UnaryOp::logical_not);
}

class Verifier {
public:
    explicit Verifier(const Kernel& k)
        : k_(k), bound_(static_cast<std::size_t>(std::max(k.num_vars, 0)), false), assigned_(k.temps.size(), false) {}

    void run() {
        check(k_.num_vars >= 0, "negative num_vars");
        check(k_.params.size() == k_.param_sources.size(), "params and param_sources differ in size");
        for (const ParamSource& s : k_.param_sources) {
            if (s.from_symbol()) {
                check(s.buffer == -1 && s.dim == -1,
                      "the param source ?" + s.symbol + " also names buffer " + std::to_string(s.buffer) + " dim " +
                          std::to_string(s.dim));
                continue;
            }
            check(s.buffer >= 0 && static_cast<std::size_t>(s.buffer) < k_.buffers.size() && s.dim >= 0,
                  "a param source names buffer " + std::to_string(s.buffer) + " dim " + std::to_string(s.dim));
        }
        for (const Derived& d : k_.derived)
            check(d.source >= 0 && static_cast<std::size_t>(d.source) < k_.buffers.size() &&
                      !k_.buffers[static_cast<std::size_t>(d.source)].output && d.groups >= 1 && d.rows >= 1 &&
                      d.cols >= 1 && d.lanes >= 1 && (!d.winograd || (d.cols % 9 == 0 && !d.transposed)) &&
                      d.sub >= 0 && (d.sub == 0 || (d.lanes % d.sub == 0 && !d.winograd)),
                  "a derived buffer of b" + std::to_string(d.source) + " is malformed");
        check(k_.extent != nullptr, "no extent");
        in_extent_ = true;
        expr(*k_.extent);
        in_extent_ = false;
        check(k_.extent->type == Type::index, "the extent is not an index expression");
        stmts(k_.body);
        if (k_.matmul) hint(*k_.matmul);
        if (k_.nchwc) {
            const NchwcConv& h = *k_.nchwc;
            check(!k_.matmul, "a kernel with both a matmul and an nchwc hint");
            for (int v : {h.batch_var, h.block_var, h.col_var, h.lane_var})
                check(v >= 0 && v < k_.num_vars, "the nchwc hint's variable v" + std::to_string(v) + " is out of range");
            check(h.acc_temp >= 0 && static_cast<std::size_t>(h.acc_temp) < k_.temps.size() &&
                      k_.temps[static_cast<std::size_t>(h.acc_temp)] == Type::f32,
                  "the nchwc hint's accumulator is not an f32 temp");
            for (int b : {h.x, h.w})
                check(b >= 0 && static_cast<std::size_t>(b) < k_.buffers.size() && !k_.buffers[static_cast<std::size_t>(b)].output &&
                          k_.buffers[static_cast<std::size_t>(b)].dtype == DType::f32,
                      "the nchwc hint's operand b" + std::to_string(b) + " is not an f32 input buffer");
            check(h.cin >= 1 && h.kh >= 1 && h.kw >= 1 && h.block_rows >= 1 && h.col_block >= 1, "the nchwc hint's sizes");
        }
    }

private:
    const Kernel& k_;
    std::vector<bool> bound_, assigned_;
    bool in_extent_ = false;

    void check(bool ok, const std::string& what) const { KILN_CHECK(ok, "kir::verify: kernel " << k_.name << ": " << what); }

    void expr(const Expr& e) {
        for (const ExprRef& a : e.args) check(a != nullptr, "a null operand");
        const std::size_t n = e.args.size();
        auto arity = [&](std::size_t want) { check(n == want, "wrong number of operands"); };
        auto local = [&](const char* what) { check(!in_extent_, std::string(what) + " in the extent"); };
        switch (e.kind) {
        case ExprKind::Const: arity(0); return;
        case ExprKind::Param:
            arity(0);
            check(e.type == Type::index && e.id >= 0 && static_cast<std::size_t>(e.id) < k_.params.size(),
                  "param p" + std::to_string(e.id) + " out of range");
            return;
        case ExprKind::Outer:
            arity(0);
            local("outer");
            check(e.type == Type::index, "outer is not index");
            return;
        case ExprKind::Var:
            arity(0);
            local("a loop variable");
            check(e.type == Type::index && e.id >= 0 && e.id < k_.num_vars, "variable v" + std::to_string(e.id) + " out of range");
            check(bound_[static_cast<std::size_t>(e.id)], "v" + std::to_string(e.id) + " used outside its loop");
            return;
        case ExprKind::Temp:
            arity(0);
            local("a temporary");
            check(e.id >= 0 && static_cast<std::size_t>(e.id) < k_.temps.size(), "temp t" + std::to_string(e.id) + " out of range");
            check(e.type == k_.temps[static_cast<std::size_t>(e.id)], "temp t" + std::to_string(e.id) + " used with another type");
            check(assigned_[static_cast<std::size_t>(e.id)], "t" + std::to_string(e.id) + " used before it is assigned");
            return;
        case ExprKind::Load: {
            arity(1);
            local("a load");
            check(e.id >= 0 && static_cast<std::size_t>(e.id) < k_.buffers.size(), "load of buffer b" + std::to_string(e.id) + " out of range");
            check(e.type == compute_type(k_.buffers[static_cast<std::size_t>(e.id)].dtype), "load of b" + std::to_string(e.id) + " has the wrong type");
            check(e.args[0]->type == Type::index, "a load index is not index");
            break;
        }
        case ExprKind::Unary:
            arity(1);
            check(e.type == e.args[0]->type, "unary result type differs from its operand");
            if (e.uop == UnaryOp::logical_not) check(e.type == Type::boolean, "logical_not of a non-bool");
            else if (float_only(e.uop)) check(is_float(e.type), std::string(op_name(e.uop)) + " of a non-float");
            else check(e.type != Type::boolean, std::string(op_name(e.uop)) + " of a bool");
            break;
        case ExprKind::Binary: {
            arity(2);
            const Type t = e.args[0]->type;
            check(t == e.args[1]->type, std::string(op_name(e.bop)) + ": operand types differ");
            if (is_comparison(e.bop)) {
                check(e.type == Type::boolean, "a comparison does not give bool");
            } else {
                check(e.type == t, std::string(op_name(e.bop)) + ": result type differs from its operands");
                if (e.bop == BinaryOp::logical_and || e.bop == BinaryOp::logical_or) check(t == Type::boolean, "logical op of non-bools");
                else if (e.bop == BinaryOp::pow) check(is_float(t), "pow of non-floats");
                else check(t != Type::boolean, std::string(op_name(e.bop)) + " of bools");
            }
            break;
        }
        case ExprKind::Select:
            arity(3);
            check(e.args[0]->type == Type::boolean, "a select condition is not bool");
            check(e.args[1]->type == e.type && e.args[2]->type == e.type, "select branches differ in type");
            break;
        case ExprKind::Cast: arity(1); break;
        }
        for (const ExprRef& a : e.args) expr(*a);
    }

    // The matmul hint: buffers and types, extents of params only, offsets of the batch
    // variable only, and the epilogue with the batch/row/col variables bound and the
    // accumulator assigned.
    void hint(const MatmulHint& h) {
        check(h.type == Type::f32 || h.type == Type::f64, "matmul hint: the type is not f32 or f64");
        auto input = [&](int b, const char* what) {
            check(b >= 0 && static_cast<std::size_t>(b) < k_.buffers.size() && !k_.buffers[static_cast<std::size_t>(b)].output &&
                      compute_type(k_.buffers[static_cast<std::size_t>(b)].dtype) == h.type,
                  std::string("matmul hint: ") + what + " is not an input buffer whose compute type is the hint's");
        };
        input(h.a, "A");
        input(h.b, "B");
        check(h.out >= 0 && static_cast<std::size_t>(h.out) < k_.buffers.size() && k_.buffers[static_cast<std::size_t>(h.out)].output,
              "matmul hint: out is not an output buffer");
        check(h.a_packed < 0 || (static_cast<std::size_t>(h.a_packed) < k_.derived.size() &&
                                 k_.derived[static_cast<std::size_t>(h.a_packed)].source == h.a),
              "matmul hint: a_packed is not a derived buffer of A");
        check(h.b_packed < 0 || (static_cast<std::size_t>(h.b_packed) < k_.derived.size() &&
                                 k_.derived[static_cast<std::size_t>(h.b_packed)].source == h.b &&
                                 k_.derived[static_cast<std::size_t>(h.b_packed)].transposed && !h.im2col),
              "matmul hint: b_packed is not a transposed derived buffer of a dense B");
        check(h.winograd < 0 || (static_cast<std::size_t>(h.winograd) < k_.derived.size() &&
                                 k_.derived[static_cast<std::size_t>(h.winograd)].source == h.a &&
                                 k_.derived[static_cast<std::size_t>(h.winograd)].winograd && h.im2col),
              "matmul hint: winograd is not a Winograd derived buffer of a conv's A");
        check(h.row_block >= 1, "matmul hint: row_block < 1");
        check(h.col_block >= 0, "matmul hint: col_block < 0");
        std::vector<const ExprRef*> extents{&h.m, &h.n, &h.k, &h.batch};
        if (h.im2col) {
            const Im2col& c = *h.im2col;
            check(c.x == h.b, "matmul hint: the im2col input is not the B buffer");
            for (int d = 0; d < 2; ++d)
                check(c.stride[d] >= 1 && c.dilation[d] >= 1 && c.pad[d] >= 0, "matmul hint: im2col stride, dilation or padding");
            for (const ExprRef* e : {&c.h, &c.w, &c.kh, &c.kw, &c.ow}) extents.push_back(e);
        }
        for (const ExprRef* e : extents) {
            check(*e != nullptr, "matmul hint: a missing extent");
            in_extent_ = true;
            expr(**e);
            in_extent_ = false;
            check((*e)->type == Type::index, "matmul hint: an extent is not index");
        }
        const int vars[] = {h.batch_var, h.row_var, h.col_var};
        for (int v : vars) check(v >= 0 && v < k_.num_vars, "matmul hint: a loop variable out of range");
        check(h.batch_var != h.row_var && h.batch_var != h.col_var && h.row_var != h.col_var,
              "matmul hint: batch, row and col variables must differ");
        check(h.acc_temp >= 0 && static_cast<std::size_t>(h.acc_temp) < k_.temps.size() &&
                  k_.temps[static_cast<std::size_t>(h.acc_temp)] == h.type,
              "matmul hint: the accumulator is not a temp of the hint's type");
        std::fill(bound_.begin(), bound_.end(), false);
        std::fill(assigned_.begin(), assigned_.end(), false);
        bound_[static_cast<std::size_t>(h.batch_var)] = true;
        std::vector<const ExprRef*> offsets{&h.a_offset, &h.b_offset};
        if (h.im2col) offsets.push_back(&h.im2col->x_offset);
        for (const ExprRef* e : offsets) {
            check(*e != nullptr && (*e)->type == Type::index, "matmul hint: an offset is missing or not index");
            expr(**e);
        }
        bound_[static_cast<std::size_t>(h.row_var)] = bound_[static_cast<std::size_t>(h.col_var)] = true;
        assigned_[static_cast<std::size_t>(h.acc_temp)] = true;
        check(!h.epilogue.empty(), "matmul hint: an empty epilogue");
        stmts(h.epilogue);
        std::fill(bound_.begin(), bound_.end(), false);
    }

    void stmts(const std::vector<StmtRef>& body) {
        for (const StmtRef& s : body) {
            check(s != nullptr, "a null statement");
            switch (s->kind) {
            case StmtKind::Loop: {
                check(s->var >= 0 && s->var < k_.num_vars, "loop variable v" + std::to_string(s->var) + " out of range");
                const auto v = static_cast<std::size_t>(s->var);
                check(!bound_[v], "v" + std::to_string(s->var) + " rebound by a nested loop");
                check(s->begin && s->end, "a loop without bounds");
                expr(*s->begin);
                expr(*s->end);
                check(s->begin->type == Type::index && s->end->type == Type::index, "loop bounds are not index");
                const std::vector<bool> saved = assigned_;
                bound_[v] = true;
                stmts(s->body);
                bound_[v] = false;
                assigned_ = saved;
                break;
            }
            case StmtKind::Store: {
                check(s->buffer >= 0 && static_cast<std::size_t>(s->buffer) < k_.buffers.size(), "store to a buffer out of range");
                const Buffer& b = k_.buffers[static_cast<std::size_t>(s->buffer)];
                check(b.output, "store to input buffer b" + std::to_string(s->buffer));
                check(s->index && s->value, "a store without index or value");
                expr(*s->index);
                expr(*s->value);
                check(s->index->type == Type::index, "a store index is not index");
                check(s->value->type == compute_type(b.dtype), "store of a " + std::string(type_name(s->value->type)) +
                                                                    " value into b" + std::to_string(s->buffer));
                break;
            }
            case StmtKind::Assign: {
                check(s->var >= 0 && static_cast<std::size_t>(s->var) < k_.temps.size(), "assign to a temp out of range");
                check(s->value != nullptr, "an assign without value");
                expr(*s->value);
                check(s->value->type == k_.temps[static_cast<std::size_t>(s->var)], "assign of another type to t" + std::to_string(s->var));
                assigned_[static_cast<std::size_t>(s->var)] = true;
                break;
            }
            }
        }
    }
};

}  // namespace

void verify(const Kernel& k) { Verifier(k).run(); }

}  // namespace kiln::kir
