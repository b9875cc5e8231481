#pragma once
// kiln::Engine loads graphs into kiln::Functions; Functions run calls and report stats.
#include <kiln/graph.h>
#include <kiln/options.h>
#include <kiln/tensor.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln {

namespace detail { class FunctionImpl; class EngineImpl; }

// Tiers 0 (the interpreter), 1 (baseline) and 2 (optimising): the size of arrays by tier.
inline constexpr std::size_t kNumTiers = 3;
using Tiers = std::array<std::uint64_t, kNumTiers>;

// One unit of tiering: a fusion group (an elementwise chain, a row reduction with its
// producers and consumers, a matmul, ...).
struct GroupStats {
    std::string name;              // e.g. "g2.softmax"
    std::string kind;              // elementwise, row_reduction, matmul, conv, opaque
    int tier = 0;                  // the best tier it currently has
    std::uint64_t calls = 0;
    std::uint64_t compiled_calls = 0;  // calls that ran compiled code
    double total_ms = 0.0;         // time spent running it, all tiers
    // The calls total_ms stands for: timing is sampled (one call in 16 timed, counted 16
    // times), so a mean over a window of calls is (change of total_ms) / (change of this).
    std::uint64_t timed_calls = 0;
    std::uint64_t versions = 0;    // compiled versions published
    // Successful compiles of this group by tier (index 1: tier 1, 2: tier 2) and the time
    // they took; code found in the code cache or KILN_CACHE_DIR is not a compile.
    Tiers compiles_by_tier{};
    std::array<double, kNumTiers> compile_ms_by_tier{};
    // The same compiles' CPU time on the thread that ran them: their own work, where
    // compile_ms_by_tier (wall time) also counts the cores they shared with calls.
    std::array<double, kNumTiers> compile_cpu_ms_by_tier{};
    std::string note;              // why it stays on the interpreter, when it does
    // The tier-up policy's view of it (README, "When code is compiled"): the mean time per
    // call on each tier (µs; 0: never timed there), the param signatures it has seen, its
    // specialisations, and the policy's last estimate for its next compile (the time that
    // compile would save over the calls expected, against what it would cost) and decision,
    // in words, e.g. "waits for a tier-2 specialisation: saves 0.31 ms (...), costs 28 ms".
    std::array<double, kNumTiers> us_per_call_by_tier{};
    std::uint64_t signatures = 0;
    std::uint64_t specializations = 0;
    double expected_saving_ms = 0.0;
    double compile_cost_ms = 0.0;
    std::string tierup;
    // On GPUs (the device tier-up policy, README "GPU"): the best tier of its device code on
    // any device (0: none) and the calls that ran device code.
    int gpu_tier = 0;
    std::uint64_t gpu_compiled_calls = 0;
};

// How often one concrete shape signature (the shapes of all inputs) was called.
struct ShapeSignatureCount {
    std::vector<Shape> shapes;
    std::uint64_t calls = 0;
};

// The counters of both structs are listed once, with their meaning, in <kiln/stats_fields.def>.
// KILN_STAT_IN_FUNCTION_<scope>(x) and KILN_STAT_IN_ENGINE_<scope>(x) expand to x when a
// counter of that scope is a field of FunctionStats (resp. EngineStats), else to nothing.
#define KILN_STAT_IN_FUNCTION_F(x) x
#define KILN_STAT_IN_FUNCTION_E(x)
#define KILN_STAT_IN_FUNCTION_FE(x) x
#define KILN_STAT_IN_FUNCTION_FL(x) x
#define KILN_STAT_IN_ENGINE_F(x)
#define KILN_STAT_IN_ENGINE_E(x) x
#define KILN_STAT_IN_ENGINE_FE(x) x
#define KILN_STAT_IN_ENGINE_FL(x) x

struct FunctionStats {
    std::string name;
#define KILN_STAT(scope, type, field, doc) KILN_STAT_IN_FUNCTION_##scope(type field{};)
#include <kiln/stats_fields.def>
    std::vector<GroupStats> groups;
    std::map<std::string, std::uint64_t> bailouts;  // compile outcomes other than success, by reason
    std::vector<ShapeSignatureCount> signatures;                          // most called first
    std::map<std::string, std::map<std::int64_t, std::uint64_t>> dim_histograms;  // symbol -> value -> calls
    std::string to_json() const;
};

// Totals over every function the engine loaded, including those no longer alive, and the
// engine's code caches.
struct EngineStats {
#define KILN_STAT(scope, type, field, doc) KILN_STAT_IN_ENGINE_##scope(type field{};)
#include <kiln/stats_fields.def>
    std::string to_json() const;
};

// A loaded graph. Copies share state; any number of threads may call it at once.
// A Function may outlive the Engine that loaded it: it shares the engine's tiers, compile
// queue and caches, which stay alive while it does, so calls, background compiles, warmup and
// stats go on (and stay right) after the Engine is destroyed.
class Function {
public:
    Function() = default;
    // Runs one call and returns new output tensors. Throws kiln::Error for bad inputs
    // (count, rank, dtype, device, a static dim, or two uses of one symbol that disagree).
    std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;
    // Runs one call into caller-owned outputs: each must be defined with the output's
    // dtype, device and shape (it may be strided). Arguments are checked before anything
    // runs; an error raised while running (e.g. a gather index out of range, or
    // std::bad_alloc when memory runs out) may leave the outputs partly written.
    void run(std::span<const Tensor> inputs, std::span<Tensor> outputs) const;
    // Prepares for these input shapes (one Shape per input) ahead of traffic: checks them,
    // plans them, and compiles every group that tier 2 can compile for them; returns when
    // those compiles are done.
    void warmup(const std::vector<std::vector<Shape>>& shape_sets) const;
    // Prepares for the traffic an earlier process served with this graph: with
    // KILN_CACHE_DIR set, compiles (or loads from it) the tier-2 versions that process held,
    // as it recorded them there, and returns when they are ready. Returns how many of the
    // recorded versions this function holds now (0: no persistent cache, or no record).
    std::size_t warmup() const;
    // Returns when no compile for this function is queued or running.
    void wait_for_compiles() const;
    FunctionStats stats() const;
    // The shapes the outputs would have for these input shapes. Throws kiln::Error for what a
    // call would reject (count, rank, a negative or static dim that does not fit, symbols that
    // disagree, a value whose byte size overflows int64); warmup(shape_sets) checks the same.
    std::vector<Shape> output_shapes(const std::vector<Shape>& input_shapes) const;
    const Graph& graph() const;
    bool valid() const { return static_cast<bool>(impl_); }

    explicit Function(std::shared_ptr<detail::FunctionImpl> impl) : impl_(std::move(impl)) {}

private:
    std::shared_ptr<detail::FunctionImpl> impl_;
};

// Loads graphs. Destroying it leaves the Functions it loaded working (see Function); its
// stats() and its Options::num_threads bound on kernel threads end with it.
class Engine {
public:
    Engine();                               // Options::from_env()
    explicit Engine(const Options& options);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    Function load(const Graph& graph);      // thread-safe
    EngineStats stats() const;
    const Options& options() const;

private:
    std::shared_ptr<detail::EngineImpl> impl_;
};

}  // namespace kiln
