#pragma once
// Per-function profiles, recorded from the first call: how often each concrete shape
// signature is called, a histogram of each symbolic dim's values, and calls and time per
// node. Observes only; the tiers and the tier manager decide from it. Thread-safe.
#include "src/ir/bindings.h"
#include "src/ir/ir.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace kiln::profiling {

struct SignatureCount {
    std::vector<Shape> shapes;
    std::uint64_t calls = 0;
};

class FunctionProfile {
public:
    explicit FunctionProfile(const ir::Graph& g);

    // One call with these input shapes (and the symbols they bound).
    void record_call(const std::vector<Shape>& shapes, const ir::Bindings& b);
    void record_node(std::size_t node, std::uint64_t ns) {
        nodes_[node].calls.fetch_add(1, std::memory_order_relaxed);
        nodes_[node].ns.fetch_add(ns, std::memory_order_relaxed);
    }

    std::vector<SignatureCount> signatures() const;  // most called first
    std::map<std::string, std::map<std::int64_t, std::uint64_t>> dim_histograms() const;
    std::uint64_t node_calls(std::size_t node) const { return nodes_[node].calls.load(std::memory_order_relaxed); }
    std::uint64_t node_ns(std::size_t node) const { return nodes_[node].ns.load(std::memory_order_relaxed); }

    // Distinct signatures kept; past this, new ones are counted under `other_signatures`.
    static constexpr std::size_t kMaxSignatures = 256;
    std::uint64_t other_signatures() const;

private:
    struct NodeCounters {
        std::atomic<std::uint64_t> calls{0};
        std::atomic<std::uint64_t> ns{0};
    };
    std::unique_ptr<NodeCounters[]> nodes_;
    std::vector<std::string> input_symbols_;  // the symbols named by the inputs' dims

    mutable std::mutex mu_;
    std::map<std::vector<Shape>, std::uint64_t> signatures_;
    std::uint64_t other_ = 0;
    std::map<std::string, std::map<std::int64_t, std::uint64_t>> histograms_;
};

}  // namespace kiln::profiling
