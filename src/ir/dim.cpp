#include <kiln/dim.h>

#include "src/support/check.h"
#include "src/support/checked.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <ostream>

namespace kiln {
namespace {

std::int64_t add_or_throw(std::int64_t a, std::int64_t b, const Dim& x, const Dim& y, const char* op) {
    std::int64_t r = 0;
    KILN_USER_CHECK(support::add_fits(a, b, &r), "dim " << x.to_string() << " " << op << " " << y.to_string() << " overflows int64");
    return r;
}

std::int64_t mul_or_throw(std::int64_t a, std::int64_t b, const Dim& x, const Dim& y) {
    std::int64_t r = 0;
    KILN_USER_CHECK(support::mul_fits(a, b, &r), "dim product " << x.to_string() << " * " << y.to_string() << " overflows int64");
    return r;
}

bool valid_symbol_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

}  // namespace

Dim Dim::symbol(std::string name) {
    KILN_USER_CHECK(!name.empty(), "dyn: a symbolic dim needs a name");
    for (char c : name)
        KILN_USER_CHECK(valid_symbol_char(c), "dyn: symbol name '" << name << "' may hold only letters, digits and '_'");
    Dim d;
    d.terms_.push_back(Term{1, {std::move(name)}});
    return d;
}

bool Dim::is_symbol() const {
    return const_ == 0 && terms_.size() == 1 && terms_[0].coeff == 1 && terms_[0].symbols.size() == 1;
}

std::int64_t Dim::value() const {
    KILN_USER_CHECK(is_static(), "dim " << to_string() << " is symbolic, expected a static size");
    return const_;
}

std::int64_t Dim::coeff() const {
    KILN_CHECK(is_monomial(), "Dim::coeff of the sum " << to_string());
    return terms_.empty() ? const_ : terms_[0].coeff;
}

const std::vector<std::string>& Dim::symbols() const {
    static const std::vector<std::string> none;
    KILN_CHECK(is_monomial(), "Dim::symbols of the sum " << to_string());
    return terms_.empty() ? none : terms_[0].symbols;
}

std::vector<std::string> Dim::symbol_names() const {
    std::vector<std::string> names;
    for (const Term& t : terms_) names.insert(names.end(), t.symbols.begin(), t.symbols.end());
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
}

bool Dim::surely_nonnegative() const {
    if (const_ < 0) return false;
    return std::all_of(terms_.begin(), terms_.end(), [](const Term& t) { return t.coeff > 0; });
}

std::optional<Dim> Dim::div_exact(std::int64_t d) const {
    if (d == 0 || (d == -1 && const_ == INT64_MIN)) return std::nullopt;
    if (const_ % d != 0) return std::nullopt;
    Dim r(const_ / d);
    for (const Term& t : terms_) {
        if (t.coeff % d != 0 || (d == -1 && t.coeff == INT64_MIN)) return std::nullopt;
        r.terms_.push_back(Term{t.coeff / d, t.symbols});
    }
    return r;
}

void Dim::add_term(Term t) {
    auto it = std::lower_bound(terms_.begin(), terms_.end(), t.symbols,
                               [](const Term& a, const std::vector<std::string>& s) { return a.symbols < s; });
    if (it != terms_.end() && it->symbols == t.symbols) {
        Dim self = *this;
        it->coeff = add_or_throw(it->coeff, t.coeff, self, Dim(t.coeff), "+");
        if (it->coeff == 0) terms_.erase(it);
        return;
    }
    if (t.coeff != 0) terms_.insert(it, std::move(t));
}

Dim operator+(const Dim& a, const Dim& b) {
    Dim r = a;
    r.const_ = add_or_throw(a.const_, b.const_, a, b, "+");
    for (const Dim::Term& t : b.terms_) r.add_term(t);
    return r;
}

Dim operator-(const Dim& a, const Dim& b) { return a + b * Dim(-1); }

Dim operator*(const Dim& a, const Dim& b) {
    Dim r(mul_or_throw(a.const_, b.const_, a, b));
    for (const Dim::Term& t : a.terms_)
        if (b.const_ != 0) r.add_term({mul_or_throw(t.coeff, b.const_, a, b), t.symbols});
    for (const Dim::Term& t : b.terms_)
        if (a.const_ != 0) r.add_term({mul_or_throw(t.coeff, a.const_, a, b), t.symbols});
    for (const Dim::Term& x : a.terms_)
        for (const Dim::Term& y : b.terms_) {
            Dim::Term t{mul_or_throw(x.coeff, y.coeff, a, b), x.symbols};
            t.symbols.insert(t.symbols.end(), y.symbols.begin(), y.symbols.end());
            std::sort(t.symbols.begin(), t.symbols.end());
            r.add_term(std::move(t));
        }
    return r;
}

bool operator<(const Dim& a, const Dim& b) {
    if (a.terms_.size() != b.terms_.size()) return a.terms_.size() < b.terms_.size();
    for (std::size_t i = 0; i < a.terms_.size(); ++i) {
        const Dim::Term &x = a.terms_[i], &y = b.terms_[i];
        if (x.symbols != y.symbols) return x.symbols < y.symbols;
        if (x.coeff != y.coeff) return x.coeff < y.coeff;
    }
    return a.const_ < b.const_;
}

std::string Dim::to_string() const {
    std::string s;
    for (const Term& t : terms_) {
        std::string term = t.coeff == 1 ? "" : t.coeff == -1 ? "-" : std::to_string(t.coeff) + "*";
        for (std::size_t i = 0; i < t.symbols.size(); ++i) term += (i ? "*?" : "?") + t.symbols[i];
        s += (s.empty() || term[0] == '-' ? "" : "+") + term;
    }
    if (const_ != 0 || terms_.empty()) {
        std::string c = std::to_string(const_);
        s += (s.empty() || c[0] == '-' ? "" : "+") + c;
    }
    return s;
}

// dim := ['-'] term (('+' | '-') term)*;  term := factor ('*' factor)*;  factor := int | '?' name
Dim Dim::parse(const std::string& text) {
    KILN_USER_CHECK(!text.empty(), "Dim::parse: empty dim");
    auto bad = [&text]() { KILN_USER_ERROR("Dim::parse: malformed dim '" << text << "'"); };
    std::size_t pos = 0;
    auto factor = [&]() -> Dim {
        if (pos < text.size() && text[pos] == '?') {
            std::size_t end = ++pos;
            while (end < text.size() && valid_symbol_char(text[end])) ++end;
            if (end == pos) bad();
            Dim d = Dim::symbol(text.substr(pos, end - pos));
            pos = end;
            return d;
        }
        std::int64_t v = 0;
        auto [p, ec] = std::from_chars(text.data() + pos, text.data() + text.size(), v);
        if (ec != std::errc() || p == text.data() + pos) bad();
        pos = static_cast<std::size_t>(p - text.data());
        return Dim(v);
    };
    auto term = [&]() {
        Dim d = factor();
        while (pos < text.size() && text[pos] == '*') {
            ++pos;
            d = d * factor();
        }
        return d;
    };
    Dim r;
    for (;;) {
        // A '-' before a symbol negates the term; before a number it is the number's sign.
        const bool negative = pos + 1 < text.size() && text[pos] == '-' && text[pos + 1] == '?';
        if (negative) ++pos;
        Dim t = term();
        r = negative ? r - t : r + t;
        if (pos == text.size()) return r;
        if (text[pos] == '+' && pos + 1 < text.size() && text[pos + 1] != '-') ++pos;
        else if (text[pos] != '-') bad();
    }
}

std::ostream& operator<<(std::ostream& os, const Dim& d) { return os << d.to_string(); }

std::string dims_to_string(const std::vector<Dim>& dims) {
    std::string s = "[";
    for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + dims[i].to_string();
    return s + "]";
}

}  // namespace kiln
