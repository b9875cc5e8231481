// Lowering of row_reduction groups (see lower.h): a chain of softmax, log_softmax,
// layer_norm, rms_norm over the same rows, optionally ended by sum/mean/max/min over the
// last axis (or a lone sum/mean/max/min over trailing axes), with their fused producers
// (recomputed in every pass over the row) and consumers (applied in the write). An earlier
// row op's result is recomputed from its statistics in the later passes, never stored
// unless it is a group output. The statistics follow tiers/interp/norm.cpp and reduce.cpp
// step by step.
#include "src/kir/lower_ctx.h"
#include "src/support/check.h"

#include <algorithm>
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

// Lowers a row_reduction group: a chain of row ops r1, r2, ..., rk over the same rows (see
// fuse.h), each later one reading earlier ones through elementwise nodes of the row's shape.
//
// Requires: the group comes from passes::partition (its row ops have operands of one shape
// and keep the same leading dims; only the last may be a sum/mean/max/min).
// Ensures: one outer index per row. For each row op in order, its statistics passes run
// over the row (as for a lone row op); every row op but the last then gets a `special`
// that recomputes its result inline from its statistics in any later pass (the row is in
// cache, so later passes read the group inputs again instead of an intermediate buffer).
// The last row op's write pass (softmax/norms), or its accumulation pass (reductions),
// stores every group output of the row's shape once; a trailing reduction's result and its
// consumers are stored once per row after that pass.
class RowLowering {
public:
    explicit RowLowering(Lowering& l) : L(l) {
        for (ValueId v : L.group.nodes)
            if (passes::is_row_op(L.node(v))) rows.push_back(v);
        if (rows.empty()) throw Unsupported{"the group has no row op"};
        x0 = L.node(rows.front()).inputs[0];
        n = L.node(x0).type.dims.size();
        kept = kept_of(rows.front());
        for (std::size_t i = 1; i < rows.size(); ++i) {
            if (passes::is_row_reduction(L.node(rows[i - 1]))) throw Unsupported{"a reduction that is not last in a row chain"};
            if (L.node(L.node(rows[i]).inputs[0]).type.dims != L.node(x0).type.dims || kept_of(rows[i]) != kept)
                throw Unsupported{"the row ops of the group run over different rows"};
        }
        L.k.extent = L.product(x0, 0, kept);
        row_len = L.product(x0, kept, n);
        // Outputs that depend on a trailing reduction are stored per row, the others per element.
        std::vector<ValueId> dep;
        const ValueId last = rows.back();
        for (ValueId v : L.group.nodes) {
            bool d = passes::is_row_reduction(L.node(last)) && v == last;
            for (ValueId in : L.node(v).inputs) d = d || std::find(dep.begin(), dep.end(), in) != dep.end();
            if (d) dep.push_back(v);
            (d ? row_outs : elem_outs).push_back(v);
        }
    }

    void run() {
        for (std::size_t i = 0; i < rows.size(); ++i) {
            const ValueId r = rows[i];
            const bool last = i + 1 == rows.size();
            switch (L.node(r).op) {
            case Op::softmax:
            case Op::log_softmax: softmax(r, L.node(r).op == Op::log_softmax, last); break;
            case Op::layer_norm:
            case Op::rms_norm: norm(r, L.node(r).op == Op::rms_norm, last); break;
            default: reduction(r); break;
            }
        }
    }

private:
    // y(v, ph): the row op's result (in its statistics type) at the element whose operand
    // value (in the statistics type) is v.
    using ElementFn = std::function<ExprRef(const ExprRef& v, Phase& ph)>;

    Lowering& L;
    std::vector<ValueId> rows;  // the row ops, in order
    ValueId x0 = -1;            // the first row op's operand (every row op's operand has its shape)
    std::size_t n = 0, kept = 0;
    ExprRef row_len;
    std::vector<ValueId> elem_outs, row_outs;  // group nodes stored per element / per row
    std::vector<StmtRef>& body() { return L.k.body; }

    std::size_t kept_of(ValueId r) const {
        const ir::Node& nd = L.node(r);
        const std::size_t rank = L.node(nd.inputs[0]).type.dims.size();
        return rank - (passes::is_row_reduction(nd) ? passes::reduced_axes(nd) : 1);
    }
    // The type in which a row op's elements are transformed: f32 rows (half types included)
    // in f32, so that the code vectorises at full width and exp stays in f32; f64 rows in
    // f64. softmax and log_softmax also take their statistics in it (subtracting the row max
    // keeps every step finite where the interpreter's f64 result is); the norms take theirs
    // in f64 (see norm()).
    Type st_of(ValueId r) const {
        return compute_type(L.node(L.node(r).inputs[0]).type.dtype) == Type::f32 ? Type::f32 : Type::f64;
    }

