#pragma once
// kiln::Dim: one dimension of a traced tensor: a static size, or a polynomial with integer
// coefficients in named symbolic sizes (`?batch`, `?B*?S`, `4*?S`, `?past+?seq`, `?n-1`).
// Products keep symbolic sizes through reshape ([?B, ?S, 4, 16] -> [?B, ?S, 64]); sums keep
// them through concatenation (a KV cache of ?past rows plus ?seq new ones has ?past+?seq).
// The form is canonical: equal polynomials compare equal and print the same.
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

class Dim {
public:
    // coeff * (product of symbols); `symbols` sorted, may repeat, never empty.
    struct Term {
        std::int64_t coeff = 0;
        std::vector<std::string> symbols;
        friend bool operator==(const Term&, const Term&) = default;
    };

    Dim() = default;                                   // the static size 0
    Dim(std::int64_t value) : const_(value) {}         // NOLINT: implicit on purpose
    Dim(int value) : const_(value) {}                  // NOLINT
    static Dim symbol(std::string name);               // coefficient 1, one symbol

    bool is_static() const { return terms_.empty(); }
    bool is_symbol() const;                            // exactly `?name`
    // A static size, or c * ?a * ?b ... without a constant part.
    bool is_monomial() const { return terms_.empty() || (terms_.size() == 1 && const_ == 0); }
    std::int64_t value() const;                        // the static size; throws if symbolic
    // For a monomial only (checked): its coefficient (a static dim's value) and its symbols.
    std::int64_t coeff() const;
    const std::vector<std::string>& symbols() const;
    // Any dim: the constant part, the symbolic terms (sorted by symbols) and every symbol once.
    std::int64_t constant() const { return const_; }
    const std::vector<Term>& terms() const { return terms_; }
    std::vector<std::string> symbol_names() const;
    // True when the dim is >= 0 for every value of its symbols >= 0 (all coefficients >= 0).
    bool surely_nonnegative() const;
    // This dim divided by `d` when every coefficient divides exactly, else nullopt.
    std::optional<Dim> div_exact(std::int64_t d) const;

    std::string to_string() const;                     // "784", "?batch", "4*?B*?S", "?past+?seq"
    static Dim parse(const std::string& text);         // inverse of to_string; throws

    // Sums, differences and products; kiln::Error when a coefficient overflows int64.
    friend Dim operator+(const Dim& a, const Dim& b);
    friend Dim operator-(const Dim& a, const Dim& b);
    friend Dim operator*(const Dim& a, const Dim& b);
    friend bool operator==(const Dim& a, const Dim& b) = default;
    friend bool operator<(const Dim& a, const Dim& b);

private:
    void add_term(Term t);  // merges into the sorted terms, dropping a zero coefficient

    std::int64_t const_ = 0;
    std::vector<Term> terms_;  // sorted by symbols, unique, no zero coefficient
};

// A symbolic dim for kiln::arg: the same name means the same size.
inline Dim dyn(std::string name) { return Dim::symbol(std::move(name)); }

std::ostream& operator<<(std::ostream& os, const Dim& d);
std::string dims_to_string(const std::vector<Dim>& dims);  // "[?batch,784]"

}  // namespace kiln
