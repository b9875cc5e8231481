// JSON forms of FunctionStats and EngineStats (hand-written: no JSON dependency).
#include <kiln/engine.h>

#include <cmath>
#include <cstdio>
#include <sstream>

namespace kiln {
namespace {

std::string quote(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        default:
            if (static_cast<unsigned char>(c) < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out += c;
            }
        }
    }
    return out + "\"";
}
std::string num(double v) {
    if (!std::isfinite(v)) return "null";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
}
template <class A> std::string array(const A& a) {
    std::string s = "[";
    for (std::size_t i = 0; i < a.size(); ++i) s += (i ? "," : "") + std::to_string(a[i]);
    return s + "]";
}
template <std::size_t N> std::string array(const std::array<double, N>& a) {
    std::string s = "[";
    for (std::size_t i = 0; i < N; ++i) s += (i ? "," : "") + num(a[i]);
    return s + "]";
}
std::string value(std::uint64_t v) { return std::to_string(v); }
std::string value(double v) { return num(v); }
std::string value(const Tiers& v) { return array(v); }

}  // namespace

std::string FunctionStats::to_json() const {
    std::ostringstream os;
    os << "{\"name\":" << quote(name);
#define KILN_STAT(scope, type, field, doc) KILN_STAT_IN_FUNCTION_##scope(os << ",\"" #field "\":" << value(field);)
#include <kiln/stats_fields.def>
    os << ",\"groups\":[";
    for (std::size_t i = 0; i < groups.size(); ++i)
        os << (i ? "," : "") << "{\"name\":" << quote(groups[i].name) << ",\"kind\":" << quote(groups[i].kind)
           << ",\"tier\":" << groups[i].tier << ",\"calls\":" << groups[i].calls
           << ",\"compiled_calls\":" << groups[i].compiled_calls << ",\"versions\":" << groups[i].versions
           << ",\"total_ms\":" << num(groups[i].total_ms) << ",\"timed_calls\":" << groups[i].timed_calls
           << ",\"compiles_by_tier\":" << array(groups[i].compiles_by_tier)
           << ",\"compile_ms_by_tier\":" << array(groups[i].compile_ms_by_tier)
           << ",\"compile_cpu_ms_by_tier\":" << array(groups[i].compile_cpu_ms_by_tier) << ",\"note\":" << quote(groups[i].note) << ",\"us_per_call_by_tier\":" << array(groups[i].us_per_call_by_tier)
           << ",\"signatures\":" << groups[i].signatures << ",\"specializations\":" << groups[i].specializations
           << ",\"expected_saving_ms\":" << num(groups[i].expected_saving_ms)
           << ",\"compile_cost_ms\":" << num(groups[i].compile_cost_ms) << ",\"tierup\":" << quote(groups[i].tierup)
           << ",\"gpu_tier\":" << groups[i].gpu_tier << ",\"gpu_compiled_calls\":" << groups[i].gpu_compiled_calls
           << "}";
    os << "],\"bailouts\":{";
    bool first_b = true;
    for (const auto& [reason, n] : bailouts) {
        os << (first_b ? "" : ",") << quote(reason) << ":" << n;
        first_b = false;
    }
    os << "},\"signatures\":[";
    for (std::size_t i = 0; i < signatures.size(); ++i) {
        os << (i ? "," : "") << "{\"shapes\":[";
        for (std::size_t j = 0; j < signatures[i].shapes.size(); ++j) os << (j ? "," : "") << array(signatures[i].shapes[j]);
        os << "],\"calls\":" << signatures[i].calls << "}";
    }
    os << "],\"dim_histograms\":{";
    bool first = true;
    for (const auto& [sym, hist] : dim_histograms) {
        os << (first ? "" : ",") << quote(sym) << ":{";
        first = false;
        bool f2 = true;
        for (const auto& [v, n] : hist) {
            os << (f2 ? "" : ",") << "\"" << v << "\":" << n;
            f2 = false;
        }
        os << "}";
    }
    os << "}}";
    return os.str();
}

std::string EngineStats::to_json() const {
    std::ostringstream os;
    const char* sep = "{";
#define KILN_STAT(scope, type, field, doc) \
    KILN_STAT_IN_ENGINE_##scope(os << sep << "\"" #field "\":" << value(field); sep = ",";)
#include <kiln/stats_fields.def>
    os << "}";
    return os.str();
}

}  // namespace kiln
