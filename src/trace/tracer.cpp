#include "src/trace/tracer.h"

#include "src/ir/verifier.h"
#include "src/support/check.h"
#include "src/support/checked.h"

#include <set>

namespace kiln::detail {
namespace {
thread_local Tracer* t_current = nullptr;
}

Tracer::Tracer(std::string name) { graph_.name = std::move(name); }

Tracer* Tracer::current_or_null() { return t_current; }
Tracer& Tracer::current(const char* what) {
    KILN_USER_CHECK(t_current != nullptr, what << ": used outside kiln::trace (no trace is running on this thread)");
    return *t_current;
}

Tracer::Scope::Scope(Tracer* t) : previous_(t_current) { t_current = t; }
Tracer::Scope::~Scope() { t_current = previous_; }

Var Tracer::add_input(const ArgSpec& spec) {
    for (const Dim& d : spec.dims) {
        if (d.is_static())
            KILN_USER_CHECK(d.value() >= 0, "arg '" << spec.name << "': dims must be >= 0, got " << dims_to_string(spec.dims));
        else
            KILN_USER_CHECK(d.is_symbol() && d.symbols()[0][0] != '_',
                            "arg '" << spec.name << "': a dim must be an integer or dyn(\"name\") (names may not start "
                                    << "with '_'), got " << d.to_string());
    }
    // The static dims (and a symbolic dim's coefficient) alone must give a size that fits.
    Shape known;
    bool all_static = true;
    for (const Dim& d : spec.dims) {
        known.push_back(d.coeff());
        all_static = all_static && d.is_static();
    }
    support::checked_bytes(known, dtype_size(spec.dtype),
                           "arg '" + spec.name + "'" + (all_static ? "" : " " + dims_to_string(spec.dims) + " (its static dims)"));
    ir::Node n;
    n.op = ir::Op::input;
    n.attrs.set("name", spec.name);
    n.type = {spec.dtype, spec.dims};
    graph_.nodes.push_back(std::move(n));
    auto id = static_cast<ir::ValueId>(graph_.nodes.size() - 1);
    graph_.inputs.push_back(id);
    return Var(this, id);
}

Var Tracer::add_constant(const Tensor& value) {
    KILN_USER_CHECK(value.defined(), "constant: an undefined Tensor was used in a trace");
    KILN_USER_CHECK(value.device().kind == Device::Kind::cpu,
                    "constant: tensors captured in a trace must be on the cpu, got " << value.device().to_string());
    ir::Node n;
    n.op = ir::Op::constant;
    n.value = value.clone();  // the graph owns a snapshot: later writes to `value` do not change it
    n.type = ir::static_type(value.dtype(), value.shape());
    graph_.nodes.push_back(std::move(n));
    return Var(this, static_cast<ir::ValueId>(graph_.nodes.size() - 1));
}

Var Tracer::own(const Var& v, DType scalar_dtype, const char* op) {
    if (v.is_scalar()) return add_constant(Tensor::full({}, v.scalar(), scalar_dtype));
    KILN_USER_CHECK(v.tracer() != nullptr, op << ": an operand is undefined (a default-constructed Var)");
    KILN_USER_CHECK(v.tracer() == this, op << ": an operand belongs to another trace");
    return v;
}

Var Tracer::add(ir::Op op, const std::vector<Var>& operands, ir::Attrs attrs) {
    const char* name = ir::op_name(op).data();
    // A scalar takes the dtype of the first traced operand (for where: of the branches).
    DType scalar_dtype = DType::f32;
    for (std::size_t i = op == ir::Op::where ? 1 : 0; i < operands.size(); ++i)
        if (!operands[i].is_scalar() && operands[i].tracer() != nullptr) {
            scalar_dtype = type(operands[i]).dtype;
            break;
        }
    std::vector<ir::ValueId> ids;
    for (const Var& v : operands) ids.push_back(own(v, scalar_dtype, name).id());
    std::vector<const ir::TensorType*> types;
    for (auto id : ids) types.push_back(&graph_.nodes[static_cast<std::size_t>(id)].type);
    ir::Node n;
    n.op = op;
    n.type = ir::infer_type(op, types, attrs, &gen_);
    n.inputs = std::move(ids);
    n.attrs = std::move(attrs);
    graph_.nodes.push_back(std::move(n));
    return Var(this, static_cast<ir::ValueId>(graph_.nodes.size() - 1));
}

bool Tracer::knows_symbol(const std::string& symbol) const {
    for (const ir::Node& n : graph_.nodes)
        for (const Dim& d : n.type.dims)
            for (const std::string& s : d.symbol_names())
                if (s == symbol) return true;
    return false;
}

const ir::TensorType& Tracer::type(const Var& v) const {
    KILN_CHECK(v.tracer() == this, "Var of another tracer");
    return graph_.nodes[static_cast<std::size_t>(v.id())].type;
}

ir::Graph Tracer::finish(const std::vector<Var>& outputs) {
    KILN_USER_CHECK(!outputs.empty(), "trace '" << graph_.name << "': the body returned no outputs");
    for (std::size_t i = 0; i < outputs.size(); ++i) {
        const Var& v = outputs[i];
        KILN_USER_CHECK(!v.is_scalar() && v.tracer() == this,
                        "trace '" << graph_.name << "': output " << i
                                  << " must be a Var computed in this trace (not a scalar or a Var of another trace)");
        graph_.outputs.push_back(v.id());
    }
    ir::verify(graph_);
    return std::move(graph_);
}

Tracer& tracer_of(const Var& v, const char* what) {
    if (v.tracer() != nullptr) return *v.tracer();
    return Tracer::current(what);
}

}  // namespace kiln::detail

