#pragma once
// The state behind kiln::Engine and kiln::Function.
#include <kiln/engine.h>

#include "jit/exec/pipeline.h"
#include "jit/exec/shape_plan.h"
#include "jit/tiering/settings.h"
#include "jit/tiering/tier_manager.h"
#include "profiling/profile.h"
#include "profiling/chrome_trace.h"

#include <tbb/global_control.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>


namespace kiln::detail {

// Totals of functions that no longer exist, so engine stats do not lose their history.
struct RetiredTotals {
    std::mutex mu;
    EngineStats totals;
    void add(const FunctionStats& s);
};

class FunctionImpl {
public:
    FunctionImpl(std::shared_ptr<const jit::Executable> exe, const jit::Tunables& tunables,
                 std::shared_ptr<RetiredTotals> retired, jit::EngineResources resources);
    ~FunctionImpl();
    FunctionImpl(const FunctionImpl&) = delete;
    FunctionImpl& operator=(const FunctionImpl&) = delete;

    std::vector<Tensor> call(std::span<const Tensor> inputs);
    // A call whose inputs were checked and whose shapes were planned.
    std::vector<Tensor> call_planned(std::span<const Tensor> inputs, const jit::ShapePlan& sp,
                                     std::span<const Tensor> caller_outputs = {});
    // The same, writing every output into the caller's (checked) tensors.
    void call_planned_into(std::span<const Tensor> inputs, const jit::ShapePlan& sp, std::span<const Tensor> outputs);
    // The shape plan for these input shapes: cached (found without a lock), or made (and
    // cached while there is room; else owned by the returned reference).
    jit::ShapePlanRef shape_plan(const std::vector<Shape>& shapes);
    // The same for the inputs' shapes; a cached plan is found without copying them.
    jit::ShapePlanRef shape_plan(std::span<const Tensor> inputs);
    FunctionStats stats() const;
    // A call whose inputs are on a GPU (checked, shapes planned): run_device.h.
    std::vector<Tensor> call_on_device(std::span<const Tensor> inputs, const jit::ShapePlan& sp);
    // This function's policy and code on device `d` (made on first use).
    jit::DeviceTierManager& on_device(Device d);
    // The policies of the devices used so far (for stats and wait_for_compiles).
    std::vector<jit::DeviceTierManager*> devices_used() const;
    // KILN_TRACE: one "call" event from t0 to now (no-op when tracing is off).
    void trace_call(profiling::ChromeTrace::Clock::time_point t0, int tier);

    Graph graph;
    std::shared_ptr<const jit::Executable> exe;  // what lower_function made of the graph
    profiling::FunctionProfile profile;
    jit::ShapePlanCache shape_plans;
    std::string what;  // "call of 'name'", for messages
    jit::TierManager tiers;

    // Calls by the highest tier they used (their sum is the calls: one counter per call).
    std::array<std::atomic<std::uint64_t>, kNumTiers> calls_by_tier{};
    std::atomic<std::uint64_t> failed_calls{0};
    std::shared_ptr<RetiredTotals> retired;
    jit::Tunables tunables;
    jit::EngineResources resources;
    mutable std::mutex device_mu;
    std::vector<std::unique_ptr<jit::DeviceTierManager>> devices;  // per CUDA ordinal (null: unused)
};

class EngineImpl {
public:
    explicit EngineImpl(const Options& o);
    ~EngineImpl();
    Options options;            // as given (Engine::options)
    jit::EngineSettings settings;  // what the engine works with, made from them
    std::unique_ptr<tbb::global_control> threads;  // KILN_NUM_THREADS, when set
    mutable std::mutex mu;
    std::vector<std::weak_ptr<FunctionImpl>> functions;
    std::shared_ptr<RetiredTotals> retired = std::make_shared<RetiredTotals>();
    jit::EngineResources resources;  // the compiling tiers this build and options provide, and the compile queue
};

}  // namespace kiln::detail
