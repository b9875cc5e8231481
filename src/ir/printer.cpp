#include "src/ir/printer.h"

#include <cmath>
#include <cstdio>
#include <string_view>
#include <type_traits>

namespace kiln::ir {
namespace {

void append_string(std::string& out, std::string_view s) {
    static constexpr char kHex[] = "0123456789abcdef";
    out += '"';
    for (char c : s) {
        auto u = static_cast<unsigned char>(c);
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        default:
            if (u < 0x20 || u == 0x7f) {
                out += "\\x";
                out += kHex[u >> 4];
                out += kHex[u & 15];
            } else {
                out += c;
            }
        }
    }
    out += '"';
}

void append_double(std::string& out, double v) {
    if (std::isnan(v)) {
        out += "nan";
        return;
    }
    if (std::isinf(v)) {
        out += v < 0 ? "-inf" : "inf";
        return;
    }
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    std::string_view s(buf);
    out += s;
    if (s.find_first_not_of("-0123456789") == std::string_view::npos) out += ".0";
}

void append_dims(std::string& out, const std::vector<Dim>& dims, char open, char close) {
    out += open;
    for (std::size_t i = 0; i < dims.size(); ++i) {
        if (i) out += ',';
        out += dims[i].to_string();
    }
    out += close;
}

void append_value(std::string& out, const AttrValue& v) {
    std::visit(
        [&out](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::int64_t>) {
                out += std::to_string(x);
            } else if constexpr (std::is_same_v<T, double>) {
                append_double(out, x);
            } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
                out += '[';
                for (std::size_t i = 0; i < x.size(); ++i) {
                    if (i) out += ',';
                    out += std::to_string(x[i]);
                }
                out += ']';
            } else if constexpr (std::is_same_v<T, std::vector<Dim>>) {
                append_dims(out, x, '<', '>');
            } else if constexpr (std::is_same_v<T, DType>) {
                out += dtype_name(x);
            } else {
                static_assert(std::is_same_v<T, std::string>);
                append_string(out, x);
            }
        },
        v);
}

void append_constant_data(std::string& out, const Node& n, std::int64_t max_elements) {
    out += "data=";
    if (!n.value.defined()) {
        out += "<undefined>";
        return;
    }
    if (max_elements >= 0 && n.value.numel() > max_elements) {
        out += "<elided>";
        return;
    }
    static constexpr char kHex[] = "0123456789abcdef";
    Tensor t = n.value.contiguous();
    const auto* p = static_cast<const unsigned char*>(t.data());
    std::size_t bytes = static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype());
    out += "0x";
    out.reserve(out.size() + 2 * bytes + 32);
    for (std::size_t i = 0; i < bytes; ++i) {
        out += kHex[p[i] >> 4];
        out += kHex[p[i] & 15];
    }
}

}  // namespace

std::string print_attr_value(const AttrValue& v) {
    std::string s;
    append_value(s, v);
    return s;
}

std::string node_label(const Graph& g, ValueId id) {
    std::string s = "%" + std::to_string(id);
    if (id >= 0 && static_cast<std::size_t>(id) < g.nodes.size())
        s += " = " + std::string(op_name(g.nodes[static_cast<std::size_t>(id)].op));
    return s;
}

std::string print(const Graph& g, std::int64_t max_constant_elements) {
    std::string out = "graph ";
    append_string(out, g.name);
    out += " {\n";
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
        const Node& n = g.nodes[i];
        out += "  %" + std::to_string(i) + " = ";
        out += op_name(n.op);
        out += '(';
        for (std::size_t k = 0; k < n.inputs.size(); ++k) {
            if (k) out += ", ";
            out += '%' + std::to_string(n.inputs[k]);
        }
        out += ')';
        bool is_const = n.op == Op::constant;
        if (is_const || !n.attrs.items().empty()) {
            out += " {";
            bool first = true;
            if (is_const) {
                append_constant_data(out, n, max_constant_elements);
                first = false;
            }
            for (const auto& [name, value] : n.attrs.items()) {
                if (!first) out += ", ";
                first = false;
                out += name;
                out += '=';
                append_value(out, value);
            }
            out += '}';
        }
        out += " : ";
        out += dtype_name(n.type.dtype);
        append_dims(out, n.type.dims, '[', ']');
        out += '\n';
    }
    out += "  return";
    for (std::size_t k = 0; k < g.outputs.size(); ++k) {
        out += k ? ", %" : " %";
        out += std::to_string(g.outputs[k]);
    }
    out += "\n}\n";
    return out;
}

}  // namespace kiln::ir
