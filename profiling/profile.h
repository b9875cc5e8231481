#pragma once
// The profile of one function, recorded from the first call: how often each concrete shape
// signature is called, a histogram of each symbolic dim's values, and per fusion group its
// calls, time by kind of code, param signatures, guard failures and deopts
// (profiling/group_profile.h). The executor records it; the JIT's tier-up policy decides
// from it and FunctionStats reports the same counters. Observes only; thread-safe.
//
// Recording a call at a kept signature takes no lock: each kept signature has its own
// relaxed atomic counter (found through a lock-free table, or held by the caller: the
// function's cached shape plans point to theirs), and the dim histograms are derived from
// the signatures when read, not updated per call.
#include "profiling/group_profile.h"
#include "src/ir/bindings.h"
#include "src/ir/ir.h"
#include "src/support/limits.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace kiln::profiling {

struct SignatureCount {
    std::vector<Shape> shapes;
    std::uint64_t calls = 0;
};

class FunctionProfile {
public:
    FunctionProfile(const ir::Graph& g, std::size_t groups);
    FunctionProfile(const FunctionProfile&) = delete;
    FunctionProfile& operator=(const FunctionProfile&) = delete;

    // One kept signature: its shapes, the values of the inputs' symbols, and its calls.
    // Lives as long as the profile.
    class Signature {
    public:
        void record() { calls_.fetch_add(1, std::memory_order_relaxed); }

    private:
        friend class FunctionProfile;
        std::vector<Shape> shapes_;
        std::vector<std::optional<std::int64_t>> values_;  // per input symbol
        std::atomic<std::uint64_t> calls_{0};
    };

    // The kept signature of these shapes (with the symbols they bound), added while fewer
    // than kMaxSignatures are kept; null past that. Lock-free for a kept signature.
    Signature* signature(const std::vector<Shape>& shapes, const ir::Bindings& b);
    // One call at `sig` (from signature()): one relaxed atomic add. Null (a signature past
    // the limit): counted under other_signatures() and in the histograms, under a lock.
    void record_call(Signature* sig, const ir::Bindings& b) {
        if (sig) sig->record();
        else record_other(b);
    }
    // One call with these input shapes (and the symbols they bound).
    void record_call(const std::vector<Shape>& shapes, const ir::Bindings& b) { record_call(signature(shapes, b), b); }
    GroupProfile& group(std::size_t i) { return groups_[i]; }
    const GroupProfile& group(std::size_t i) const { return groups_[i]; }
    std::size_t num_groups() const { return num_groups_; }
    std::uint64_t total_group_ns() const;  // all groups' time

    std::vector<SignatureCount> signatures() const;  // called ones, most called first (then by shapes)
    std::map<std::string, std::map<std::int64_t, std::uint64_t>> dim_histograms() const;

    // Distinct signatures kept; past this, new ones are counted under `other_signatures`.
    // Their dim values still count in the histograms, which keep at most this many values
    // per symbol (a dim that takes many values keeps its first ones).
    static constexpr std::size_t kMaxSignatures = limits::profile_signatures_kept;
    std::uint64_t other_signatures() const;

private:
    void record_other(const ir::Bindings& b);

    std::unique_ptr<GroupProfile[]> groups_;
    std::size_t num_groups_ = 0;
    std::vector<std::string> input_symbols_;  // the symbols named by the inputs' dims

    // Kept signatures by hash of their shapes: open addressing, at most half full; slots
    // are written once (under mu_) and read without a lock.
    static constexpr std::size_t kSlots = 2 * kMaxSignatures;
    static_assert((kSlots & (kSlots - 1)) == 0);
    std::array<std::atomic<Signature*>, kSlots> table_{};
    std::atomic<bool> full_{false};  // kMaxSignatures are kept

    mutable std::mutex mu_;
    std::vector<std::unique_ptr<Signature>> kept_;  // in the order first seen
    std::uint64_t other_ = 0;
    std::map<std::string, std::map<std::int64_t, std::uint64_t>> other_histograms_;  // calls past the limit
};

}  // namespace kiln::profiling
