// structurally_equal and structural_hash (declared in ir.h). Both ignore the graph's name,
// so graphs that differ only in name share compiled code; they cover ops, operands,
// attributes (name, kind, value; floats bitwise), types, the input and output lists and
// constant values (dtype, shape, bytes). Equal graphs hash equal.
#include "src/ir/ir.h"

#include "src/support/hash.h"

#include <bit>
#include <cstring>
#include <type_traits>

namespace kiln::ir {
namespace {

using support::Hasher;

// A fast hash of bulk constant bytes: four independent word lanes, then the Hasher.
std::uint64_t hash_bytes(const unsigned char* p, std::size_t n) {
    std::uint64_t lane[4] = {0x9e3779b97f4a7c15ULL, 0xc2b2ae3d27d4eb4fULL, 0x165667b19e3779f9ULL,
                             0x27d4eb2f165667c5ULL};
    std::size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        for (int k = 0; k < 4; ++k) {
            std::uint64_t w;
            std::memcpy(&w, p + i + 8 * k, 8);
            lane[k] = (lane[k] ^ w) * 0xff51afd7ed558ccdULL;
            lane[k] ^= lane[k] >> 29;
        }
    }
    Hasher h;
    h.u64(n);
    for (std::uint64_t l : lane) h.u64(l);
    h.bytes(p + i, n - i);
    return h.digest();
}

void hash_dim(Hasher& h, const Dim& d) {
    h.i64(d.constant()).u64(d.terms().size());
    for (const Dim::Term& t : d.terms()) {
        h.i64(t.coeff).u64(t.symbols.size());
        for (const std::string& s : t.symbols) h.str(s);
    }
}

void hash_dims(Hasher& h, const std::vector<Dim>& dims) {
    h.u64(dims.size());
    for (const Dim& d : dims) hash_dim(h, d);
}

void hash_value(Hasher& h, const AttrValue& v) {
    h.u64(v.index());
    std::visit(
        [&h](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::int64_t>) {
                h.i64(x);
            } else if constexpr (std::is_same_v<T, double>) {
                h.u64(std::bit_cast<std::uint64_t>(x));
            } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
                h.u64(x.size());
                for (std::int64_t e : x) h.i64(e);
            } else if constexpr (std::is_same_v<T, std::vector<Dim>>) {
                hash_dims(h, x);
            } else if constexpr (std::is_same_v<T, DType>) {
                h.u64(static_cast<std::uint64_t>(x));
            } else {
                h.str(x);
            }
        },
        v);
}

bool same_value(const AttrValue& a, const AttrValue& b) {
    if (a.index() != b.index()) return false;
    if (const double* x = std::get_if<double>(&a))
        return std::bit_cast<std::uint64_t>(*x) == std::bit_cast<std::uint64_t>(std::get<double>(b));
    return a == b;
}

bool same_attrs(const Attrs& a, const Attrs& b) {
    const auto &x = a.items(), &y = b.items();
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i)
        if (x[i].first != y[i].first || !same_value(x[i].second, y[i].second)) return false;
    return true;
}

std::size_t byte_size(const Tensor& t) { return static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()); }

bool same_tensor(const Tensor& a, const Tensor& b) {
    if (a.defined() != b.defined()) return false;
    if (!a.defined()) return true;
    if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
    if (a.shares_storage(b) && a.offset() == b.offset() && a.strides() == b.strides()) return true;
    Tensor ca = a.contiguous(), cb = b.contiguous();
    std::size_t n = byte_size(ca);
    return n == 0 || std::memcmp(ca.data(), cb.data(), n) == 0;
}

void hash_tensor(Hasher& h, const Tensor& t) {
    h.u64(t.defined() ? 1 : 0);
    if (!t.defined()) return;
    h.u64(static_cast<std::uint64_t>(t.dtype())).u64(t.shape().size());
    for (std::int64_t s : t.shape()) h.i64(s);
    Tensor c = t.contiguous();
    std::size_t n = byte_size(c);
    h.u64(n == 0 ? 0 : hash_bytes(static_cast<const unsigned char*>(c.data()), n));
}

}  // namespace

bool structurally_equal(const Graph& a, const Graph& b) {
    if (a.nodes.size() != b.nodes.size() || a.inputs != b.inputs || a.outputs != b.outputs) return false;
    for (std::size_t i = 0; i < a.nodes.size(); ++i) {
        const Node &x = a.nodes[i], &y = b.nodes[i];
        if (x.op != y.op || x.inputs != y.inputs || x.type != y.type || !same_attrs(x.attrs, y.attrs) ||
            !same_tensor(x.value, y.value))
            return false;
    }
    return true;
}

std::uint64_t structural_hash(const Graph& g) {
    Hasher h;
    h.u64(g.nodes.size());
    for (const Node& n : g.nodes) {
        h.u64(static_cast<std::uint64_t>(n.op)).u64(n.inputs.size());
        for (ValueId v : n.inputs) h.i64(v);
        h.u64(n.attrs.items().size());
        for (const auto& [name, value] : n.attrs.items()) {
            h.str(name);
            hash_value(h, value);
        }
        h.u64(static_cast<std::uint64_t>(n.type.dtype));
        hash_dims(h, n.type.dims);
        hash_tensor(h, n.value);
    }
    h.u64(g.inputs.size());
    for (ValueId v : g.inputs) h.i64(v);
    h.u64(g.outputs.size());
    for (ValueId v : g.outputs) h.i64(v);
    return h.digest();
}

}  // namespace kiln::ir
