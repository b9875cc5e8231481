#pragma once
// Values of symbolic dims during one call: bound from the inputs, then from each node's
// concrete output (fresh symbols made by the tracer are bound where they first appear).
#include "src/ir/ir.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::ir {

class Bindings {
public:
    std::optional<std::int64_t> get(const std::string& symbol) const;
    void bind(const std::string& symbol, std::int64_t value);
    // The value of a dim, or nullopt when one of its symbols is unbound.
    std::optional<std::int64_t> eval(const Dim& d) const;
    // Binds the unbound pure symbols of `dims` to `shape` and checks every other dim.
    // Returns false (and says why) when a dim disagrees.
    bool unify(const std::vector<Dim>& dims, const Shape& shape, std::string* why);
    // Binds the one unbound symbol of `d` so that d == value, when d is linear in it.
    bool solve(const Dim& d, std::int64_t value);
    const std::vector<std::pair<std::string, std::int64_t>>& items() const { return items_; }
    void clear() { items_.clear(); }

private:
    std::vector<std::pair<std::string, std::int64_t>> items_;  // few symbols: a flat list is fastest
};

// Substitutes bound symbols in a reshape / broadcast_to target. For reshape, a single dim
// with an unbound symbol is solved from `numel` (and its symbol bound). Throws kiln::Error
// when the target cannot be made concrete.
Shape concrete_target(const Node& node, Bindings& b, std::int64_t numel);

}  // namespace kiln::ir
