#pragma once
// kiln::Graph: an immutable, cheaply copied tensor graph (the IR), printable and parseable.
#include <kiln/dim.h>
#include <kiln/dtype.h>

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

namespace ir { struct Graph; }

// An input or output of a graph: its name, dtype and dims.
struct ValueInfo {
    std::string name;
    DType dtype = DType::f32;
    std::vector<Dim> dims;
};

struct PrintOptions {
    // Constants with more elements than this print as `<elided>`; such text does not parse
    // back. -1 prints every constant in full (the default: to_string() round-trips).
    std::int64_t max_constant_elements = -1;
};

class Graph {
public:
    Graph() = default;
    explicit Graph(std::shared_ptr<const ir::Graph> impl);

    const std::string& name() const;
    std::int64_t num_nodes() const;
    std::vector<ValueInfo> inputs() const;
    std::vector<ValueInfo> outputs() const;
    std::string to_string(const PrintOptions& options = {}) const;
    static Graph parse(const std::string& text);  // throws kiln::Error with line and column
    std::uint64_t hash() const;                   // structural: equal graphs hash equal
    bool structurally_equal(const Graph& other) const;

    const std::shared_ptr<const ir::Graph>& impl() const { return impl_; }

private:
    std::shared_ptr<const ir::Graph> impl_;
};

std::ostream& operator<<(std::ostream& os, const Graph& g);

}  // namespace kiln
