#pragma once
// The profile of one fusion group of a function: its calls, the time they took by the kind
// of code that ran them, and the same per param signature (the values of the params its
// kernel reads: the dims of its buffers). The executor records it (jit/exec/run_plan.cpp);
// the tier-up policy decides from it (jit/tiering/tier_manager.h) and FunctionStats reports
// it, so the counters the policy reads are the ones the stats show.
//
// Time is sampled (jit/exec/run_plan.h: timing_weight): a timed call adds its time `weight`
// times over, and `weight` to the timed count, so time / timed is the mean time per call.
// Per signature, every call below tier 2 is recorded; calls of tier-2 code only when timed
// (with their weight: an estimate of the calls), so that steady-state calls of tier-2 code
// take no lock. A call timed while a compile ran counts in its signature's record untimed
// (profiling/compile_activity.h): the group's totals keep its time, the signature's do not.
#include "src/support/limits.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string_view>
#include <vector>

namespace kiln::profiling {

// The kind of code that ran a group's call: the interpreter (tier 0), the baseline
// (tier 1, generic), tier 2 generic in some params, or tier 2 specialised on all of them.
enum class CodeKind : std::uint8_t { interpreted, baseline, generic, specialised };
inline constexpr std::size_t kNumCodeKinds = 4;
std::string_view code_kind_name(CodeKind k);
constexpr std::size_t index_of(CodeKind k) { return static_cast<std::size_t>(k); }

// Calls and sampled time, by kind of code.
struct TimeByKind {
    std::uint64_t calls = 0;                     // see the header: exact below tier 2, estimated on it
    std::array<std::uint64_t, kNumCodeKinds> ns{};     // weighted sampled time
    std::array<std::uint64_t, kNumCodeKinds> timed{};  // weighted timed calls
    std::array<std::uint64_t, kNumCodeKinds> best{};   // the fastest timed call, ns (0: none)
    // Mean time per call on `k` in ns; 0 when no call on `k` was timed.
    double mean_ns(CodeKind k) const {
        const auto i = index_of(k);
        return timed[i] ? static_cast<double>(ns[i]) / static_cast<double>(timed[i]) : 0.0;
    }
    // The fastest timed call on `k` in ns; 0 when none was timed. What the code costs, where
    // the mean also holds whatever else the host did meanwhile (another process, a cold
    // cache after a compile): the tier-up policy compares kinds of code by it.
    double best_ns(CodeKind k) const { return static_cast<double>(best[index_of(k)]); }
};

// One param signature of a group, as recorded.
struct GroupSignature {
    std::vector<std::int64_t> params;
    TimeByKind time;
};

// What recording one call tells the caller about its signature (a copy).
struct SignatureObservation {
    bool kept = false;      // the signature has a record (false: past the limit, `time` is empty)
    TimeByKind time;        // the signature's counts, this call included
    std::size_t distinct = 0;  // signatures the group has seen (kept ones)
};

class GroupProfile {
public:
    // Every call (relaxed atomics: statistics, not synchronisation).
    std::atomic<std::uint64_t> calls{0};           // every call of the group
    std::atomic<std::uint64_t> compiled_calls{0};  // the calls that ran compiled code
    std::atomic<std::uint64_t> ns{0};              // time on every kind of code (sampled)
    std::atomic<std::uint64_t> guard_failures{0};  // calls whose compiled versions' guards all failed
    std::atomic<std::uint64_t> deopts{0};          // calls that ran on a lower tier than the group's best code
    std::atomic<std::uint64_t> image_calls{0};     // compiled calls run image by image (jit/exec/sample_runs.h)

    // calls - compiled_calls (never below 0 while calls run concurrently).
    std::uint64_t interpreted_calls() const {
        const std::uint64_t compiled = compiled_calls.load(std::memory_order_relaxed);
        const std::uint64_t all = calls.load(std::memory_order_relaxed);
        return all > compiled ? all - compiled : 0;
    }
    // A timed call of `ns` nanoseconds on `k`, standing for `weight` calls.
    void record_time(CodeKind k, std::uint64_t call_ns, std::uint64_t weight) {
        ns.fetch_add(weight * call_ns, std::memory_order_relaxed);
        ns_by_kind_[index_of(k)].fetch_add(weight * call_ns, std::memory_order_relaxed);
        timed_by_kind_[index_of(k)].fetch_add(weight, std::memory_order_relaxed);
    }
    // The group's mean time per call on `k` (all signatures), in ns; 0 when never timed there.
    double mean_ns(CodeKind k) const;
    std::uint64_t timed_calls(CodeKind k) const { return timed_by_kind_[index_of(k)].load(std::memory_order_relaxed); }
    // The calls `ns` stands for (every kind).
    std::uint64_t timed_calls() const {
        std::uint64_t n = 0;
        for (const auto& t : timed_by_kind_) n += t.load(std::memory_order_relaxed);
        return n;
    }

    // Records `n_calls` calls at the signature `params` on `k`, with `weight` timed calls of
    // `call_ns` each (weight 0: untimed). Takes the group's signature lock.
    SignatureObservation record_signature(const std::vector<std::int64_t>& params, CodeKind k, std::uint64_t call_ns,
                                          std::uint64_t weight, std::uint64_t n_calls);
    // The kept signatures, most called first.
    std::vector<GroupSignature> signatures() const;
    std::size_t distinct_signatures() const;
    // Per param: whether the kept signatures disagree on its value (a dim that varies).
    std::vector<bool> varying_params() const;

    // Signatures kept per group; past it, calls at new ones count only in the group's totals.
    static constexpr std::size_t kMaxSignatures = limits::group_signatures_kept;

private:
    std::array<std::atomic<std::uint64_t>, kNumCodeKinds> ns_by_kind_{};
    std::array<std::atomic<std::uint64_t>, kNumCodeKinds> timed_by_kind_{};
    mutable std::mutex mu_;
    std::map<std::vector<std::int64_t>, TimeByKind> sigs_;
    std::vector<std::int64_t> first_;  // the first signature recorded
    std::vector<bool> varying_;        // per param: a kept signature differed from first_
};

}  // namespace kiln::profiling
