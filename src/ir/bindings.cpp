#include "src/ir/bindings.h"

#include "src/support/check.h"
#include "src/support/checked.h"

namespace kiln::ir {
namespace {
// a * b, the values of dims in `dims`; kiln::Error naming them on overflow.
template <class Dims> std::int64_t mul(std::int64_t a, std::int64_t b, const Dims& dims) {
    std::int64_t r = 0;
    if (!support::mul_fits(a, b, &r)) KILN_USER_ERROR("dims " << dims << ": " << a << " * " << b << " overflows int64");
    return r;
}
template <class Dims> std::int64_t add(std::int64_t a, std::int64_t b, const Dims& dims) {
    std::int64_t r = 0;
    if (!support::add_fits(a, b, &r)) KILN_USER_ERROR("dims " << dims << ": " << a << " + " << b << " overflows int64");
    return r;
}
}  // namespace

std::optional<std::int64_t> Bindings::get(const std::string& symbol) const {
    for (const auto& [n, v] : items_)
        if (n == symbol) return v;
    return std::nullopt;
}

void Bindings::bind(const std::string& symbol, std::int64_t value) {
    for (auto& [n, v] : items_)
        if (n == symbol) {
            v = value;
            return;
        }
    items_.emplace_back(symbol, value);
}

std::optional<std::int64_t> Bindings::eval(const Dim& d) const {
    std::int64_t v = d.constant();
    for (const Dim::Term& t : d.terms()) {
        std::int64_t p = t.coeff;
        for (const auto& s : t.symbols) {
            auto b = get(s);
            if (!b) return std::nullopt;
            p = mul(p, *b, d);
        }
        v = add(v, p, d);
    }
    return v;
}

// Solves d = value for d's one unbound symbol when it appears once, in one term:
// value = rest + k * s. Returns false when d is not of that form or s is no size.
bool Bindings::solve(const Dim& d, std::int64_t value) {
    const std::string* unbound = nullptr;
    std::int64_t rest = d.constant(), k = 0;
    for (const Dim::Term& t : d.terms()) {
        std::int64_t p = t.coeff;
        const std::string* here = nullptr;
        for (const auto& s : t.symbols) {
            if (auto b = get(s)) {
                p = mul(p, *b, d);
            } else {
                if (here != nullptr || unbound != nullptr) return false;  // a second unbound occurrence
                here = &s;
            }
        }
        if (here != nullptr) {
            unbound = here;
            k = p;
        } else {
            rest = add(rest, p, d);
        }
    }
    std::int64_t diff = 0;
    if (unbound == nullptr || k == 0 || __builtin_sub_overflow(value, rest, &diff) || diff % k != 0 || diff / k < 0)
        return false;
    bind(*unbound, diff / k);
    return true;
}

bool Bindings::unify(const std::vector<Dim>& dims, const Shape& shape, std::string* why) {
    if (dims.size() != shape.size()) {
        if (why) *why = "rank " + std::to_string(shape.size()) + ", expected " + std::to_string(dims.size());
        return false;
    }
    for (std::size_t i = 0; i < dims.size(); ++i) {
        const Dim& d = dims[i];
        if (d.is_symbol() && !get(d.symbols()[0])) {
            bind(d.symbols()[0], shape[i]);
            continue;
        }
        auto v = eval(d);
        if (!v) {  // an unbound symbol: bind it when the dim can be solved for it
            if (solve(d, shape[i])) continue;
            if (why) *why = "dim " + std::to_string(i) + " (" + d.to_string() + ") cannot be solved from " + std::to_string(shape[i]);
            return false;
        }
        if (*v != shape[i]) {
            if (why) *why = "dim " + std::to_string(i) + " is " + std::to_string(shape[i]) + ", expected " + d.to_string() + " = " + std::to_string(*v);
            return false;
        }
    }
    return true;
}

Shape concrete_target(const Node& node, Bindings& b, std::int64_t numel) {
    const std::vector<Dim>& dims = node.attrs.dims("shape");
    Shape out(dims.size(), 0);
    int unknown = -1;
    std::int64_t known = 1;
    for (std::size_t i = 0; i < dims.size(); ++i) {
        if (auto v = b.eval(dims[i])) {
            out[i] = *v;
            known = mul(known, *v, dims_to_string(dims));
            continue;
        }
        KILN_USER_CHECK(node.op == Op::reshape && unknown < 0,
                        op_name(node.op) << ": the target dims " << dims_to_string(dims) << " have unbound symbols");
        unknown = static_cast<int>(i);
    }
    if (unknown >= 0) {
        const Dim& d = dims[static_cast<std::size_t>(unknown)];
        KILN_USER_CHECK(known != 0 && numel % known == 0,
                        "reshape: cannot infer dim " << unknown << " of " << dims_to_string(dims) << " for " << numel
                                                     << " elements");
        out[static_cast<std::size_t>(unknown)] = numel / known;
        std::string why;
        std::vector<Dim> one{d};
        KILN_USER_CHECK(b.unify(one, {numel / known}, &why), "reshape: " << why);
    }
    return out;
}

}  // namespace kiln::ir
