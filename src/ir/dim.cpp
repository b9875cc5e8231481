#include <kiln/dim.h>

#include "src/support/check.h"
#include "src/support/checked.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <ostream>

namespace kiln {

Dim Dim::symbol(std::string name) {
    KILN_USER_CHECK(!name.empty(), "dyn: a symbolic dim needs a name");
    for (char c : name)
        KILN_USER_CHECK(std::isalnum(static_cast<unsigned char>(c)) || c == '_',
                        "dyn: symbol name '" << name << "' may hold only letters, digits and '_'");
    Dim d(1);
    d.syms_.push_back(std::move(name));
    return d;
}

std::int64_t Dim::value() const {
    KILN_USER_CHECK(is_static(), "dim " << to_string() << " is symbolic, expected a static size");
    return coeff_;
}

Dim operator*(const Dim& a, const Dim& b) {
    std::int64_t c = 0;
    KILN_USER_CHECK(support::mul_fits(a.coeff_, b.coeff_, &c),
                    "dim product " << a.to_string() << " * " << b.to_string() << " overflows int64");
    Dim r(c);
    if (r.coeff_ == 0) return r;
    r.syms_ = a.syms_;
    r.syms_.insert(r.syms_.end(), b.syms_.begin(), b.syms_.end());
    std::sort(r.syms_.begin(), r.syms_.end());
    return r;
}

bool operator<(const Dim& a, const Dim& b) {
    if (a.syms_ != b.syms_) return a.syms_ < b.syms_;
    return a.coeff_ < b.coeff_;
}

std::string Dim::to_string() const {
    std::string s;
    if (coeff_ != 1 || syms_.empty()) s = std::to_string(coeff_);
    for (const auto& n : syms_) s += (s.empty() ? "?" : "*?") + n;
    return s;
}

Dim Dim::parse(const std::string& text) {
    Dim d(1);
    std::size_t pos = 0;
    KILN_USER_CHECK(!text.empty(), "Dim::parse: empty dim");
    while (pos <= text.size()) {
        std::size_t end = text.find('*', pos);
        if (end == std::string::npos) end = text.size();
        std::string f = text.substr(pos, end - pos);
        KILN_USER_CHECK(!f.empty(), "Dim::parse: malformed dim '" << text << "'");
        if (f[0] == '?') {
            d = d * Dim::symbol(f.substr(1));
        } else {
            std::int64_t v = 0;
            auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
            KILN_USER_CHECK(ec == std::errc() && p == f.data() + f.size(), "Dim::parse: malformed dim '" << text << "'");
            d = d * Dim(v);
        }
        pos = end + 1;
    }
    return d;
}

std::ostream& operator<<(std::ostream& os, const Dim& d) { return os << d.to_string(); }

std::string dims_to_string(const std::vector<Dim>& dims) {
    std::string s = "[";
    for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + dims[i].to_string();
    return s + "]";
}

}  // namespace kiln
