#include <kiln/options.h>

#include "src/cpu/gemm.h"
#include "src/cpu/winograd.h"
#include "src/support/check.h"
#include "src/support/log.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string_view>

namespace kiln {
namespace {

const std::vector<std::string> kDumpKinds = {"graph", "groups", "kir", "llvm", "asm", "perf", "cuda", "hip"};
const std::vector<std::string> kDevices = {"auto", "cpu", "cuda", "hip"};

[[noreturn]] void bad(const char* var, const std::string& value, const char* accepted) {
    KILN_USER_ERROR(var << "='" << value << "' is malformed: expected " << accepted);
}

void parse_into(const char* var, const std::string& v, const char* accepted, bool& out) {
    if (v == "0") out = false;
    else if (v == "1") out = true;
    else bad(var, v, accepted);
}
void parse_into(const char* var, const std::string& v, const char* accepted, std::int64_t& out) {
    std::int64_t x = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    // Sizes in bytes (KILN_*_BYTES) may end in K, M or G (binary multiples).
    const std::string_view name(var);
    int shift = 0;
    if (name.ends_with("_BYTES") && ec == std::errc() && p + 1 == v.data() + v.size() && x >= 0) {
        switch (*p) {
        case 'K': case 'k': shift = 10; break;
        case 'M': case 'm': shift = 20; break;
        case 'G': case 'g': shift = 30; break;
        default: break;
        }
        if (shift && x <= (INT64_MAX >> shift)) {
            x <<= shift;
            ++p;
        }
    }
    if (v.empty() || ec != std::errc() || p != v.data() + v.size()) bad(var, v, accepted);
    out = x;
}
void parse_into(const char*, const std::string& v, const char*, std::string& out) { out = v; }
void parse_into(const char*, const std::string& v, const char*, std::vector<std::string>& out) {
    out.clear();
    std::stringstream ss(v);
    std::string item;
    while (std::getline(ss, item, ','))
        if (!item.empty()) out.push_back(item);
}

void check_min(const char* var, std::int64_t v, std::int64_t lo, const char* accepted) {
    if (v < lo) bad(var, std::to_string(v), accepted);
}

}  // namespace

Options Options::from_env() {
    Options o;
#define KILN_FLAG(var, field, kind, accepted)                      \
    if (const char* v = std::getenv(#var)) parse_into(#var, v, accepted, o.field);
#include "jit/api/env_flags.def"
    // KILN_CPU_ISA is process-wide (src/cpu/gemm.h reads it once); checked here so that a
    // malformed value is an error, not silently no cap.
    if (const char* v = std::getenv("KILN_CPU_ISA"); v && !cpu::parse_cpu_isa_cap(v))
        bad("KILN_CPU_ISA", v, "auto, avx2 or avx512");
    // KILN_WINOGRAD likewise (src/cpu/winograd.h reads it once).
    if (const char* v = std::getenv("KILN_WINOGRAD"); v && std::string_view(v) != "0" && std::string_view(v) != "1")
        bad("KILN_WINOGRAD", v, "0 or 1");
    o.validate();
    return o;
}

const char* cpu_isa() { return cpu::cpu_isa_name(cpu::kernel_cpu_isa()); }

void Options::validate() const {
    check_min("KILN_TIER1_THRESHOLD", tier1_threshold, 0, "an integer >= 0");
    check_min("KILN_TIER2_THRESHOLD", tier2_threshold, 0, "an integer >= 0");
    check_min("KILN_MAX_SPECIALIZATIONS", max_specializations, 0, "an integer >= 0");
    check_min("KILN_COMPILE_THREADS", compile_threads, 1, "an integer >= 1");
    check_min("KILN_NUM_THREADS", num_threads, 0, "an integer >= 0 (0 = all cores)");
    check_min("KILN_CODE_CACHE_BYTES", code_cache_bytes, 0,
              "an integer >= 0, optionally with a K, M or G suffix (0 = unbounded)");
    check_min("KILN_GPU_MEMORY_BYTES", gpu_memory_bytes, 0,
              "an integer >= 0, optionally with a K, M or G suffix (0 = unbounded)");
    if (tierup != "time" && tierup != "count") bad("KILN_TIERUP", tierup, "time or count");
    if (nchwc != "auto" && nchwc != "0" && nchwc != "1") bad("KILN_NCHWC", nchwc, "auto, 0 or 1");
    if (sample_runs != "auto" && sample_runs != "0" && sample_runs != "1") bad("KILN_SAMPLE_RUNS", sample_runs, "auto, 0 or 1");
    if (std::find(kDevices.begin(), kDevices.end(), device) == kDevices.end())
        bad("KILN_DEVICE", device, "auto, cpu, cuda or hip");
    if (!support::is_log_level(log_level)) bad("KILN_LOG", log_level, "off, error, warn, info, debug or trace");
    for (const auto& d : dump)
        if (std::find(kDumpKinds.begin(), kDumpKinds.end(), d) == kDumpKinds.end())
            KILN_USER_ERROR("KILN_DUMP lists '" << d << "', which is not one of graph, groups, kir, llvm, asm, perf, cuda, hip");
    KILN_USER_CHECK(!dump_dir.empty(), "KILN_DUMP_DIR='' is malformed: expected a directory path");
}

bool Options::dumps(const std::string& what) const { return std::find(dump.begin(), dump.end(), what) != dump.end(); }

std::string Options::to_string() const {
    std::ostringstream os;
    auto put = [&](const char* name, const auto& v) {
        using V = std::decay_t<decltype(v)>;
        os << (os.tellp() > 0 ? " " : "") << name << "=";
        if constexpr (std::is_same_v<V, std::vector<std::string>>) {
            for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
        } else {
            os << v;
        }
    };
#define KILN_FLAG(var, field, kind, accepted) put(#field, field);
#include "jit/api/env_flags.def"
    return os.str();
}

}  // namespace kiln