    int init_temp(Type t, ExprRef v) {
        const int id = L.new_temp(t);
        body().push_back(assign(id, std::move(v)));
        return id;
    }
    // Emits `for j in [0, row_len)` over the operand x of a row op, whose body `f` gets the
    // phase and x's element (in `st` unless `as_is`).
    void pass(ValueId x, Type st, const std::function<void(Phase&, const ExprRef&)>& f, bool as_is = false) {
        row_loop(x, [&](Phase& ph) {
            ExprRef xv = L.value(x, ph);
            if (!as_is) xv = cast(st, xv);
            if (xv->kind != ExprKind::Temp && xv->kind != ExprKind::Load) {
                const int t = L.new_temp(xv->type);
                ph.out->push_back(assign(t, xv));
                xv = temp(t, xv->type);
            }
            f(ph, xv);
        });
    }
    // Emits `for j in [0, row_len)` over the elements of a row of x's shape; `f` gets the phase.
    void row_loop(ValueId x, const std::function<void(Phase&)>& f) {
        const int j = L.new_var();
        Space sp = L.make_space(x, {0, kept}, {outer(), var(j)});
        std::vector<StmtRef> inner;
        Phase ph{&sp, &inner, {}};
        f(ph);
        body().push_back(loop(j, index_const(0), row_len, std::move(inner)));
    }
    // Makes y (a value of row op r, in its statistics type) r's result in `ph` and stores
    // the group outputs in `outs`.
    void write(ValueId r, Phase& ph, const ExprRef& y, const std::vector<ValueId>& outs) {
        const Type ct = compute_type(L.node(r).type.dtype);
        const int t = L.new_temp(ct);
        ph.out->push_back(assign(t, cast(ct, y)));
        const ExprRef e = temp(t, ct);
        L.special[r] = [e](Phase&) { return e; };
        L.store_outputs(outs, ph);
    }
    // After r's statistics: the last row op writes in one more pass; an earlier one becomes
    // a function of the phase, recomputed in the passes of the row ops that follow it.
    void finish(ValueId r, bool last, const ElementFn& y) {
        const ValueId x = L.node(r).inputs[0];
        const Type st = st_of(r);
        if (last) {
            pass(x, st, [&](Phase& ph, const ExprRef& v) { write(r, ph, y(v, ph), elem_outs); });
            return;
        }
        const Type ct = compute_type(L.node(r).type.dtype);
        L.special[r] = [lw = &L, x, st, ct, y](Phase& ph) {
            const int t = lw->new_temp(ct);
            ph.out->push_back(assign(t, cast(ct, y(cast(st, lw->value(x, ph)), ph))));
            return temp(t, ct);
        };
    }

    // The next running max of a softmax row: v > m ? v : m, which skips a NaN v where KIR's
    // `max` would propagate it, and compiles to a plain max (NaN-propagating max needs
    // fix-ups on x86). The results are the same: a NaN element gives exp(NaN - m) = NaN,
    // so the sum and every output of its row are NaN whatever m is (as the interpreter,
    // which propagates it); +inf and all -inf rows get the same m either way. m starts at
    // -inf, so it is never NaN.
    static ExprRef row_max(const ExprRef& m, const ExprRef& v) { return select(binary(BinaryOp::gt, v, m), v, m); }

    void softmax(ValueId r, bool log, bool last) {
        const ValueId x = L.node(r).inputs[0];
        const Type st = st_of(r);
        const int ob = L.output_buffer(r);
        const DType odt = L.node(r).type.dtype;
        if (last && !log && ob >= 0 && (odt == DType::f32 || odt == DType::f64) && compute_type(odt) == st) {
            softmax_in_place(r, st, ob);
            return;
        }
        auto sc = [st](double v) { return constant(st, v); };
        const int mx = init_temp(st, sc(-std::numeric_limits<double>::infinity()));
        const ExprRef m = temp(mx, st);
        pass(x, st, [&](Phase& ph, const ExprRef& v) { ph.out->push_back(assign(mx, row_max(m, v))); });
        const int sum = init_temp(st, sc(0.0));
        const ExprRef s = temp(sum, st);
        pass(x, st, [&](Phase& ph, const ExprRef& v) {
            ph.out->push_back(assign(sum, binary(BinaryOp::add, s, unary(UnaryOp::exp, binary(BinaryOp::sub, v, m)))));
        });
        ExprRef ls;
        if (log) ls = temp(init_temp(st, unary(UnaryOp::log, s)), st);
        finish(r, last, [log, m, s, ls](const ExprRef& v, Phase&) {
            ExprRef d = binary(BinaryOp::sub, v, m);
            return log ? binary(BinaryOp::sub, d, ls) : binary(BinaryOp::div, unary(UnaryOp::exp, d), s);
        });
    }

