#pragma once
// What a call needs before it runs, per input-shape signature: a ShapePlan (every node's
// concrete shape; reshape and broadcast_to targets, narrow's and arange's start and length
// made concrete), so shape work happens once per signature, not on every call.
// jit/exec/pipeline.h makes the function's executable plan; jit/exec/run_plan.h runs calls;
// jit/exec/memory_plan.h places intermediates.
#include "jit/exec/memory_plan.h"
#include "jit/exec/pipeline.h"
#include "profiling/profile.h"
#include "src/ir/bindings.h"
#include "src/ir/ir.h"

#include <kiln/tensor.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace kiln::jit {

// Everything a call needs that depends only on the input shapes. Immutable once a call or
// the cache can see it.
struct ShapePlan {
    std::vector<Shape> input_shapes;
    std::vector<Shape> shapes;                     // per node id (empty for nodes not in the plan)
    std::vector<std::unique_ptr<ir::Node>> nodes;  // per node id: a copy with concrete attrs, where needed
    ir::Bindings bindings;                         // every symbol's value
    std::vector<Shape> output_shapes;
    // Per group of the partition: the most elements it reads or writes (one of its inputs, or
    // its first output), the thread split's measure of its work (jit/exec/run_plan.cpp). A
    // reduction reads far more than it writes (a global average pool: 401k values in, 32 out).
    std::vector<std::int64_t> group_work;
    // Where compiled groups put the intermediates at these shapes; made by the first call
    // that needs it (it depends on the function's partition: jit/exec/run_plan.cpp).
    LazyMemoryPlan memory;
    // The function profile's counter for this signature (null: the profile keeps no more
    // signatures), set by whoever made the plan, before sharing it.
    profiling::FunctionProfile::Signature* signature = nullptr;
};

// Checks the shapes against the graph (kiln::Error naming the argument, expected and
// actual) and infers every node's shape (kiln::Error when symbolic dims disagree, when a
// narrow reads outside its operand (start < 0 or start + length > the dim), or when a
// value the call computes would have a byte size that overflows int64: it names the node).
std::unique_ptr<ShapePlan> make_shape_plan(const Executable& exe, const std::vector<Shape>& input_shapes,
                                           const std::string& what);

// The shape plan of one call: borrowed from a ShapePlanCache (valid while the cache lives),
// or owned by the call when the cache keeps no more plans.
class ShapePlanRef {
public:
    ShapePlanRef() = default;
    explicit ShapePlanRef(const ShapePlan* cached) : p_(cached) {}
    explicit ShapePlanRef(std::unique_ptr<const ShapePlan> owned) : owned_(std::move(owned)), p_(owned_.get()) {}
    const ShapePlan& operator*() const { return *p_; }
    const ShapePlan* operator->() const { return p_; }
    const ShapePlan* get() const { return p_; }
    bool cached() const { return p_ && !owned_; }

private:
    std::unique_ptr<const ShapePlan> owned_;
    const ShapePlan* p_ = nullptr;
};

// A bounded map from input shapes to shape plans, safe for concurrent use. Lookups are
// lock-free and touch no reference count: a fixed open-addressed table of atomic pointers
// to plans that stay until the cache is destroyed. Inserts take a mutex. When full, further
// signatures are planned per call and not kept (memory stays bounded).
class ShapePlanCache {
public:
    static constexpr std::size_t kCapacity = limits::shape_plans_kept;
    ShapePlanCache() = default;
    ShapePlanCache(const ShapePlanCache&) = delete;
    ShapePlanCache& operator=(const ShapePlanCache&) = delete;

    // The kept plan for these shapes, or null. Valid while the cache lives.
    const ShapePlan* find(const std::vector<Shape>& shapes) const;
    // The same, keyed by the inputs' shapes (no copy of them: the hot path allocates nothing).
    const ShapePlan* find(std::span<const Tensor> inputs) const;
    // Keeps `sp` while there is room and returns it borrowed; returns the plan already kept
    // for the same shapes (another thread's) if there is one; else gives `sp` back, owned.
    ShapePlanRef insert(std::unique_ptr<const ShapePlan> sp);
    std::size_t size() const;

private:
    static constexpr std::size_t kSlots = 2 * kCapacity;  // a power of two; at most half full
    static_assert((kSlots & (kSlots - 1)) == 0);
    std::array<std::atomic<const ShapePlan*>, kSlots> table_{};
    mutable std::mutex mu_;  // inserts
    std::vector<std::unique_ptr<const ShapePlan>> owned_;  // the kept plans; under mu_
};

}  // namespace kiln::jit
