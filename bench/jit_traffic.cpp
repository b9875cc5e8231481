// jit_traffic: how the JIT serves dynamic-shape traffic, measured in one run. For each
// workload (the transformer block with a symbolic sequence length, the MLP with a symbolic
// batch; bench/workloads.h) and each traffic pattern, a fresh Engine (options from the
// environment, as an embedder's) loads the graph and serves N calls whose sizes follow the
// pattern; every call is timed. Then the function the traffic left behind is compared, at a
// few fixed sizes, with a function warmed for that one size in a fresh engine and with the
// interpreter alone.
//
//   usage: jit_traffic [--quick] [--only SUBSTRING] [--calls N] [--seed S]
//                      [--stats-budget F] [--tol REL_ERR]
//
// Patterns (sizes are 1..512 for the transformer's length, 1..64 for the MLP's batch):
//   uniform  each size equally likely
//   zipf     P(size = k) proportional to k^-1.1: the small sizes are the common ones
//   decode   1, 2, 3, ... up to the largest size, then again from 1 (a growing sequence)
// The sizes are drawn from a fixed-seed generator (--seed), the same on every machine. Each
// size's input is generated once (Tensor::randn) before the calls; calls write into
// caller-owned outputs (f.run).
//
// What a call is counted as: FunctionStats is read before and after a call (outside its
// timing). A group "ran compiled" in that call when its compiled_calls grew as much as its
// calls; the call "ran fully compiled" when every group that ran and can be compiled (its
// kind is not opaque and it has no note saying why it stays on the interpreter) ran compiled.
// Reading the stats costs time on the calling thread (measured and printed); they are read
// around every call while that costs at most --stats-budget (default 0.05) of the time spent
// in calls so far, else around as many calls as fit in that budget: those are the "checked"
// calls (`sampled` below). Window boundaries always read them: per window, the calls per tier
// (calls_by_tier) and the share of group calls that ran compiled are exact.
//
// Prints a table per run and `RESULT name=<workload>_<pattern> impl=kiln kind=...` lines:
//   kind=window   from, to (1-based call indices), p50_ms, p99_ms, mean_ms, full (share of
//                 the checked calls of the window that ran fully compiled), sampled,
//                 grp_compiled (compiled group calls / group calls of compilable groups),
//                 t0, t1, t2 (calls_by_tier of the window), compiles (the function's, so far),
//                 elapsed_s (wall time since the first call began, stats reads included)
//   kind=summary  the whole run: shares, compiles, compile_ms, max_group_compiles, calls per
//                 tier, guard failures, deopts, the first fully compiled call, the cost of
//                 a stats() read, the time wait_for_compiles() took after the traffic
//   kind=group    per group at the end: kind, tier, calls, compiled_calls, total_ms (the
//                 runtime times one group call in 16 and weighs it 16), compiles by tier
//   kind=steady   per fixed size, after wait_for_compiles(): the median time of the
//                 traffic-served function, of a function in a fresh engine warmed for that
//                 size only (warmup, wait_for_compiles, 3 calls), of the interpreter alone
//                 (KILN_JIT=0), their calls alternating; their ratios; err and fixed_err
//                 (max |out - interpreter| / max |interpreter|, checked against --tol)
// Exits non-zero if an output differs from the interpreter's.
#include "bench_util.h"
#include "workloads.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace {

using kiln::Tensor;
using kiln_bench::Clock;
using kiln_bench::Result;
using I64 = std::int64_t;

struct Settings {
    bool quick = false;
    std::string only;
    I64 calls = -1;  // -1: the workload's default
    std::uint64_t seed = 1;
    double stats_budget = 0.05;
    double tol = 1e-3;
};

// ---------------------------------------------------------------- workloads and inputs

