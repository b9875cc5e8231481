// kiln-run: runs an ONNX model through Kiln and prints its output shapes and checksums;
// with --repeat N --stats, the tiers reached, compile times and latency percentiles; with
// --per-call, each call's latency and how many groups had compiled code by then (warm-up).
#include <kiln/kiln.h>
#include <kiln/onnx.h>

#include "inputs.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

const char* kUsage = R"(usage: kiln-run MODEL.onnx [INPUT...] [options]

INPUT is [NAME=]SPEC, where SPEC is a tensor file (FILE.pb: an ONNX TensorProto,
FILE.npy: a NumPy array) or a shape of random values (8x784, 1,3,224,224, scalar).
Inputs without NAME= fill the model's inputs in order. Inputs not given get random
values when their dims are static (or set with --dim).

options:
  --dim SYM=N      size of the symbolic dim SYM for random inputs (repeatable)
  --seed N         seed of random inputs (default 1)
  --repeat N       run the model N times (default 1)
  --steady N       then settle (call the model, each call followed by waiting for the
                   compiles it queued, until 10 calls in a row compiled nothing; at most 300
                   calls or 60 s) and run N more calls: the steady state (--stats and --json
                   report it apart, with the time from the first call until settled)
  --stats          print tiers reached, compiles, compile time and latency percentiles
  --json           also print one JSON line with the figures (for scripts)
  --per-call       print each call's latency, its tier and the groups with compiled code after
                   it, and the first call after which every lowerable group had compiled code
  --groups         print each group's kind, tier, calls and time per call, slowest first
                   (where the time goes): with --steady, the mean over the steady calls
                   (sampled), else the tier-up policy's mean on the group's best tier; and
                   the mean time of the group's tier-2 compiles
  --save-outputs DIR
                   write the outputs of the last call as DIR/NAME.npy
  --warmup         call Function::warmup() first: load (or compile) the tier-2 versions an
                   earlier run recorded in KILN_CACHE_DIR
  --interp         interpreter only (same as KILN_JIT=0)
  --graph          print Kiln's graph of the model
  -h, --help       this text
Engine settings come from the KILN_* environment variables (README, "Environment variables").
)";

struct Args {
    std::string model;
    std::vector<std::string> inputs;
    std::map<std::string, std::int64_t> dims;
    std::uint64_t seed = 1;
    long repeat = 1, steady = 0;
    std::string save_outputs;
    bool stats = false, json = false, interp = false, graph = false, per_call = false, warmup = false, groups = false;
};

[[noreturn]] void usage_error(const std::string& msg) {
    std::cerr << "kiln-run: " << msg << "\n\n" << kUsage;
    std::exit(2);
}

long to_long(const std::string& s, const char* what) {
    try {
        std::size_t n = 0;
        long v = std::stol(s, &n);
        if (n == s.size()) return v;
    } catch (const std::exception&) {
    }
    usage_error(std::string(what) + " expects an integer, got '" + s + "'");
}

Args parse(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        std::string s = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) usage_error(s + " needs a value");
            return argv[++i];
        };
        if (s == "-h" || s == "--help") {
            std::cout << kUsage;
            std::exit(0);
        } else if (s == "--dim") {
            std::string v = value();
            auto eq = v.find('=');
            if (eq == std::string::npos) usage_error("--dim expects SYM=N, got '" + v + "'");
            a.dims[v.substr(0, eq)] = to_long(v.substr(eq + 1), "--dim");
        } else if (s == "--seed") {
            a.seed = static_cast<std::uint64_t>(to_long(value(), "--seed"));
        } else if (s == "--repeat") {
            a.repeat = to_long(value(), "--repeat");
            if (a.repeat < 1) usage_error("--repeat must be >= 1");
        } else if (s == "--steady") {
            a.steady = to_long(value(), "--steady");
            if (a.steady < 0) usage_error("--steady must be >= 0");
        } else if (s == "--stats") {
            a.stats = true;
        } else if (s == "--json") {
            a.json = true;
        } else if (s == "--per-call") {
            a.per_call = true;
        } else if (s == "--groups") {
            a.groups = true;
        } else if (s == "--save-outputs") {
            a.save_outputs = value();
        } else if (s == "--warmup") {
            a.warmup = true;
        } else if (s == "--interp") {
            a.interp = true;
        } else if (s == "--graph") {
            a.graph = true;
        } else if (s.size() > 1 && s[0] == '-' && !(s[1] >= '0' && s[1] <= '9')) {
            usage_error("unknown option " + s);
        } else if (a.model.empty()) {
            a.model = s;
        } else {
            a.inputs.push_back(s);
        }
    }
    if (a.model.empty()) usage_error("no model given");
    return a;
}

