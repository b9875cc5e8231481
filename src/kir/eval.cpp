// The KIR evaluator (see eval.h). Every scalar is held as a Val: floating types in `f`
// (already rounded to the type), everything else in `i` (already wrapped to the type);
// each operation converts to the C++ type of its KIR type, computes there with the
// interpreter's formulas (src/core/scalar_ops.h), and converts back.
#include "src/kir/eval.h"

#include "src/core/element.h"
#include "src/core/scalar_ops.h"
#include "src/support/check.h"

#include <type_traits>
#include <vector>

namespace kiln::kir {
namespace {

using I64 = std::int64_t;

struct Val {
    double f = 0.0;
    I64 i = 0;
};

// Calls f(C{}) with the C++ type of a KIR type (index: int64_t).
template <class F> decltype(auto) with_type(Type t, F&& f) {
    switch (t) {
    case Type::f32: return f(float{});
    case Type::f64: return f(double{});
    case Type::i8: return f(std::int8_t{});
    case Type::u8: return f(std::uint8_t{});
    case Type::i32: return f(std::int32_t{});
    case Type::i64:
    case Type::index: return f(I64{});
    case Type::boolean: return f(bool{});
    }
    return f(float{});
}

template <class C> C get(const Val& v) {
    if constexpr (std::is_floating_point_v<C>) return static_cast<C>(v.f);
    else if constexpr (std::is_same_v<C, bool>) return v.i != 0;
    else return static_cast<C>(v.i);
}
template <class C> Val put(C c) {
    Val v;
    if constexpr (std::is_floating_point_v<C>) v.f = static_cast<double>(c);
    else v.i = static_cast<I64>(c);
    return v;
}

namespace scalar = core::scalar;

template <class C> C float_unary(UnaryOp op, C v) {
    switch (op) {
    case UnaryOp::neg: return scalar::neg(v);
    case UnaryOp::abs: return scalar::abs(v);
    case UnaryOp::exp: return scalar::exp(v);
    case UnaryOp::log: return scalar::log(v);
    case UnaryOp::sqrt: return scalar::sqrt(v);
    case UnaryOp::rsqrt: return scalar::rsqrt(v);
    case UnaryOp::reciprocal: return scalar::reciprocal(v);
    case UnaryOp::sin: return scalar::sin(v);
    case UnaryOp::cos: return scalar::cos(v);
    case UnaryOp::tanh: return scalar::tanh(v);
    case UnaryOp::sigmoid: return scalar::sigmoid(v);
    case UnaryOp::relu: return scalar::relu(v);
    case UnaryOp::gelu_erf: return scalar::gelu_erf(v);
    case UnaryOp::gelu_tanh: return scalar::gelu_tanh(v);
    case UnaryOp::silu: return scalar::silu(v);
    case UnaryOp::erf: return scalar::erf(v);
    case UnaryOp::floor: return scalar::floor(v);
    case UnaryOp::ceil: return scalar::ceil(v);
    case UnaryOp::round: return scalar::round(v);
    case UnaryOp::sign: return scalar::sign(v);
    case UnaryOp::logical_not: break;
    }
    KILN_UNREACHABLE("kir::evaluate: " << op_name(op) << " on a floating value");
}

template <class C> C int_unary(UnaryOp op, C v) {
    switch (op) {
    case UnaryOp::neg: return scalar::neg(v);
    case UnaryOp::abs: return scalar::abs(v);
    case UnaryOp::relu: return scalar::relu(v);
    case UnaryOp::sign: return scalar::sign(v);
    default: break;
    }
    KILN_UNREACHABLE("kir::evaluate: " << op_name(op) << " on an integer value");
}

template <class C> Val compare(BinaryOp op, C x, C y) {
    switch (op) {
    case BinaryOp::eq: return put<bool>(scalar::eq(x, y));
    case BinaryOp::ne: return put<bool>(scalar::ne(x, y));
    case BinaryOp::lt: return put<bool>(scalar::lt(x, y));
    case BinaryOp::le: return put<bool>(scalar::le(x, y));
    case BinaryOp::gt: return put<bool>(scalar::gt(x, y));
    case BinaryOp::ge: return put<bool>(scalar::ge(x, y));
    default: break;
    }
    KILN_UNREACHABLE("kir::evaluate: " << op_name(op) << " is not a comparison");
}

template <class C> Val arith(BinaryOp op, C x, C y) {
    if constexpr (std::is_same_v<C, bool>) {
        if (op == BinaryOp::logical_and) return put<bool>(x && y);
        if (op == BinaryOp::logical_or) return put<bool>(x || y);
        return compare(op, x, y);
    } else if constexpr (std::is_floating_point_v<C>) {
        switch (op) {
        case BinaryOp::add: return put<C>(scalar::add(x, y));
        case BinaryOp::sub: return put<C>(scalar::sub(x, y));
        case BinaryOp::mul: return put<C>(scalar::mul(x, y));
        case BinaryOp::div: return put<C>(scalar::div(x, y));
        case BinaryOp::pow: return put<C>(scalar::pow(x, y));
        case BinaryOp::max: return put<C>(scalar::maximum(x, y));
        case BinaryOp::min: return put<C>(scalar::minimum(x, y));
        default: return compare(op, x, y);
        }
    } else {
        switch (op) {
        case BinaryOp::add: return put<C>(scalar::add(x, y));
        case BinaryOp::sub: return put<C>(scalar::sub(x, y));
        case BinaryOp::mul: return put<C>(scalar::mul(x, y));
        case BinaryOp::div: return put<C>(scalar::div(x, y));
        case BinaryOp::max: return put<C>(scalar::maximum(x, y));
        case BinaryOp::min: return put<C>(scalar::minimum(x, y));
        case BinaryOp::pow:
        case BinaryOp::logical_and:
        case BinaryOp::logical_or: KILN_UNREACHABLE("kir::evaluate: " << op_name(op) << " on integers");
        default: return compare(op, x, y);
        }
    }
}

class Machine {
public:
    Machine(const Kernel& k, void* const* buffers, const I64* params)
        : k_(k), buffers_(buffers), params_(params), vars_(static_cast<std::size_t>(k.num_vars), 0),
          temps_(k.temps.size()) {}