struct Workload {
    std::string name;       // "xformer", "mlp"
    std::string label;
    std::string size_name;  // "length", "batch"
    kiln::Graph graph;
    I64 max_size = 0;
    I64 default_calls = 0, quick_calls = 0;
    std::vector<I64> steady_sizes;
    std::function<kiln::Shape(I64)> in_shape, out_shape;
    // Per size, generated once and shared by every run of this workload.
    struct IO {
        std::vector<Tensor> in, out;
    };
    std::map<I64, IO> io;
    IO& at(I64 size) {
        auto it = io.find(size);
        if (it == io.end())
            it = io.emplace(size, IO{{Tensor::randn(in_shape(size), 1000 + static_cast<std::uint64_t>(size))},
                                     {Tensor::empty(out_shape(size))}})
                     .first;
        return it->second;
    }
    // The peers of the steady-state comparison, made once per workload and kept: the
    // interpreter alone (KILN_JIT=0), and per steady size a function in a fresh engine
    // warmed for that size only.
    struct Peer {
        std::unique_ptr<kiln::Engine> engine;
        kiln::Function f;
    };
    Peer interp;
    std::map<I64, Peer> fixed;
    Peer& interp_peer() {
        if (!interp.engine) {
            kiln::Options o = kiln::Options::from_env();
            o.jit = false;
            interp.engine = std::make_unique<kiln::Engine>(o);
            interp.f = interp.engine->load(graph);
        }
        return interp;
    }
    Peer& fixed_peer(I64 size) {
        Peer& p = fixed[size];
        if (!p.engine) {
            p.engine = std::make_unique<kiln::Engine>();  // options from the environment
            p.f = p.engine->load(graph);
            p.f.warmup({{in_shape(size)}});
            p.f.wait_for_compiles();
            IO& data = at(size);
            for (int r = 0; r < 3; ++r) p.f.run(data.in, data.out);
        }
        return p;
    }
};

Workload transformer_workload() {
    using T = kiln_bench::Transformer;
    Workload w;
    w.name = "xformer";
    w.label = "transformer block d=256, 4 heads, FFN 1024, batch 1, ?seq";
    w.size_name = "length";
    w.graph = kiln_bench::make_transformer().graph;
    w.max_size = 512;
    w.default_calls = 2000;
    w.quick_calls = 300;
    w.steady_sizes = {8, 32, 128, 512};
    w.in_shape = [](I64 s) { return kiln::Shape{1, s, T::D}; };
    w.out_shape = [](I64 s) { return kiln::Shape{1, s, T::D}; };
    return w;
}

Workload mlp_workload() {
    using M = kiln_bench::Mlp;
    Workload w;
    w.name = "mlp";
    w.label = "MLP 784-1024-1024-10, ?batch";
    w.size_name = "batch";
    w.graph = kiln_bench::make_mlp().graph;
    w.max_size = 64;
    w.default_calls = 5000;
    w.quick_calls = 1000;
    w.steady_sizes = {1, 8, 64};
    w.in_shape = [](I64 b) { return kiln::Shape{b, M::d0}; };
    w.out_shape = [](I64 b) { return kiln::Shape{b, M::d3}; };
    return w;
}

// ---------------------------------------------------------------- traffic patterns

const char* const kPatterns[] = {"uniform", "zipf", "decode"};
constexpr double kZipfExponent = 1.1;

// The sizes of n calls, from a generator seeded with (seed, run name). The draws are made
// from the generator's raw 64-bit output (not std:: distributions, whose results differ
// between standard libraries), so a seed gives the same sizes everywhere.
std::vector<I64> traffic(const std::string& pattern, I64 max_size, I64 n, std::uint64_t seed, const std::string& run) {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a of the run's name, mixed with the seed
    for (char c : run) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    std::mt19937_64 rng(h ^ (seed * 0x9E3779B97F4A7C15ull));
    auto unit = [&] { return double(rng() >> 11) * 0x1.0p-53; };  // [0, 1)
    std::vector<double> cdf;                                       // zipf
    if (pattern == "zipf") {
        double s = 0;
        for (I64 k = 1; k <= max_size; ++k) cdf.push_back(s += std::pow(double(k), -kZipfExponent));
    }
    std::vector<I64> sizes(static_cast<std::size_t>(n));
    for (I64 i = 0; i < n; ++i) {
        I64 v = 1;
        if (pattern == "uniform") v = 1 + static_cast<I64>(rng() % static_cast<std::uint64_t>(max_size));
        else if (pattern == "zipf") v = 1 + (std::upper_bound(cdf.begin(), cdf.end(), unit() * cdf.back()) - cdf.begin());
        else v = 1 + i % max_size;  // decode
        sizes[static_cast<std::size_t>(i)] = std::min(v, max_size);
    }
    return sizes;
}