    // The last softmax of a group, stored in its statistics type: its output row doubles as
    // scratch. The first pass stores the operand and takes the max, the second replaces each
    // element by exp(v - max) and sums, the write scales by 1/sum. exp runs once per element
    // (not twice) and an earlier row op's result is recomputed once (not three times).
    void softmax_in_place(ValueId r, Type st, int ob) {
        const ValueId x = L.node(r).inputs[0];
        const int mx = init_temp(st, constant(st, -std::numeric_limits<double>::infinity()));
        const ExprRef m = temp(mx, st);
        pass(x, st, [&](Phase& ph, const ExprRef& v) {
            ph.out->push_back(store(ob, L.offset(r, *ph.space), v));
            ph.out->push_back(assign(mx, row_max(m, v)));
        });
        const int sum = init_temp(st, constant(st, 0.0));
        const ExprRef s = temp(sum, st);
        row_loop(x, [&](Phase& ph) {
            const ExprRef off = L.offset(r, *ph.space);
            const int e = L.new_temp(st);
            ph.out->push_back(assign(e, unary(UnaryOp::exp, binary(BinaryOp::sub, load(ob, st, off), m))));
            ph.out->push_back(store(ob, off, temp(e, st)));
            ph.out->push_back(assign(sum, binary(BinaryOp::add, s, temp(e, st))));
        });
        const ExprRef inv = temp(init_temp(st, binary(BinaryOp::div, constant(st, 1.0), s)), st);
        row_loop(x, [&](Phase& ph) {
            write(r, ph, binary(BinaryOp::mul, load(ob, st, L.offset(r, *ph.space)), inv), elem_outs);
        });
    }

