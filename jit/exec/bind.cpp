#include "jit/exec/bind.h"

#include "src/support/check.h"
#include "src/support/checked.h"

namespace kiln::jit {
namespace {

// Which argument and dim first bound a symbol, for messages.
std::string binder(const ir::Graph& g, const std::string& sym) {
    for (ir::ValueId id : g.inputs) {
        const ir::Node& n = g.nodes[static_cast<std::size_t>(id)];
        for (std::size_t d = 0; d < n.type.dims.size(); ++d)
            if (n.type.dims[d].is_symbol() && n.type.dims[d].symbols()[0] == sym)
                return "argument '" + n.attrs.str("name") + "' dim " + std::to_string(d);
    }
    return "?";
}

void bind_shape(const ir::Graph& g, std::size_t i, const Shape& shape, ir::Bindings& b, const std::string& what) {
    const ir::Node& n = g.nodes[static_cast<std::size_t>(g.inputs[i])];
    const std::string& name = n.attrs.str("name");
    const auto& dims = n.type.dims;
    KILN_USER_CHECK(shape.size() == dims.size(), what << ": argument '" << name << "' (input " << i << ") expected rank "
                                                      << dims.size() << " " << n.type.to_string() << ", got rank "
                                                      << shape.size() << " " << shape_to_string(shape));
    // What a Tensor could not have: a negative dim, more elements than int64 counts.
    for (std::size_t d = 0; d < shape.size(); ++d)
        KILN_USER_CHECK(shape[d] >= 0, what << ": argument '" << name << "' (input " << i << ") dim " << d
                                            << " expected >= 0, got " << shape[d] << " (shape " << shape_to_string(shape)
                                            << ", expected " << n.type.to_string() << ")");
    if (!support::bytes_fit(shape, 1))
        support::checked_numel(shape, what + ": argument '" + name + "' (input " + std::to_string(i) + "), expected " +
                                          n.type.to_string());
    for (std::size_t d = 0; d < dims.size(); ++d) {
        if (dims[d].is_static()) {
            KILN_USER_CHECK(dims[d].value() == shape[d], what << ": argument '" << name << "' dim " << d << " expected "
                                                              << dims[d].value() << ", got " << shape[d] << " (shape "
                                                              << shape_to_string(shape) << ", expected " << n.type.to_string() << ")");
            continue;
        }
        const std::string& sym = dims[d].symbols()[0];
        if (auto v = b.get(sym)) {
            KILN_USER_CHECK(*v == shape[d], what << ": argument '" << name << "' dim " << d << " (?" << sym << ") is "
                                                 << shape[d] << ", but ?" << sym << " = " << *v << " from "
                                                 << binder(g, sym));
        } else {
            b.bind(sym, shape[d]);
        }
    }
}

void check_count(const ir::Graph& g, std::size_t n, const std::string& what) {
    KILN_USER_CHECK(n == g.inputs.size(), what << ": expected " << g.inputs.size() << " inputs, got " << n);
}

}  // namespace

void check_inputs(const ir::Graph& g, std::span<const Tensor> inputs, const std::string& what) {
    check_count(g, inputs.size(), what);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const ir::Node& n = g.nodes[static_cast<std::size_t>(g.inputs[i])];
        const std::string& name = n.attrs.str("name");
        const Tensor& t = inputs[i];
        KILN_USER_CHECK(t.defined(), what << ": argument '" << name << "' (input " << i << ") is an undefined Tensor");
        KILN_USER_CHECK(t.dtype() == n.type.dtype, what << ": argument '" << name << "' (input " << i << ") expected dtype "
                                                        << dtype_name(n.type.dtype) << ", got " << dtype_name(t.dtype()));
        // Computation follows the data: every input on one device (the first input's).
        const Device first = inputs[0].device();
        KILN_USER_CHECK(t.device() == first, what << ": argument '" << name << "' (input " << i << ") is on "
                                                  << t.device().to_string() << " but argument '"
                                                  << g.nodes[static_cast<std::size_t>(g.inputs[0])].attrs.str("name")
                                                  << "' (input 0) is on " << first.to_string()
                                                  << "; expected every input on one device");
    }
}

void bind_shapes(const ir::Graph& g, const std::vector<Shape>& shapes, ir::Bindings& b, const std::string& what) {
    check_count(g, shapes.size(), what);
    for (std::size_t i = 0; i < shapes.size(); ++i) bind_shape(g, i, shapes[i], b, what);
}

}  // namespace kiln::jit