std::string pattern_text(const std::string& pattern, const Workload& w) {
    const std::string range = "1.." + std::to_string(w.max_size);
    if (pattern == "uniform") return w.size_name + " uniform in " + range;
    if (pattern == "zipf") return w.size_name + " Zipf (exponent 1.1) over " + range + ", small sizes most common";
    return w.size_name + " growing 1, 2, ..., " + std::to_string(w.max_size) + ", then again";
}

// Window ends (1-based, inclusive): 50, 200, 500, then every 500 (every 1000 past 2500 calls).
std::vector<I64> window_ends(I64 n) {
    std::vector<I64> ends;
    for (I64 e : {50, 200, 500})
        if (e < n) ends.push_back(e);
    const I64 step = n <= 2500 ? 500 : 1000;
    for (I64 e = 500 + step; e < n; e += step) ends.push_back(e);
    ends.push_back(n);
    return ends;
}

// ---------------------------------------------------------------- measuring helpers

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return kiln_bench::percentile(v, 0.5);
}

// max |got - ref| / max |ref|.
double rel_err(const Tensor& got, const Tensor& ref) {
    const std::vector<double> g = got.to_doubles(), r = ref.to_doubles();
    if (g.size() != r.size()) return INFINITY;
    double num = 0, den = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
        const double d = std::fabs(g[i] - r[i]);
        num = std::isnan(d) ? INFINITY : std::max(num, d);
        den = std::max(den, std::fabs(r[i]));
    }
    return den > 0 ? num / den : num;
}

std::string tiers_text(const kiln::Tiers& before, const kiln::Tiers& after) {
    std::string s;
    for (std::size_t k = 0; k < kiln::kNumTiers; ++k) s += (k ? "/" : "") + std::to_string(after[k] - before[k]);
    return s;
}

// What one read of the stats keeps: per group, calls and compiled calls and time.
struct Snapshot {
    kiln::Tiers calls_by_tier{};
    std::uint64_t compiles = 0;
    std::vector<std::uint64_t> calls, compiled;
    std::vector<double> ms;
};

Snapshot snapshot(const kiln::FunctionStats& s) {
    Snapshot n;
    n.calls_by_tier = s.calls_by_tier;
    n.compiles = s.compiles;
    for (const kiln::GroupStats& g : s.groups) {
        n.calls.push_back(g.calls);
        n.compiled.push_back(g.compiled_calls);
        n.ms.push_back(g.total_ms);
    }
    return n;
}

bool compilable(const kiln::GroupStats& g) { return g.kind != "opaque" && g.note.empty(); }

// The first three fields of /proc/loadavg: how busy the machine was (1, 5, 15 minutes).
std::string load_average() {
    std::ifstream in("/proc/loadavg");
    std::string a, b, c;
    if (!(in >> a >> b >> c)) return "unknown";
    return a + " " + b + " " + c;
}

// ---------------------------------------------------------------- one run: a workload under one pattern

struct Bench {
    Settings settings;
    int threads = 1;
    std::string impl;
    int failures = 0;
};

// One run: a fresh engine serves the traffic, then the summary, the groups and the steady
// state are printed.
class TrafficRun {
public:
    TrafficRun(Bench& b, Workload& w, const std::string& pattern)
        : b_(b), w_(w), pattern_(pattern), run_(w.name + "_" + pattern),
          n_(b.settings.calls > 0 ? b.settings.calls : b.settings.quick ? w.quick_calls : w.default_calls) {}

    void go() {
        const std::vector<I64> sizes = traffic(pattern_, w_.max_size, n_, b_.settings.seed, run_);
        for (I64 s : sizes) (void)w_.at(s);  // inputs generated before any call
        for (I64 s : w_.steady_sizes) (void)w_.at(s);
        kiln::Engine engine;  // kiln::Options::from_env(), as an embedder's
        f_ = engine.load(w_.graph);
        header();
        serve(sizes);
        summary();
        steady_state();
        f_ = kiln::Function();  // before its engine goes
    }

private:
    struct Window {
        I64 from = 1;
        std::vector<double> ms;
        I64 sampled = 0, full = 0;
    };

