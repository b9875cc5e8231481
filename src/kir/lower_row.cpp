// Lowering of row_reduction groups (see lower.h): softmax, log_softmax, layer_norm,
// rms_norm, and sum/mean/max/min over trailing axes, with their fused producers
// (recomputed in every pass over the row) and consumers (applied in the write). The
// statistics follow tiers/interp/norm.cpp and reduce.cpp step by step.
#include "src/kir/lower_ctx.h"
#include "src/support/check.h"

#include <cstdint>
#include <functional>
#include <limits>

namespace kiln::kir::detail {
namespace {

using ir::Op;
using ir::ValueId;

ExprRef f64(double v) { return constant(Type::f64, v); }

// The identity of max (kMax) or min for a compute type.
ExprRef extreme_init(DType dt, bool max) {
    constexpr double inf = std::numeric_limits<double>::infinity();
    const Type t = compute_type(dt);
    switch (dt) {
    case DType::f32: case DType::f64: case DType::f16: case DType::bf16: return constant(t, max ? -inf : inf);
    case DType::i8: return int_const(t, max ? INT8_MIN : INT8_MAX);
    case DType::u8: return int_const(t, max ? 0 : UINT8_MAX);
    case DType::i32: return int_const(t, max ? INT32_MIN : INT32_MAX);
    case DType::i64: return int_const(t, max ? INT64_MIN : INT64_MAX);
    case DType::boolean: break;
    }
    throw Unsupported{"max/min of bool"};
}

class RowLowering {
public:
    explicit RowLowering(Lowering& l) : L(l) {
        for (ValueId v : L.group.nodes)
            if (passes::is_row_op(L.node(v))) row = v;
        if (row < 0) throw Unsupported{"the group has no row op"};
        for (ValueId v : L.group.nodes)
            if (v >= row) tail.push_back(v);
        x = L.node(row).inputs[0];
        n = L.node(x).type.dims.size();
        const Op op = L.node(row).op;
        const bool reduce = op == Op::sum || op == Op::mean || op == Op::max || op == Op::min;
        kept = n - (reduce ? L.node(row).attrs.ints("axes").size() : 1);
        L.k.extent = L.product(x, 0, kept);
        row_len = L.product(x, kept, n);
        if (compute_type(L.node(x).type.dtype) == Type::f32) st_ = Type::f32;
    }

    void run() {
        switch (L.node(row).op) {
        case Op::softmax:
        case Op::log_softmax: softmax(L.node(row).op == Op::log_softmax); break;
        case Op::layer_norm:
        case Op::rms_norm: norm(L.node(row).op == Op::rms_norm); break;
        default: reduction(); break;
        }
    }

private:
    Lowering& L;
    ValueId row = -1, x = -1;
    std::vector<ValueId> tail;  // the row op and its fused consumers
    std::size_t n = 0, kept = 0;
    ExprRef row_len;
    std::vector<StmtRef>& body() { return L.k.body; }
    // The type of row statistics of softmax and the norms: f32 rows compute in f32 (the
    // code vectorises at full width and exp stays in f32), f64 rows in f64. The interpreter
    // accumulates in f64; the results agree within the f32 tolerance.
    Type st_ = Type::f64;
    ExprRef sc(double v) const { return constant(st_, v); }

    int init_temp(Type t, ExprRef v) {
        const int id = L.new_temp(t);
        body().push_back(assign(id, std::move(v)));
        return id;
    }
    // Emits `for j in [0, row_len)` whose body `f` gets the phase and x (in the statistics
    // type unless `as_is`), the row element being visited.
    void pass(const std::function<void(Phase&, const ExprRef&)>& f, bool as_is = false) {
        const int j = L.new_var();
        Space sp = L.make_space(x, {0, kept}, {outer(), var(j)});
        std::vector<StmtRef> inner;
        Phase ph{&sp, &inner, {}};
        ExprRef xv = L.value(x, ph);
        if (!as_is) xv = cast(st_, xv);
        if (xv->kind != ExprKind::Temp && xv->kind != ExprKind::Load) {
            const int t = L.new_temp(xv->type);
            inner.push_back(assign(t, xv));
            xv = temp(t, xv->type);
        }
        f(ph, xv);
        body().push_back(loop(j, index_const(0), row_len, std::move(inner)));
    }
    // Makes y (a value of the row op, in the statistics type) the row op's result in `ph`
    // and stores outputs.
    void write(Phase& ph, const ExprRef& y) {
        const Type ct = compute_type(L.node(row).type.dtype);
        const int t = L.new_temp(ct);
        ph.out->push_back(assign(t, cast(ct, y)));
        L.special[row] = temp(t, ct);
        L.store_outputs(tail, ph);
    }

