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

}  // namespace

std::string FunctionStats::to_json() const {
    std::ostringstream os;
    os << "{\"name\":" << quote(name) << ",\"calls\":" << calls << ",\"calls_by_tier\":" << array(calls_by_tier)
       << ",\"failed_calls\":" << failed_calls << ",\"compiles\":" << compiles << ",\"compile_failures\":" << compile_failures
       << ",\"compile_ms\":" << num(compile_ms) << ",\"guard_failures\":" << guard_failures << ",\"deopts\":" << deopts
       << ",\"specializations\":" << specializations << ",\"code_cache_hits\":" << code_cache_hits
       << ",\"persistent_cache_hits\":" << persistent_cache_hits << ",\"evictions\":" << evictions << ",\"groups\":[";
    for (std::size_t i = 0; i < groups.size(); ++i)
        os << (i ? "," : "") << "{\"name\":" << quote(groups[i].name) << ",\"kind\":" << quote(groups[i].kind)
           << ",\"tier\":" << groups[i].tier << ",\"calls\":" << groups[i].calls
           << ",\"compiled_calls\":" << groups[i].compiled_calls << ",\"versions\":" << groups[i].versions
           << ",\"total_ms\":" << num(groups[i].total_ms) << ",\"compiles_by_tier\":[" << groups[i].compiles_by_tier[0]
           << "," << groups[i].compiles_by_tier[1] << "," << groups[i].compiles_by_tier[2] << "],\"compile_ms_by_tier\":["
           << num(groups[i].compile_ms_by_tier[0]) << "," << num(groups[i].compile_ms_by_tier[1]) << ","
           << num(groups[i].compile_ms_by_tier[2]) << "],\"note\":" << quote(groups[i].note) << "}";
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
    os << "{\"functions\":" << functions << ",\"calls\":" << calls << ",\"calls_by_tier\":" << array(calls_by_tier)
       << ",\"compiles\":" << compiles << ",\"compile_failures\":" << compile_failures << ",\"compile_ms\":" << num(compile_ms)
       << ",\"guard_failures\":" << guard_failures << ",\"deopts\":" << deopts << ",\"specializations\":" << specializations
       << ",\"code_cache_bytes\":" << code_cache_bytes << ",\"code_cache_limit_bytes\":" << code_cache_limit_bytes
       << ",\"code_cache_entries\":" << code_cache_entries << ",\"code_cache_hits\":" << code_cache_hits
       << ",\"code_cache_misses\":" << code_cache_misses << ",\"code_cache_evictions\":" << code_cache_evictions
       << ",\"persistent_cache_hits\":" << persistent_cache_hits << ",\"persistent_cache_misses\":" << persistent_cache_misses
       << ",\"persistent_cache_writes\":" << persistent_cache_writes
       << ",\"persistent_cache_rejected\":" << persistent_cache_rejected << "}";
    return os.str();
}

}  // namespace kiln