    // The run's title, and which groups can run compiled.
    void header() {
        const kiln::FunctionStats s0 = f_.stats();
        std::string can_names, cannot_names;
        for (const kiln::GroupStats& g : s0.groups) {
            can_.push_back(compilable(g));
            std::string& list = can_.back() ? can_names : cannot_names;
            list += (list.empty() ? "" : " ") + g.name;
            if (!can_.back()) list += " (" + (g.note.empty() ? g.kind : g.note) + ")";
        }
        std::printf("\n== %s: %s; %s; %lld calls (seed %llu)\n", run_.c_str(), w_.label.c_str(), pattern_text(pattern_, w_).c_str(),
                    static_cast<long long>(n_), static_cast<unsigned long long>(b_.settings.seed));
        std::printf("   load average at the start: %s\n", load_average().c_str());
        std::printf("   groups: %zu; can run compiled: %s\n", s0.groups.size(), can_names.empty() ? "none" : can_names.c_str());
        if (!cannot_names.empty()) std::printf("   stay on the interpreter: %s\n", cannot_names.c_str());
        std::printf("   %-11s %9s %9s %9s %15s %12s %16s %9s %10s\n", "calls", "p50 ms", "p99 ms", "mean ms", "fully compiled",
                    "grp compiled", "calls t0/t1/t2", "compiles", "elapsed s");
        std::fflush(stdout);
    }

    Snapshot read() {
        const auto t0 = Clock::now();
        Snapshot s = snapshot(f_.stats());
        const double ms = kiln_bench::ms_since(t0);
        stats_ms_ += ms;
        stats_us_.push_back(ms * 1e3);
        return s;
    }

    // The calls, each timed; the stats read around them within the budget (header comment).
    void serve(const std::vector<I64>& sizes) {
        Snapshot prev = read(), window_start = prev;
        bool have_prev = true;
        const std::vector<I64> ends = window_ends(n_);
        std::size_t wi = 0;
        Window win;
        t0_ = Clock::now();
        for (I64 i = 0; i < n_; ++i) {
            Workload::IO& io = w_.at(sizes[static_cast<std::size_t>(i)]);
            const bool boundary = i + 1 == ends[wi];
            const bool sample = i == 0 || stats_ms_ <= b_.settings.stats_budget * calls_ms_;
            if (sample && !have_prev) prev = read();
            const auto t0 = Clock::now();
            f_.run(io.in, io.out);
            const double ms = kiln_bench::ms_since(t0);
            calls_ms_ += ms;
            win.ms.push_back(ms);
            if (first_ms_.size() < kFirstCalls) first_ms_.push_back(ms);
            have_prev = sample || boundary;
            if (!have_prev) continue;
            Snapshot cur = read();
            if (sample && classify(prev, cur, i + 1, ms)) ++win.full;
            win.sampled += sample ? 1 : 0;
            prev = std::move(cur);
            if (!boundary) continue;
            window_line(win, i + 1, window_start, prev);
            window_start = prev;
            win = Window{};
            win.from = i + 2;
            ++wi;
        }
        loop_ms_ = kiln_bench::ms_since(t0_);
    }

    // Call `index` (1-based) between two reads: did it run fully compiled? Adds it to the totals.
    bool classify(const Snapshot& before, const Snapshot& after, I64 index, double ms) {
        int ran = 0, compiled = 0;
        for (std::size_t g = 0; g < can_.size(); ++g) {
            const std::uint64_t dc = after.calls[g] - before.calls[g], dk = after.compiled[g] - before.compiled[g];
            const double dms = after.ms[g] - before.ms[g];
            grp_ms_ += dms;
            if (dc > 0 && dk == dc) grp_compiled_ms_ += dms;
            if (!can_[g] || dc == 0) continue;
            ++ran;
            if (dk == dc) ++compiled;
        }
        const bool full = ran > 0 && compiled == ran;
        ++sampled_;
        sampled_ms_ += ms;
        if (full) {
            ++full_;
            full_ms_ += ms;
            if (first_full_ < 0) first_full_ = index, first_full_s_ = kiln_bench::ms_since(t0_) / 1e3;
        } else {
            last_not_full_ = index;
        }
        return full;
    }