    // layer_norm and rms_norm, as exact as the interpreter's f64 arithmetic where its result
    // is finite, with every per-element step in the row's type (f32: full vector width on
    // both tiers). In plain f32, the square of an element above 1.8e19, the sum of a row of
    // values near 3e38 and x - mean of mixed signs near 3e38 overflow (the row came out as
    // beta, or NaN), and a mean rounded to f32 loses the deviations of a row whose mean is
    // large against them. So, per row:
    // - f32 rows first take max|x| and a scale s, a power of two (exact): 2^-80 when
    //   max|x| > 2^40, 2^64 when it is below 2^-40, else 1; x*s then has sums and squares
    //   far from overflow and underflow (f64 rows: s = 1, as the interpreter);
    // - the mean of x*s in two steps: m1 = sum(x*s)/n, then the deviations d = x*s - m1
    //   give mean = m1 + sum(d)/n and var = sum(d^2)/n - (sum(d)/n)^2 (the corrected
    //   two-pass algorithm: accurate to the row's deviation, not to its mean); rms_norm
    //   takes mean(x*s)^2 alone;
    // - the per-row constants in f64: the mean split into hi + lo (hi the nearest value of
    //   the row's type, lo the rest), so that (x*s - hi) - lo keeps the accuracy of
    //   x - mean where they nearly cancel, and c = 1/(sqrt(var/s^2 + eps) * s).
    // y = ((x*s - hi) - lo) * c * gamma + beta (rms_norm: x*s * c * gamma).
    void norm(ValueId r, bool rms, bool last) {
        const ValueId x = L.node(r).inputs[0];
        const Type st = st_of(r);
        auto sc = [st](double v) { return constant(st, v); };
        auto row_const = [&](Type t, ExprRef e) { return temp(init_temp(t, std::move(e)), t); };
        const bool scaled = st == Type::f32;
        ExprRef s = sc(1.0);
        if (scaled) {
            const int mx = init_temp(st, sc(0.0));
            const ExprRef m = temp(mx, st);
            pass(x, st, [&](Phase& ph, const ExprRef& v) {
                ph.out->push_back(assign(mx, row_max(m, unary(UnaryOp::abs, v))));
            });
            s = row_const(st, select(binary(BinaryOp::gt, m, sc(0x1p40)), sc(0x1p-80),
                                     select(binary(BinaryOp::lt, m, sc(0x1p-40)), sc(0x1p64), sc(1.0))));
        }
        // x*s (f64 rows: x itself, no multiply by 1 on the element path).
        auto xs = [s, scaled](const ExprRef& v) { return scaled ? binary(BinaryOp::mul, v, s) : v; };
        const ExprRef count = cast(st, row_len), n64 = cast(Type::f64, row_len);
        const int sum = init_temp(st, sc(0.0));
        const ExprRef s1 = temp(sum, st);
        pass(x, st, [&](Phase& ph, const ExprRef& v) {
            ExprRef e = xs(v);
            if (rms) {
                const int t = L.new_temp(st);
                ph.out->push_back(assign(t, e));
                e = binary(BinaryOp::mul, temp(t, st), temp(t, st));
            }
            ph.out->push_back(assign(sum, binary(BinaryOp::add, s1, e)));
        });
        auto wide = [](const ExprRef& e) { return cast(Type::f64, e); };
        ExprRef mean = f64(0.0), var;
        if (rms) {
            var = binary(BinaryOp::div, wide(s1), n64);
        } else {
            const ExprRef m1 = row_const(st, binary(BinaryOp::div, s1, count));
            const int dsum = init_temp(st, sc(0.0)), dsq = init_temp(st, sc(0.0));
            const ExprRef ds = temp(dsum, st), dq = temp(dsq, st);
            pass(x, st, [&](Phase& ph, const ExprRef& v) {
                const int c = L.new_temp(st);
                ph.out->push_back(assign(c, binary(BinaryOp::sub, xs(v), m1)));
                const ExprRef ce = temp(c, st);
                ph.out->push_back(assign(dsum, binary(BinaryOp::add, ds, ce)));
                ph.out->push_back(assign(dsq, binary(BinaryOp::add, dq, binary(BinaryOp::mul, ce, ce))));
            });
            const ExprRef corr = row_const(Type::f64, binary(BinaryOp::div, wide(ds), n64));
            mean = binary(BinaryOp::add, wide(m1), corr);
            var = binary(BinaryOp::max, f64(0.0),
                         binary(BinaryOp::sub, binary(BinaryOp::div, wide(dq), n64), binary(BinaryOp::mul, corr, corr)));
        }
        // Still in units of x*s: var/s^2 + eps below is in units of x.
        const ExprRef s64 = row_const(Type::f64, wide(s));
        const double eps = L.node(r).attrs.f("eps");
        const ExprRef dev = row_const(
            Type::f64, unary(UnaryOp::sqrt, binary(BinaryOp::add, binary(BinaryOp::div, var, binary(BinaryOp::mul, s64, s64)),
                                                   f64(eps))));
        const ExprRef c = row_const(st, cast(st, binary(BinaryOp::div, f64(1.0), binary(BinaryOp::mul, dev, s64))));
        const ExprRef mean64 = row_const(Type::f64, mean);
        const ExprRef hi = row_const(st, cast(st, mean64));
        const ExprRef lo = row_const(st, cast(st, binary(BinaryOp::sub, mean64, wide(hi))));
        const ValueId gamma = L.node(r).inputs[1];
        const ValueId beta = rms ? -1 : L.node(r).inputs[2];
        finish(r, last, [lw = &L, rms, hi, lo, xs, c, st, gamma, beta](const ExprRef& v, Phase& ph) {
            ExprRef d = xs(v);
            if (!rms) d = binary(BinaryOp::sub, binary(BinaryOp::sub, d, hi), lo);
            ExprRef y = binary(BinaryOp::mul, binary(BinaryOp::mul, d, c), cast(st, lw->value(gamma, ph)));
            if (!rms) y = binary(BinaryOp::add, y, cast(st, lw->value(beta, ph)));
            return y;
        });
    }

    // Always the last row op of its group.
    void reduction(ValueId r) {
        const Op op = L.node(r).op;
        const ValueId x = L.node(r).inputs[0];
        const DType dt = L.node(x).type.dtype;
        const bool is_float = kiln::is_floating(dt);
        const bool sum_like = op == Op::sum || passes::is_mean_like(L.node(r));
        const Type acc_t = sum_like ? (is_float ? Type::f64 : Type::i64) : compute_type(dt);
        const ExprRef init = sum_like ? (is_float ? f64(0.0) : int_const(Type::i64, 0)) : extreme_init(dt, op == Op::max);
        const int acc = init_temp(acc_t, init);
        const ExprRef a = temp(acc, acc_t);
        pass(
            x, Type::f64,
            [&](Phase& ph, const ExprRef& v) {
                ExprRef next = sum_like ? binary(BinaryOp::add, a, cast(acc_t, v))
                                        : binary(op == Op::max ? BinaryOp::max : BinaryOp::min, a, v);
                ph.out->push_back(assign(acc, next));
                L.store_outputs(elem_outs, ph);  // earlier row ops' outputs of the row's shape
            },
            /*as_is=*/true);
        ExprRef result = a;
        if (passes::is_mean_like(L.node(r))) result = binary(BinaryOp::div, a, cast(Type::f64, row_len));
        Space ws = L.make_space(r, {0}, {outer()});
        Phase ph{&ws, &body(), {}};
        write(r, ph, result, row_outs);
    }
};

}  // namespace

void lower_row(Lowering& L) { RowLowering(L).run(); }

}  // namespace kiln::kir::detail
