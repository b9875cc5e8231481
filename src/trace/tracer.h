#pragma once
// The tracer behind kiln::trace: records ops on kiln::Vars into an ir::Graph, inferring and
// checking each node's type as it is added (so a malformed trace fails at the faulty op).
#include <kiln/trace.h>

#include "src/ir/ir.h"
#include "src/ir/shape_infer.h"

#include <string>
#include <vector>

namespace kiln::detail {

class Tracer {
public:
    explicit Tracer(std::string name);

    // The tracer of the kiln::trace running on this thread; throws kiln::Error when none.
    static Tracer& current(const char* what);
    static Tracer* current_or_null();

    Var add_input(const ArgSpec& spec);
    Var add_constant(const Tensor& value);
    // Adds a node; scalar operands become constants of `scalar_dtype`.
    Var add(ir::Op op, const std::vector<Var>& operands, ir::Attrs attrs = {});
    const ir::TensorType& type(const Var& v) const;
    ir::SymbolGen& symbols() { return gen_; }
    ir::Graph finish(const std::vector<Var>& outputs);
    const ir::Node& node(const Var& v) const { return graph_.nodes[static_cast<std::size_t>(v.id())]; }
    // Is `symbol` a symbol of the dims of a value traced so far (so that a call knows it)?
    bool knows_symbol(const std::string& symbol) const;

    // RAII: makes a tracer current on this thread.
    class Scope {
    public:
        explicit Scope(Tracer* t);
        ~Scope();
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

    private:
        Tracer* previous_;
    };

private:
    Var own(const Var& v, DType scalar_dtype, const char* op);
    ir::Graph graph_;
    ir::SymbolGen gen_;
};

// The tracer of a non-scalar Var (or the current one for scalars).
Tracer& tracer_of(const Var& v, const char* what);

}  // namespace kiln::detail