    void window_line(const Window& win, I64 to, const Snapshot& start, const Snapshot& end) {
        const double elapsed_s = kiln_bench::ms_since(t0_) / 1e3;
        std::vector<double> sorted = win.ms;
        std::sort(sorted.begin(), sorted.end());
        double sum = 0;
        for (double v : sorted) sum += v;
        std::uint64_t gc = 0, gk = 0;
        for (std::size_t g = 0; g < can_.size(); ++g)
            if (can_[g]) gc += end.calls[g] - start.calls[g], gk += end.compiled[g] - start.compiled[g];
        const double p50 = kiln_bench::percentile(sorted, 0.5), p99 = kiln_bench::percentile(sorted, 0.99);
        const double mean = sum / double(sorted.size());
        const double full_share = win.sampled ? double(win.full) / double(win.sampled) : NAN;
        const double grp_share = gc ? double(gk) / double(gc) : NAN;
        const std::string tiers = tiers_text(start.calls_by_tier, end.calls_by_tier);
        char range[32], fc[32];
        std::snprintf(range, sizeof range, "%lld-%lld", static_cast<long long>(win.from), static_cast<long long>(to));
        std::snprintf(fc, sizeof fc, "%5.1f%% (%lld)", 100.0 * full_share, static_cast<long long>(win.sampled));
        std::printf("   %-11s %9.4g %9.4g %9.4g %15s %11.1f%% %16s %9llu %10.2f\n", range, p50, p99, mean, fc, 100.0 * grp_share,
                    tiers.c_str(), static_cast<unsigned long long>(end.compiles), elapsed_s);
        Result r(run_, b_.impl);
        r.add("kind", "window").add_int("from", win.from).add_int("to", to).add("p50_ms", p50, 5).add("p99_ms", p99, 5);
        r.add("mean_ms", mean, 5).add("full", full_share, 4).add_int("sampled", win.sampled).add("grp_compiled", grp_share, 4);
        for (std::size_t k = 0; k < kiln::kNumTiers; ++k)
            r.add_int("t" + std::to_string(k), static_cast<I64>(end.calls_by_tier[k] - start.calls_by_tier[k]));
        r.add_int("compiles", static_cast<I64>(end.compiles)).add("elapsed_s", elapsed_s, 5).add_int("threads", b_.threads);
        r.print();
    }

