// Fuzz target (c): the text IR (README, "The text IR"). The input is parsed with Graph::parse;
// the outcome must be a graph or a kiln::Error. A parsed graph must print, parse back and print
// the same text, structurally equal and with the same hash. A small one (at most 64 nodes, every
// value at most kRunMax elements with each symbol bound to 2, small attributes) is loaded on the
// interpreter and run once with inputs in [-2, 2): it returns outputs of the shapes
// output_shapes gives, or throws kiln::Error.
#include "fuzz_util.h"

#include "src/ir/ir.h"
#include "tests/differential.h"
#include "tests/reference.h"

#include <cstdlib>
#include <string>
#include <variant>

using namespace kiln;
using fuzz::attempt;

namespace {

constexpr std::int64_t kRunMax = 1 << 14;
constexpr std::int64_t kSymbolValue = 2;

// The size of `d` with every symbol bound to kSymbolValue, or -1 when negative or too large.
std::int64_t bound(const Dim& d) {
    std::int64_t v = d.constant();
    for (const Dim::Term& t : d.terms()) {
        std::int64_t p = t.coeff;
        for (std::size_t i = 0; i < t.symbols.size(); ++i)
            if (__builtin_mul_overflow(p, kSymbolValue, &p)) return -1;
        if (__builtin_add_overflow(v, p, &v)) return -1;
    }
    return v >= 0 && v <= kRunMax ? v : -1;
}

Shape bound_shape(const std::vector<Dim>& dims) {
    Shape s;
    for (const Dim& d : dims) s.push_back(bound(d));
    return s;
}

bool small_attrs(const ir::Attrs& a) {
    for (const auto& [name, value] : a.items()) {
        if (const auto* i = std::get_if<std::int64_t>(&value); i && std::llabs(*i) > 64) return false;
        if (const auto* l = std::get_if<std::vector<std::int64_t>>(&value))
            for (std::int64_t x : *l)
                if (std::llabs(x) > 64) return false;
    }
    return true;
}

bool small_graph(const ir::Graph& g) {
    if (g.nodes.size() > 64) return false;
    for (const ir::Node& n : g.nodes) {
        if (!small_attrs(n.attrs)) return false;
        std::int64_t count = 1;
        for (const Dim& d : n.type.dims)
            if (bound(d) < 0 || __builtin_mul_overflow(count, bound(d), &count) || count > kRunMax) return false;
    }
    return true;
}

void run_once(const Graph& g) {
    static Engine engine(test::diff::interpreter_options());
    Function f;
    if (!attempt("load", [&] { f = engine.load(g); })) return;
    std::vector<Tensor> inputs;
    std::vector<Shape> shapes;
    for (const ValueInfo& v : g.inputs()) {
        shapes.push_back(bound_shape(v.dims));
        inputs.push_back(ref::random_input(shapes.back(), inputs.size() + 1, v.dtype, -2.0, 2.0));
    }
    std::vector<Tensor> out;
    if (!attempt("call", [&] { out = f(inputs); })) return;
    std::vector<Shape> want;
    KILN_FUZZ_CHECK(attempt("output_shapes", [&] { want = f.output_shapes(shapes); }),
                    "output_shapes rejected inputs that a call accepted:\n" << g.to_string());
    KILN_FUZZ_CHECK(want.size() == out.size(), "output_shapes gave " << want.size() << " shapes for " << out.size() << " outputs");
    for (std::size_t i = 0; i < out.size(); ++i)
        KILN_FUZZ_CHECK(out[i].shape() == want[i], "output " << i << " has shape " << fuzz::str(out[i].shape())
                                                             << ", output_shapes " << fuzz::str(want[i]) << ":\n" << g.to_string());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    Graph g;
    if (!attempt("parse", [&] { g = Graph::parse(text); })) return 0;

    std::string printed, reprinted;
    Graph again;
    KILN_FUZZ_CHECK(attempt("print", [&] { printed = g.to_string(); }), "a parsed graph does not print");
    std::string error;
    KILN_FUZZ_CHECK(attempt("parse of the printed text", [&] { again = Graph::parse(printed); }, &error),
                    "the printed graph does not parse back: " << error << "\n" << printed);
    reprinted = again.to_string();
    KILN_FUZZ_CHECK(printed == reprinted, "printed twice, the graph differs:\n" << printed << "\nthen\n" << reprinted);
    KILN_FUZZ_CHECK(g.structurally_equal(again) && g.hash() == again.hash(), "the reparsed graph differs:\n" << printed);
    KILN_FUZZ_CHECK(attempt("short print", [&] { (void)g.to_string({.max_constant_elements = 0}); }), "the short print threw");

    if (small_graph(*g.impl())) run_once(g);
    return 0;
}
