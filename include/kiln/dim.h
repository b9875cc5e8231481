#pragma once
// kiln::Dim: one dimension of a traced tensor: a static size, or a product of named
// symbolic sizes times a constant (`?batch`, `?B*?S`, `4*?S`). Products keep symbolic
// sizes through reshape: [?B, ?S, 4, 16] -> [?B, ?S, 64].
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace kiln {

class Dim {
public:
    Dim() = default;                                   // the static size 0
    Dim(std::int64_t value) : coeff_(value) {}         // NOLINT: implicit on purpose
    Dim(int value) : coeff_(value) {}                  // NOLINT
    static Dim symbol(std::string name);               // coefficient 1, one symbol

    bool is_static() const { return syms_.empty(); }
    bool is_symbol() const { return coeff_ == 1 && syms_.size() == 1; }  // exactly `?name`
    std::int64_t value() const;                        // the static size; throws if symbolic
    std::int64_t coeff() const { return coeff_; }
    const std::vector<std::string>& symbols() const { return syms_; }  // sorted, may repeat
    std::string to_string() const;                     // "784", "?batch", "4*?B*?S"
    static Dim parse(const std::string& text);         // inverse of to_string; throws

    friend Dim operator*(const Dim& a, const Dim& b);
    friend bool operator==(const Dim& a, const Dim& b) = default;
    friend bool operator<(const Dim& a, const Dim& b);

private:
    std::int64_t coeff_ = 0;
    std::vector<std::string> syms_;
};

// A symbolic dim for kiln::arg: the same name means the same size.
inline Dim dyn(std::string name) { return Dim::symbol(std::move(name)); }

std::ostream& operator<<(std::ostream& os, const Dim& d);
std::string dims_to_string(const std::vector<Dim>& dims);  // "[?batch,784]"

}  // namespace kiln