    void softmax(bool log) {
        const int mx = init_temp(st_, sc(-std::numeric_limits<double>::infinity()));
        const ExprRef m = temp(mx, st_);
        // mx = max(mx, v): a NaN propagates and makes the whole row NaN, as in the interpreter.
        pass([&](Phase& ph, const ExprRef& v) { ph.out->push_back(assign(mx, binary(BinaryOp::max, m, v))); });
        const int sum = init_temp(st_, sc(0.0));
        const ExprRef s = temp(sum, st_);
        pass([&](Phase& ph, const ExprRef& v) {
            ph.out->push_back(assign(sum, binary(BinaryOp::add, s, unary(UnaryOp::exp, binary(BinaryOp::sub, v, m)))));
        });
        ExprRef ls;
        if (log) ls = temp(init_temp(st_, unary(UnaryOp::log, s)), st_);
        pass([&](Phase& ph, const ExprRef& v) {
            ExprRef d = binary(BinaryOp::sub, v, m);
            write(ph, log ? binary(BinaryOp::sub, d, ls) : binary(BinaryOp::div, unary(UnaryOp::exp, d), s));
        });
    }

    void norm(bool rms) {
        const ExprRef count = cast(st_, row_len);
        const int sum = init_temp(st_, sc(0.0));
        const ExprRef s = temp(sum, st_);
        pass([&](Phase& ph, const ExprRef& v) {
            ph.out->push_back(assign(sum, binary(BinaryOp::add, s, rms ? binary(BinaryOp::mul, v, v) : v)));
        });
        ExprRef mean = sc(0.0), var;
        if (rms) {
            var = temp(init_temp(st_, binary(BinaryOp::div, s, count)), st_);
        } else {
            mean = temp(init_temp(st_, binary(BinaryOp::div, s, count)), st_);
            const int acc = init_temp(st_, sc(0.0));
            const ExprRef a = temp(acc, st_);
            pass([&](Phase& ph, const ExprRef& v) {
                const int c = L.new_temp(st_);
                ph.out->push_back(assign(c, binary(BinaryOp::sub, v, mean)));
                const ExprRef ce = temp(c, st_);
                ph.out->push_back(assign(acc, binary(BinaryOp::add, a, binary(BinaryOp::mul, ce, ce))));
            });
            var = temp(init_temp(st_, binary(BinaryOp::div, a, count)), st_);
        }
        const double eps = L.node(row).attrs.f("eps");
        const ExprRef inv = temp(
            init_temp(st_, binary(BinaryOp::div, sc(1.0), unary(UnaryOp::sqrt, binary(BinaryOp::add, var, sc(eps))))),
            st_);
        const auto& in = L.node(row).inputs;
        pass([&](Phase& ph, const ExprRef& v) {
            // ((v - mean) * inv) * gamma + beta, in the statistics type.
            ExprRef y = binary(BinaryOp::mul, binary(BinaryOp::mul, rms ? v : binary(BinaryOp::sub, v, mean), inv),
                               cast(st_, L.value(in[1], ph)));
            if (!rms) y = binary(BinaryOp::add, y, cast(st_, L.value(in[2], ph)));
            write(ph, y);
        });
    }

    void reduction() {
        const Op op = L.node(row).op;
        const DType dt = L.node(x).type.dtype;
        const bool is_float = kiln::is_floating(dt);
        const bool sum_like = op == Op::sum || op == Op::mean;
        const Type acc_t = sum_like ? (is_float ? Type::f64 : Type::i64) : compute_type(dt);
        const ExprRef init = sum_like ? (is_float ? f64(0.0) : int_const(Type::i64, 0)) : extreme_init(dt, op == Op::max);
        const int acc = init_temp(acc_t, init);
        const ExprRef a = temp(acc, acc_t);
        pass(
            [&](Phase& ph, const ExprRef& v) {
                ExprRef next = sum_like ? binary(BinaryOp::add, a, cast(acc_t, v))
                                        : binary(op == Op::max ? BinaryOp::max : BinaryOp::min, a, v);
                ph.out->push_back(assign(acc, next));
            },
            /*as_is=*/true);
        ExprRef result = a;
        if (op == Op::mean) result = binary(BinaryOp::div, a, cast(Type::f64, row_len));
        Space ws = L.make_space(row, {0}, {outer()});
        Phase ph{&ws, &body(), {}};
        write(ph, result);
    }
};

}  // namespace

void lower_row(Lowering& L) { RowLowering(L).run(); }

}  // namespace kiln::kir::detail