    // The whole run, the compiles still queued after it, and each group.
    void summary() {
        const kiln::FunctionStats end = f_.stats();
        const auto wait_t0 = Clock::now();
        f_.wait_for_compiles();
        const double wait_ms = kiln_bench::ms_since(wait_t0);
        const std::uint64_t compiles_after = f_.stats().compiles;
        std::uint64_t gc = 0, gk = 0, max_group_compiles = 0;
        for (std::size_t g = 0; g < end.groups.size(); ++g) {
            const kiln::GroupStats& gs = end.groups[g];
            if (g < can_.size() && can_[g]) gc += gs.calls, gk += gs.compiled_calls;
            std::uint64_t c = 0;
            for (std::uint64_t v : gs.compiles_by_tier) c += v;
            max_group_compiles = std::max(max_group_compiles, c);
        }
        const double stats_med_us = median(stats_us_);
        const double full_share = sampled_ ? double(full_) / double(sampled_) : NAN;
        const double full_time = sampled_ms_ > 0 ? full_ms_ / sampled_ms_ : NAN;
        const double grp_share = gc ? double(gk) / double(gc) : NAN;
        const double grp_time = grp_ms_ > 0 ? grp_compiled_ms_ / grp_ms_ : NAN;
        using ULL = unsigned long long;
        std::printf("   summary: %lld calls, %.2f s in calls (%.2f s with the stats reads); fully compiled: %.1f%% of the %lld checked "
                    "calls, %.1f%% of their time; group calls compiled: %.1f%%; group time on compiled code ~%.1f%% (from the "
                    "runtime's sampled group timings)\n",
                    static_cast<long long>(n_), calls_ms_ / 1e3, loop_ms_ / 1e3, 100.0 * full_share, static_cast<long long>(sampled_),
                    100.0 * full_time, 100.0 * grp_share, 100.0 * grp_time);
        {
            std::vector<double> first = first_ms_;
            std::sort(first.begin(), first.end());
            std::printf("   first %zu calls: p50 %.4g ms, p99 %.4g ms (compare with KILN_JIT=0 for the interpreter's)\n",
                        first.size(), kiln_bench::percentile(first, 0.5), kiln_bench::percentile(first, 0.99));
        }
        if (first_full_ > 0)
            std::printf("   first fully compiled call: #%lld (%.3g s after the first call began); last checked call not fully "
                        "compiled: %s\n",
                        static_cast<long long>(first_full_), first_full_s_,
                        last_not_full_ > 0 ? ("#" + std::to_string(last_not_full_)).c_str() : "none");
        else
            std::printf("   no checked call ran fully compiled\n");
        std::printf("   compiles: %llu (%.1f ms), failures %llu, max per group %llu; calls by tier t0/t1/t2: %llu/%llu/%llu; guard "
                    "failures %llu, deopts %llu, specializations %llu\n",
                    ULL(end.compiles), end.compile_ms, ULL(end.compile_failures), ULL(max_group_compiles), ULL(end.calls_by_tier[0]),
                    ULL(end.calls_by_tier[1]), ULL(end.calls_by_tier[2]), ULL(end.guard_failures), ULL(end.deopts),
                    ULL(end.specializations));
        std::printf("   stats() read: median %.1f us, %zu reads, %.1f%% of the time in calls; wait_for_compiles() after the "
                    "traffic: %.1f ms, %llu compiles more\n",
                    stats_med_us, stats_us_.size(), calls_ms_ > 0 ? 100.0 * stats_ms_ / calls_ms_ : 0.0, wait_ms,
                    ULL(compiles_after - end.compiles));
        if (!end.bailouts.empty()) {
            std::printf("   bailouts:");
            for (const auto& [reason, count] : end.bailouts) std::printf(" %s=%llu", reason.c_str(), ULL(count));
            std::printf("\n");
        }
        Result r(run_, b_.impl);
        r.add("kind", "summary").add_int("calls", n_).add("calls_s", calls_ms_ / 1e3, 5).add("loop_s", loop_ms_ / 1e3, 5);
        r.add("full", full_share, 4).add("full_time", full_time, 4).add_int("sampled", sampled_).add("grp_compiled", grp_share, 4);
        r.add("grp_time_compiled", grp_time, 4).add_int("first_full_call", first_full_).add("first_full_s", first_full_s_, 4);
        r.add_int("last_not_full_call", last_not_full_).add_int("compiles", static_cast<I64>(end.compiles));
        r.add("compile_ms", end.compile_ms, 5).add_int("compile_failures", static_cast<I64>(end.compile_failures));
        r.add_int("max_group_compiles", static_cast<I64>(max_group_compiles));
        for (std::size_t k = 0; k < kiln::kNumTiers; ++k) r.add_int("t" + std::to_string(k), static_cast<I64>(end.calls_by_tier[k]));
        r.add_int("guard_failures", static_cast<I64>(end.guard_failures)).add_int("deopts", static_cast<I64>(end.deopts));
        r.add_int("specializations", static_cast<I64>(end.specializations)).add("stats_us", stats_med_us, 4);
        r.add_int("stats_reads", static_cast<I64>(stats_us_.size())).add("wait_ms", wait_ms, 5);
        r.add_int("compiles_after_wait", static_cast<I64>(compiles_after)).add_int("threads", b_.threads);
        r.print();

        std::printf("   %-24s %-14s %4s %8s %9s %12s %14s\n", "group", "kind", "tier", "calls", "compiled", "ms (sampled)",
                    "compiles t1/t2");
        for (const kiln::GroupStats& g : end.groups) {
            const double share = g.calls ? 100.0 * double(g.compiled_calls) / double(g.calls) : 0.0;
            std::printf("   %-24s %-14s %4d %8llu %8.1f%% %12.1f %8llu/%llu\n", g.name.c_str(), g.kind.c_str(), g.tier, ULL(g.calls), share,
                        g.total_ms, ULL(g.compiles_by_tier[1]), ULL(g.compiles_by_tier[2]));
            Result rg(run_, b_.impl);
            rg.add("kind", "group").add("group", g.name).add("gkind", g.kind).add_int("tier", g.tier);
            rg.add_int("calls", static_cast<I64>(g.calls)).add_int("compiled_calls", static_cast<I64>(g.compiled_calls));
            rg.add("total_ms", g.total_ms, 5).add_int("compiles_t1", static_cast<I64>(g.compiles_by_tier[1]));
            rg.add_int("compiles_t2", static_cast<I64>(g.compiles_by_tier[2])).add_int("threads", b_.threads);
            rg.print();
        }
    }

