#pragma once
// Shared by the benchmark programs (not part of the library): timing of repeated calls,
// the thread count, and the machine-readable result lines that bench/report.py reads.
//
// Timing method (the same in bench/torch_workloads.py): after the caller's warm-up, the
// body is calibrated to run `iters` times per repetition so that one repetition lasts at
// least `min_rep_ms`; then `reps` repetitions are timed, as many as fit in `budget_ms`
// but at least `min_reps` and at most `max_reps`. Reported: the median and the 10th and
// 90th percentiles (linear interpolation) of the time per call over the repetitions.
//
// Result lines are `RESULT key=value key=value ...` with no spaces inside values.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace kiln_bench {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct TimingPlan {
    int min_reps = 5;
    int max_reps = 30;
    double budget_ms = 1500.0;  // time spent on the timed repetitions, roughly
    double min_rep_ms = 2.0;    // shorter calls are batched into one repetition
};

struct Timing {
    double median_ms = 0, p10_ms = 0, p90_ms = 0;
    int reps = 0;
    std::int64_t iters = 0;  // calls per repetition
};

// q in [0, 1] of sorted samples, interpolating linearly between neighbours.
inline double percentile(const std::vector<double>& sorted, double q) {
    if (sorted.empty()) return NAN;
    const double pos = q * double(sorted.size() - 1);
    const std::size_t lo = static_cast<std::size_t>(std::floor(pos));
    const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - double(lo));
}

// Times `body` (one call per invocation). The caller has already warmed it up.
template <class F> Timing time_calls(F&& body, const TimingPlan& plan) {
    // Calibrate: double the batch until it takes a measurable time.
    std::int64_t iters = 1;
    double elapsed = 0;
    for (;;) {
        const auto t0 = Clock::now();
        for (std::int64_t i = 0; i < iters; ++i) body();
        elapsed = ms_since(t0);
        if (elapsed >= plan.min_rep_ms / 2 || iters >= (std::int64_t{1} << 30)) break;
        iters *= 2;
    }
    const double per_call = elapsed / double(iters);
    iters = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(plan.min_rep_ms / std::max(per_call, 1e-9))));
    const double rep_ms = per_call * double(iters);
    int reps = static_cast<int>(plan.budget_ms / std::max(rep_ms, 1e-9));
    reps = std::clamp(reps, plan.min_reps, plan.max_reps);

    std::vector<double> samples;
    samples.reserve(static_cast<std::size_t>(reps));
    for (int r = 0; r < reps; ++r) {
        const auto t0 = Clock::now();
        for (std::int64_t i = 0; i < iters; ++i) body();
        samples.push_back(ms_since(t0) / double(iters));
    }
    std::sort(samples.begin(), samples.end());
    Timing t;
    t.median_ms = percentile(samples, 0.5);
    t.p10_ms = percentile(samples, 0.1);
    t.p90_ms = percentile(samples, 0.9);
    t.reps = reps;
    t.iters = iters;
    return t;
}

// KILN_NUM_THREADS as Kiln reads it: unset or 0 means every core.
inline int threads_from_env() {
    const char* s = std::getenv("KILN_NUM_THREADS");
    long v = 0;
    if (s != nullptr && *s != '\0') {
        char* end = nullptr;
        v = std::strtol(s, &end, 10);
        if (end == s || *end != '\0' || v < 0) v = 0;
    }
    if (v == 0) v = static_cast<long>(std::max(1u, std::thread::hardware_concurrency()));
    return static_cast<int>(v);
}

// Splits [0, n) into `threads` contiguous parts and runs fn(begin, end) on each, on
// std::threads (the calling thread takes the first part).
template <class F> void parallel_parts(std::int64_t n, int threads, F&& fn) {
    if (threads <= 1 || n < 2) {
        fn(std::int64_t{0}, n);
        return;
    }
    std::vector<std::thread> pool;
    const std::int64_t parts = std::min<std::int64_t>(threads, n);
    for (std::int64_t p = 1; p < parts; ++p)
        pool.emplace_back([&fn, n, parts, p] { fn(n * p / parts, n * (p + 1) / parts); });
    fn(std::int64_t{0}, n / parts);
    for (std::thread& t : pool) t.join();
}

// One `RESULT ...` line, built field by field.
class Result {
public:
    Result(const std::string& name, const std::string& impl) { line_ = "RESULT name=" + name + " impl=" + impl; }
    Result& add(const std::string& key, const std::string& value) {
        line_ += " " + key + "=" + (value.empty() ? std::string("-") : value);
        return *this;
    }
    Result& add(const std::string& key, double value, int precision = 4) {
        char buf[64];
        if (std::isfinite(value)) std::snprintf(buf, sizeof buf, "%.*g", precision, value);
        else std::snprintf(buf, sizeof buf, "n/a");
        return add(key, std::string(buf));
    }
    Result& add_int(const std::string& key, std::int64_t value) { return add(key, std::to_string(value)); }
    Result& timing(const Timing& t) {
        add("ms", t.median_ms, 5).add("p10", t.p10_ms, 5).add("p90", t.p90_ms, 5);
        return add_int("reps", t.reps).add_int("iters", t.iters);
    }
    void print() const {
        std::printf("%s\n", line_.c_str());
        std::fflush(stdout);
    }

private:
    std::string line_;
};

}  // namespace kiln_bench