    void run(I64 outer) {
        outer_ = outer;
        exec(k_.body);
    }

private:
    const Kernel& k_;
    void* const* buffers_;
    const I64* params_;
    I64 outer_ = 0;
    std::vector<I64> vars_;
    std::vector<Val> temps_;

    void exec(const std::vector<StmtRef>& stmts) {
        for (const StmtRef& s : stmts) {
            switch (s->kind) {
            case StmtKind::Loop: {
                const I64 b = eval(*s->begin).i, e = eval(*s->end).i;
                for (I64 v = b; v < e; ++v) {
                    vars_[static_cast<std::size_t>(s->var)] = v;
                    exec(s->body);
                }
                break;
            }
            case StmtKind::Store: store(s->buffer, eval(*s->index).i, eval(*s->value), s->value->type); break;
            case StmtKind::Assign: temps_[static_cast<std::size_t>(s->var)] = eval(*s->value); break;
            }
        }
    }

    Val load(int buffer, I64 index) const {
        const DType dt = k_.buffers[static_cast<std::size_t>(buffer)].dtype;
        const void* base = buffers_[buffer];
        if (dt == DType::boolean) return put<bool>(static_cast<const std::uint8_t*>(base)[index] != 0);
        return core::dispatch(dt, [&](auto tag) -> Val {
            using S = decltype(tag);
            const S s = static_cast<const S*>(base)[index];
            if constexpr (core::is_half_v<S>) return put<float>(static_cast<float>(s));
            else return put<S>(s);
        });
    }

    void store(int buffer, I64 index, const Val& v, Type vt) {
        const DType dt = k_.buffers[static_cast<std::size_t>(buffer)].dtype;
        void* base = buffers_[buffer];
        KILN_CHECK(vt == compute_type(dt), "kir::evaluate: store of " << type_name(vt) << " into " << dt);
        core::dispatch(dt, [&](auto tag) {
            using S = decltype(tag);
            if constexpr (core::is_half_v<S>) static_cast<S*>(base)[index] = S(get<float>(v));
            else static_cast<S*>(base)[index] = get<S>(v);
        });
    }

    Val eval(const Expr& e) {
        switch (e.kind) {
        case ExprKind::Const:
            return with_type(e.type, [&](auto tag) {
                using C = decltype(tag);
                if constexpr (std::is_floating_point_v<C>) return put<C>(static_cast<C>(e.f));
                else if constexpr (std::is_same_v<C, bool>) return put<bool>(e.i != 0);
                else return put<C>(static_cast<C>(e.i));
            });
        case ExprKind::Param: return put<I64>(params_[e.id]);
        case ExprKind::Outer: return put<I64>(outer_);
        case ExprKind::Var: return put<I64>(vars_[static_cast<std::size_t>(e.id)]);
        case ExprKind::Temp: return temps_[static_cast<std::size_t>(e.id)];
        case ExprKind::Load: return load(e.id, eval(*e.args[0]).i);
        case ExprKind::Unary: {
            const Val a = eval(*e.args[0]);
            return with_type(e.type, [&](auto tag) {
                using C = decltype(tag);
                if constexpr (std::is_same_v<C, bool>) {
                    KILN_CHECK(e.uop == UnaryOp::logical_not, "kir::evaluate: " << op_name(e.uop) << " on bool");
                    return put<bool>(scalar::logical_not(get<bool>(a)));
                } else if constexpr (std::is_floating_point_v<C>) {
                    return put<C>(float_unary(e.uop, get<C>(a)));
                } else {
                    return put<C>(int_unary(e.uop, get<C>(a)));
                }
            });
        }
        case ExprKind::Binary: {
            const Val a = eval(*e.args[0]), b = eval(*e.args[1]);
            return with_type(e.args[0]->type, [&](auto tag) {
                using C = decltype(tag);
                return arith<C>(e.bop, get<C>(a), get<C>(b));
            });
        }
        case ExprKind::Select: return get<bool>(eval(*e.args[0])) ? eval(*e.args[1]) : eval(*e.args[2]);
        case ExprKind::Cast: {
            const Val a = eval(*e.args[0]);
            return with_type(e.args[0]->type, [&](auto from) {
                using F = decltype(from);
                return with_type(e.type, [&](auto to) {
                    using T = decltype(to);
                    return put<T>(core::convert<T>(get<F>(a)));
                });
            });
        }
        }
        KILN_UNREACHABLE("kir::evaluate: bad expression kind");
    }
};

}  // namespace

void evaluate(const Kernel& k, void* const* buffers, const std::int64_t* params, std::int64_t begin, std::int64_t end) {
    Machine m(k, buffers, params);
    for (I64 o = begin; o < end; ++o) m.run(o);
}

}  // namespace kiln::kir