namespace kiln {

Var::Var(const Tensor& constant) { *this = detail::Tracer::current("Tensor used as a Var").add_constant(constant); }
Var::Var(double scalar) : is_scalar_(true), scalar_(scalar) {}

DType Var::dtype() const {
    if (is_scalar_) return DType::f32;
    KILN_USER_CHECK(tracer_ != nullptr, "Var::dtype: the Var is undefined");
    return tracer_->type(*this).dtype;
}
std::int64_t Var::rank() const {
    if (is_scalar_) return 0;
    KILN_USER_CHECK(tracer_ != nullptr, "Var::rank: the Var is undefined");
    return tracer_->type(*this).rank();
}
std::vector<Dim> Var::dims() const {
    if (is_scalar_) return {};
    KILN_USER_CHECK(tracer_ != nullptr, "Var::dims: the Var is undefined");
    return tracer_->type(*this).dims;
}
Dim Var::dim(std::int64_t i) const {
    std::vector<Dim> d = dims();
    auto r = static_cast<std::int64_t>(d.size());
    KILN_USER_CHECK(i >= -r && i < r, "Var::dim: axis " << i << " is out of range for rank " << r);
    return d[static_cast<std::size_t>(i < 0 ? i + r : i)];
}

namespace {
Graph trace_impl(const std::string& name, const std::vector<ArgSpec>& args,
                 const std::function<std::vector<Var>(const std::vector<Var>&)>& body) {
    detail::Tracer tracer(name);
    detail::Tracer::Scope scope(&tracer);
    std::set<std::string> names;
    std::vector<Var> inputs;
    for (const ArgSpec& a : args) {
        KILN_USER_CHECK(names.insert(a.name).second, "trace '" << name << "': argument name '" << a.name << "' repeats");
        inputs.push_back(tracer.add_input(a));
    }
    std::vector<Var> outs = body(inputs);
    return Graph(std::make_shared<const ir::Graph>(tracer.finish(outs)));
}
}  // namespace

Graph trace(const std::string& name, const std::vector<ArgSpec>& args, const TraceBody& body) {
    return trace_impl(name, args, body);
}
Graph trace(const std::string& name, const std::vector<ArgSpec>& args,
            const std::function<Var(const std::vector<Var>&)>& body) {
    return trace_impl(name, args, [&](const std::vector<Var>& in) { return std::vector<Var>{body(in)}; });
}

}  // namespace kiln