double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    auto i = static_cast<std::size_t>(std::min<double>(static_cast<double>(v.size() - 1), std::floor(p * static_cast<double>(v.size() - 1) + 0.5)));
    return v[i];
}

// --groups: each group's time per call, slowest first: with --steady, its mean over the
// steady calls (the change of its sampled time since `before`, taken when they began, over
// the calls that time stands for: dividing by the calls instead read up to 20% low or 7%
// high over 60 calls, as one call in 16 is timed), else the policy's mean on the best tier it
// ran on. (The policy's mean includes the first timed calls of new code, whose first-touch
// costs can double a kernel's figure.)
// The mean time of a group's tier-2 compiles; nothing when it had none.
// cpu: their CPU time on the compiling thread instead of their wall time.
std::optional<double> t2_compile_ms(const kiln::GroupStats& g, bool cpu = false) {
    if (g.compiles_by_tier[2] == 0) return std::nullopt;
    return (cpu ? g.compile_cpu_ms_by_tier[2] : g.compile_ms_by_tier[2]) / static_cast<double>(g.compiles_by_tier[2]);
}

void print_groups(const kiln::FunctionStats& s, const kiln::FunctionStats* before) {
    std::vector<const kiln::GroupStats*> gs;
    for (const auto& g : s.groups) gs.push_back(&g);
    auto us = [&](const kiln::GroupStats& g) {
        const std::size_t i = static_cast<std::size_t>(&g - s.groups.data());
        if (before != nullptr && i < before->groups.size()) {
            const kiln::GroupStats& b = before->groups[i];
            if (g.timed_calls > b.timed_calls && g.total_ms > b.total_ms)
                return std::pair<double, int>{(g.total_ms - b.total_ms) * 1e3 / static_cast<double>(g.timed_calls - b.timed_calls),
                                              g.tier};
        }
        for (std::size_t t = kiln::kNumTiers; t-- > 0;)
            if (g.us_per_call_by_tier[t] > 0) return std::pair<double, int>{g.us_per_call_by_tier[t], static_cast<int>(t)};
        return std::pair<double, int>{g.timed_calls ? g.total_ms * 1e3 / static_cast<double>(g.timed_calls) : 0.0, 0};
    };
    std::stable_sort(gs.begin(), gs.end(), [&](auto* x, auto* y) { return us(*x).first > us(*y).first; });
    double total = 0;
    for (const auto* g : gs) total += us(*g).first;
    std::printf("%-40s %-14s %4s %8s %10s %6s %9s  %s\n", "group", "kind", "tier", "calls", "us/call", "share", "t2 ms", "note");
    for (const auto* g : gs) {
        auto [t_us, tier] = us(*g);
        char t2[32] = "-";
        if (const auto ms = t2_compile_ms(*g)) std::snprintf(t2, sizeof t2, "%.1f", *ms);
        std::printf("%-40s %-14s %4d %8llu %10.1f %5.1f%% %9s  %s\n", g->name.c_str(), g->kind.c_str(), tier,
                    static_cast<unsigned long long>(g->calls), t_us, total > 0 ? 100.0 * t_us / total : 0.0, t2, g->note.c_str());
    }
}