    // Steady state at fixed sizes: the function the traffic left (its queued compiles done),
    // a fresh function warmed for the one size, and the interpreter. Their calls alternate
    // (one call of each per round, the first rotating) so that a busy machine slows all three
    // alike.
    void steady_state() {
        const int reps = b_.settings.quick ? 9 : 20;
        std::printf("   steady state after the traffic, median of %d calls per size, alternating (fixed: a fresh engine warmed for "
                    "that size only; interp: KILN_JIT=0); calls per tier t0/t1/t2 in brackets:\n",
                    reps);
        std::printf("   %6s %22s %22s %11s %14s %15s %9s\n", w_.size_name.c_str(), "traffic ms", "fixed ms", "interp ms",
                    "traffic÷fixed", "interp÷traffic", "err");
        for (I64 size : w_.steady_sizes) steady_size(size, reps);
        std::printf("   load average at the end: %s\n", load_average().c_str());
        std::fflush(stdout);
    }

    void steady_size(I64 size, int reps) {
        Workload::IO& io = w_.at(size);
        const kiln::Function& fi = w_.interp_peer().f;
        const kiln::Function& ff = w_.fixed_peer(size).f;
        std::vector<Tensor> out_fixed{Tensor::empty(w_.out_shape(size))}, out_interp{Tensor::empty(w_.out_shape(size))};
        fi.run(io.in, out_interp);  // one call to warm the caches
        const kiln::Tiers t_before = f_.stats().calls_by_tier, f_before = ff.stats().calls_by_tier;
        std::vector<double> tt, tf, ti;
        auto timed = [](const kiln::Function& fn, std::span<const Tensor> in, std::span<Tensor> out, std::vector<double>& into) {
            const auto t0 = Clock::now();
            fn.run(in, out);
            into.push_back(kiln_bench::ms_since(t0));
        };
        // Round r starts with function r % 3, so that none always runs after the same one.
        const std::function<void()> order[3] = {[&] { timed(f_, io.in, io.out, tt); }, [&] { timed(ff, io.in, out_fixed, tf); },
                                                [&] { timed(fi, io.in, out_interp, ti); }};
        for (int r = 0; r < reps; ++r)
            for (int k = 0; k < 3; ++k) order[(r + k) % 3]();
        const std::string t_tiers = tiers_text(t_before, f_.stats().calls_by_tier);
        const std::string f_tiers = tiers_text(f_before, ff.stats().calls_by_tier);
        const double t_ms = median(tt), f_ms = median(tf), i_ms = median(ti);
        const double err = rel_err(io.out[0], out_interp[0]), fixed_err = rel_err(out_fixed[0], out_interp[0]);
        const bool ok = err <= b_.settings.tol && fixed_err <= b_.settings.tol;
        if (!ok) {
            ++b_.failures;
            std::fprintf(stderr,
                         "jit_traffic: %s %s %lld: output differs from the interpreter's (traffic-served err %.3g, warmed err %.3g, "
                         "tolerance %.3g)\n",
                         run_.c_str(), w_.size_name.c_str(), static_cast<long long>(size), err, fixed_err, b_.settings.tol);
        }
        char tcol[48], fcol[48];
        std::snprintf(tcol, sizeof tcol, "%.4g [%s]", t_ms, t_tiers.c_str());
        std::snprintf(fcol, sizeof fcol, "%.4g [%s]", f_ms, f_tiers.c_str());
        std::printf("   %6lld %22s %22s %11.4g %14.3g %15.3g %9.2g%s\n", static_cast<long long>(size), tcol, fcol, i_ms, t_ms / f_ms,
                    i_ms / t_ms, std::max(err, fixed_err), ok ? "" : "  MISMATCH");
        Result r(run_, b_.impl);
        r.add("kind", "steady").add_int("size", size).add("traffic_ms", t_ms, 5).add("traffic_tiers", t_tiers);
        r.add("fixed_ms", f_ms, 5).add("fixed_tiers", f_tiers).add("interp_ms", i_ms, 5);
        r.add("traffic_over_fixed", t_ms / f_ms, 4).add("interp_over_traffic", i_ms / t_ms, 4);
        r.add_int("reps", reps).add("err", err, 3).add("fixed_err", fixed_err, 3).add("ok", ok ? "1" : "0");
        r.add_int("threads", b_.threads).print();
    }