int run(const Args& a) {
    kiln::OnnxModelInfo info = kiln::inspect_onnx(a.model);
    // Inputs: named ones, then positional ones in order.
    std::map<std::string, std::string> specs;
    std::size_t next = 0;
    for (const auto& in : a.inputs) {
        auto eq = in.find('=');
        bool named = false;
        if (eq != std::string::npos)
            for (const auto& vi : info.inputs) named |= vi.name == in.substr(0, eq);
        if (named) {
            specs[in.substr(0, eq)] = in.substr(eq + 1);
            continue;
        }
        while (next < info.inputs.size() && specs.count(info.inputs[next].name)) ++next;
        if (next >= info.inputs.size())
            throw kiln::Error("input '" + in + "': the model has only " + std::to_string(info.inputs.size()) + " inputs");
        specs[info.inputs[next++].name] = in;
    }
    kiln::OnnxOptions options;
    std::vector<kiln::Tensor> args;
    std::uint64_t seed = a.seed;
    for (const auto& vi : info.inputs) {
        kiln::Tensor t;
        auto it = specs.find(vi.name);
        if (it != specs.end()) {
            t = kiln_run::tensor_from_spec(it->second, vi.dtype, seed++);
        } else {
            kiln::Shape shape;
            for (const kiln::Dim& d : vi.dims) {
                if (d.is_static()) {
                    shape.push_back(d.value());
                    continue;
                }
                auto dim = a.dims.find(d.to_string().substr(1));
                if (!d.is_symbol() || dim == a.dims.end())
                    throw kiln::Error("input '" + vi.name + "' has the symbolic dim " + d.to_string() +
                                      ": give the input (NAME=SHAPE or a file) or --dim " + d.to_string().substr(1) + "=N");
                shape.push_back(dim->second);
            }
            t = kiln_run::tensor_from_spec(kiln::shape_to_string(shape), vi.dtype, seed++);
        }
        if (t.dtype() != vi.dtype) t = t.astype(vi.dtype);
        bool load_time = std::find(info.load_time_inputs.begin(), info.load_time_inputs.end(), vi.name) !=
                         info.load_time_inputs.end();
        if (load_time) options.input_values[vi.name] = t;
        else args.push_back(t);
        std::cout << "input '" << vi.name << "': " << kiln::dtype_name(t.dtype()) << kiln::shape_to_string(t.shape())
                  << (load_time ? " (a constant of the graph)" : "") << "\n";
    }

    if (!info.symbols.empty()) {
        std::cout << "symbolic dims:";
        for (const auto& s : info.symbols) std::cout << " ?" << s;
        std::cout << " (sizes from the inputs given, or --dim SYM=N)\n";
    }

    auto t0 = std::chrono::steady_clock::now();
    kiln::Graph g = kiln::load_onnx(a.model, options);
    double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& o : g.outputs())
        std::cout << "output '" << o.name << "': " << kiln::dtype_name(o.dtype) << kiln::dims_to_string(o.dims) << "\n";
    if (a.graph) std::cout << g.to_string({.max_constant_elements = 8});
    kiln::Options opts = kiln::Options::from_env();
    if (a.interp) opts.jit = false;
    kiln::Engine engine(opts);
    kiln::Function f = engine.load(g);

    if (a.warmup) {
        auto w0 = std::chrono::steady_clock::now();
        const std::size_t n = f.warmup();
        std::printf("warmup(): %zu recorded versions held, %.1f ms\n", n,
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - w0).count());
    }
    std::vector<double> ms;
    std::vector<kiln::Tensor> out;
    // --per-call: a group is lowerable when its stats carry no note (why it stays on tier 0).
    long all_compiled_at = 0, all_tier2_at = 0;
    double elapsed_ms = 0, all_compiled_ms = 0, all_tier2_ms = 0;
    kiln::Tiers tiers_before{};
    for (long i = 0; i < a.repeat; ++i) {
        auto c0 = std::chrono::steady_clock::now();
        out = f(args);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count());
        elapsed_ms += ms.back();
        if (!a.per_call && !a.json) continue;
        const kiln::FunctionStats s = f.stats();
        int lowerable = 0, compiled = 0, tier2 = 0, tier = 0;
        for (const auto& gs : s.groups) {
            if (!gs.note.empty()) continue;
            ++lowerable;
            compiled += gs.tier >= 1;
            tier2 += gs.tier >= 2;
        }
        for (std::size_t t = 0; t < kiln::kNumTiers; ++t)
            if (s.calls_by_tier[t] > tiers_before[t]) tier = static_cast<int>(t);
        tiers_before = s.calls_by_tier;
        if (!all_compiled_at && compiled == lowerable) all_compiled_at = i + 1, all_compiled_ms = elapsed_ms;
        if (!all_tier2_at && tier2 == lowerable) all_tier2_at = i + 1, all_tier2_ms = elapsed_ms;
        if (a.per_call)
            std::printf("call %3ld: %9.3f ms, tier %d; lowerable groups with compiled code %d/%d (tier 2: %d), compiles %llu\n",
                    i + 1, ms.back(), tier, compiled, lowerable, tier2, static_cast<unsigned long long>(s.compiles));
    }
    // --steady: the calls after every background compile has finished.
    std::vector<double> steady_ms;
    std::optional<kiln::FunctionStats> steady_before;  // the stats when the steady calls began
    double settled_ms = 0;
    long settle_calls = 0;
    if (a.steady > 0) {
        // The tier-up policy compiles a group when its calls make it pay, so compiles may
        // trickle in for tens of calls after every group has some compiled code.
        const auto s0 = std::chrono::steady_clock::now();
        f.wait_for_compiles();
        std::uint64_t compiles = f.stats().compiles;
        for (long quiet = 0; quiet < 10 && settle_calls < 300; ++settle_calls) {
            if (std::chrono::steady_clock::now() - s0 > std::chrono::seconds(60)) break;
            out = f(args);
            f.wait_for_compiles();
            const std::uint64_t now = f.stats().compiles;
            quiet = now == compiles ? quiet + 1 : 0;
            compiles = now;
        }
        settled_ms = elapsed_ms + std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count();
        steady_before = f.stats();
        for (long i = 0; i < a.steady; ++i) {
            auto c0 = std::chrono::steady_clock::now();
            out = f(args);
            steady_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count());
        }
    }
    if (a.per_call) {
        auto at = [](long call, double t) {
            return call ? "call " + std::to_string(call) + " (" + std::to_string(static_cast<long>(t)) + " ms of calls)"
                        : std::string("never");
        };
        std::printf("every lowerable group had compiled code after %s; tier 2 after %s\n",
                    at(all_compiled_at, all_compiled_ms).c_str(), at(all_tier2_at, all_tier2_ms).c_str());
    }
    std::vector<kiln::ValueInfo> outs = g.outputs();
    for (std::size_t i = 0; i < out.size(); ++i) {
        std::vector<double> v = out[i].to_doubles();
        double sum = 0, abs_sum = 0;
        for (double x : v) {
            sum += x;
            abs_sum += std::fabs(x);
        }
        std::string name = i < info.outputs.size() ? info.outputs[i].name : std::to_string(i);
        if (!a.save_outputs.empty()) kiln_run::write_npy(a.save_outputs + "/" + name + ".npy", out[i]);
        std::printf("output '%s': %s%s sum=%.9g abs_sum=%.9g\n", name.c_str(), std::string(kiln::dtype_name(out[i].dtype())).c_str(),
                    kiln::shape_to_string(out[i].shape()).c_str(), sum, abs_sum);
    }
    kiln::FunctionStats s = f.stats();
    // Tier-2 compile time per group (its mean over the group's tier-2 compiles): median, max.
    std::vector<double> t2, t2_cpu;
    for (const auto& gs : s.groups)
        if (const auto t = t2_compile_ms(gs)) {
            t2.push_back(*t);
            t2_cpu.push_back(*t2_compile_ms(gs, true));  // (present when the wall time is)
        }
    const double t2_median = t2.empty() ? 0.0 : percentile(t2, 0.5);
    const double t2_cpu_median = t2_cpu.empty() ? 0.0 : percentile(t2_cpu, 0.5);
    const double t2_max = t2.empty() ? 0.0 : *std::max_element(t2.begin(), t2.end());
    if (a.stats) {
        int by_tier[3] = {0, 0, 0};
        for (const auto& gs : s.groups) by_tier[std::clamp(gs.tier, 0, 2)]++;
        std::printf("load: %.2f ms (ONNX import)\n", load_ms);
        std::printf("calls: %llu; by tier: interp %llu, tier1 %llu, tier2 %llu\n", static_cast<unsigned long long>(s.calls),
                    static_cast<unsigned long long>(s.calls_by_tier[0]), static_cast<unsigned long long>(s.calls_by_tier[1]),
                    static_cast<unsigned long long>(s.calls_by_tier[2]));
        std::printf("groups: %zu; at tier 0: %d, tier 1: %d, tier 2: %d\n", s.groups.size(), by_tier[0], by_tier[1], by_tier[2]);
        std::printf("compiles: %llu (%llu failed), compile time %.2f ms; tier-2 compile per group: median %.2f ms "
                    "(CPU time %.2f ms), max %.2f ms (%zu groups)\n",
                    static_cast<unsigned long long>(s.compiles), static_cast<unsigned long long>(s.compile_failures), s.compile_ms,
                    t2_median, t2_cpu_median, t2_max, t2.size());
        std::printf("latency ms: first %.4f, min %.4f, p50 %.4f, p90 %.4f, p99 %.4f (over %zu calls)\n", ms.front(),
                    *std::min_element(ms.begin(), ms.end()), percentile(ms, 0.5), percentile(ms, 0.9), percentile(ms, 0.99),
                    ms.size());
        if (!steady_ms.empty())
            std::printf("steady state (settled after %ld more calls, %.1f ms from the first call): p50 %.4f, p90 %.4f (over %zu calls)\n",
                        settle_calls, settled_ms, percentile(steady_ms, 0.5), percentile(steady_ms, 0.9), steady_ms.size());
    }
    if (a.groups) print_groups(s, steady_before ? &*steady_before : nullptr);
    if (a.json) {
        // Steady state: the calls after the first one that found every lowerable group compiled
        // (the last half of the calls when that never happened).
        // (--steady N: its calls, after the background compiles finished.)
        const std::size_t from = all_compiled_at ? static_cast<std::size_t>(all_compiled_at) : ms.size() / 2;
        std::vector<double> steady(ms.begin() + static_cast<std::ptrdiff_t>(std::min(from, ms.size() - 1)), ms.end());
        if (!steady_ms.empty()) steady = steady_ms;
        std::printf("{\"calls\":%zu,\"first_ms\":%.6f,\"min_ms\":%.6f,\"p50_ms\":%.6f,\"p90_ms\":%.6f,\"p99_ms\":%.6f,"
                    "\"steady_calls\":%zu,\"steady_p50_ms\":%.6f,\"steady_p90_ms\":%.6f,"
                    "\"all_compiled_call\":%ld,\"all_compiled_ms\":%.3f,\"settle_calls\":%ld,\"settled_ms\":%.3f,\"load_ms\":%.3f,"
                    "\"compiles\":%llu,\"compile_failures\":%llu,\"compile_ms\":%.3f,\"t2_compile_median_ms\":%.3f,"
                    "\"t2_compile_cpu_median_ms\":%.3f,\"t2_compile_max_ms\":%.3f,\"calls_tier2\":%llu}\n",
                    ms.size(), ms.front(), *std::min_element(ms.begin(), ms.end()), percentile(ms, 0.5), percentile(ms, 0.9),
                    percentile(ms, 0.99), steady.size(), percentile(steady, 0.5), percentile(steady, 0.9), all_compiled_at,
                    all_compiled_ms, settle_calls, settled_ms, load_ms, static_cast<unsigned long long>(s.compiles),
                    static_cast<unsigned long long>(s.compile_failures), s.compile_ms, t2_median, t2_cpu_median,
                    t2_max, static_cast<unsigned long long>(s.calls_by_tier[2]));
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Args a = parse(argc, argv);
    try {
        return run(a);
    } catch (const kiln::Error& e) {
        std::cerr << "kiln-run: " << e.what() << "\n";
        return 1;
    }
}