    Bench& b_;
    Workload& w_;
    const std::string pattern_, run_;
    const I64 n_;
    kiln::Function f_;
    std::vector<bool> can_;  // per group: can it run compiled?
    Clock::time_point t0_;   // the first call's start
    // Time in calls, in stats reads, and of the whole loop; the stats reads' costs.
    double calls_ms_ = 0, stats_ms_ = 0, loop_ms_ = 0;
    static constexpr std::size_t kFirstCalls = 500;  // the early calls whose p99 the summary prints
    std::vector<double> first_ms_;
    std::vector<double> stats_us_;
    // Over the checked calls: how many, how many fully compiled, their times; the groups'
    // sampled time, all of it and on compiled code.
    I64 sampled_ = 0, full_ = 0, first_full_ = -1, last_not_full_ = -1;
    double sampled_ms_ = 0, full_ms_ = 0, grp_ms_ = 0, grp_compiled_ms_ = 0, first_full_s_ = NAN;
};

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("model name", 0) == 0) {
            const std::size_t c = line.find(':');
            std::string v = c == std::string::npos ? "" : line.substr(c + 1);
            v.erase(0, v.find_first_not_of(" \t"));
            return v;
        }
    return "unknown";
}

int usage(int rc) {
    std::fprintf(rc ? stderr : stdout,
                 "usage: jit_traffic [--quick] [--only SUBSTRING] [--calls N] [--seed S] [--stats-budget F] [--tol REL_ERR]\n"
                 "  runs: xformer_uniform xformer_zipf xformer_decode mlp_uniform mlp_zipf mlp_decode (--only picks by substring)\n");
    return rc;
}

}  // namespace

int main(int argc, char** argv) try {
    Bench b;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has_value = i + 1 < argc;
        if (a == "--quick") b.settings.quick = true;
        else if (a == "--only" && has_value) b.settings.only = argv[++i];
        else if (a == "--calls" && has_value) b.settings.calls = std::stoll(argv[++i]);
        else if (a == "--seed" && has_value) b.settings.seed = std::stoull(argv[++i]);
        else if (a == "--stats-budget" && has_value) b.settings.stats_budget = std::stod(argv[++i]);
        else if (a == "--tol" && has_value) b.settings.tol = std::stod(argv[++i]);
        else return usage(a == "--help" || a == "-h" ? 0 : 2);
    }
    const kiln::Options options = kiln::Options::from_env();
    b.impl = options.jit ? "kiln" : "kiln_interp";
    b.threads = kiln_bench::threads_from_env();
    const char* env_threads = std::getenv("KILN_NUM_THREADS");
    std::printf("# jit_traffic: Kiln %s\n# CPU: %s (%u hardware threads)\n# threads: %d (KILN_NUM_THREADS=%s)\n# options: %s\n",
                kiln::version_string(), cpu_model().c_str(), std::thread::hardware_concurrency(), b.threads,
                env_threads ? env_threads : "unset", options.to_string().c_str());
    std::printf("# calls are timed one by one (steady_clock); p50/p99 over the calls of each window\n");
    std::fflush(stdout);

    const auto t0 = Clock::now();
    for (auto make : {transformer_workload, mlp_workload}) {
        Workload w;
        bool built = false;
        for (const char* p : kPatterns) {
            // Selection by the run's name, before building the workload's graph.
            const std::string name = std::string(make == transformer_workload ? "xformer" : "mlp") + "_" + p;
            if (!b.settings.only.empty() && name.find(b.settings.only) == std::string::npos) continue;
            if (!built) w = make(), built = true;
            TrafficRun(b, w, p).go();
        }
    }
    std::printf("\n# total %.1f s\n", kiln_bench::ms_since(t0) / 1e3);
    if (b.failures != 0) {
        std::fprintf(stderr, "jit_traffic: %d output(s) differ from the interpreter's\n", b.failures);
        return 1;
    }
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "jit_traffic: error: %s\n", e.what());
    return 1;
}
