#pragma once
// Memory planning: where a call keeps the intermediates of its compiled groups.
//
// An intermediate is a value that a group computes and a later group reads, which is not a
// graph output (nor an input or constant: those are never computed). When the group that
// defines it runs compiled, its kernel writes it into the call's arena, one block of
// memory laid out once per shape signature (plan_memory), instead of a fresh allocation.
// Values whose live ranges (in group steps) do not overlap share memory.
//
// What may live in the arena (decided from the graph, for any tier each group runs on):
// - outputs of groups that can run compiled (a lowered kernel, an optimising tier, no
//   zero-size buffer at these shapes); values of other groups come from the interpreter;
// - that are not graph outputs and that no graph output can alias: the interpreter's shape
//   ops (reshape, permute, squeeze, unsqueeze, broadcast_to, slice, narrow) may return views, so a
//   value is kept out of the arena when a graph output is a view of it (through any chain
//   of such ops), since the arena goes back to the pool when the call ends. A view that
//   does not escape extends its base's live range to the view's last reader.
// - a joined concat's output, with its operands inside it (MemoryPlan::joined_into): its
//   operands' kernels write their results where the concat would have copied them.
// - inside a run of groups that a call runs one image at a time (SampleRun below; batch > 1):
//   a value computed and read only inside the run takes one image's bytes (MemoryPlan::
//   image_bytes) in a region of its own (MemoryPlan::image_region_bytes, laid out like the
//   arena; the runner gives each image being computed at once a block of that size), reused
//   image after image; every other value the run touches lives from the run's first group to
//   its last, since the run's groups interleave.
// Layout: values sorted by size (largest first), each put at the lowest-waste gap (best
// fit) among the values whose live ranges overlap its own, or after them; sizes and
// offsets are multiples of kArenaAlign (64 bytes).
//
// Arena blocks come from an ArenaPool per function (see below), so a steady-state call
// allocates nothing for its intermediates. Tests: tests/test_memory_plan.cpp.
#include "src/ir/ir.h"
#include "src/passes/fuse.h"
#include "src/support/limits.h"

#include <kiln/tensor.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace kiln::jit {

inline constexpr std::size_t kArenaAlign = limits::arena_align;

// One buffer to place: its size in bytes and its live range in group steps (inclusive:
// defined by group `first`, last read by group `last`).
struct LiveBuffer {
    std::size_t bytes = 0;
    std::int32_t first = 0;
    std::int32_t last = 0;
};

// Assigns offsets (multiples of kArenaAlign) such that two buffers whose live ranges overlap
// never overlap in memory. Returns the arena size (a multiple of kArenaAlign).
std::size_t assign_offsets(std::span<const LiveBuffer> buffers, std::vector<std::size_t>& offsets);

// Groups first..last (consecutive, inclusive) that a call may run image by image: each
// group's outer indices for image s, then the next group's, ..., then image s + 1
// (jit/exec/sample_runs.h finds them). `batch`: the images (> 1).
struct SampleRun {
    std::int32_t first = 0, last = 0;
    std::int64_t batch = 0;
};

struct MemoryPlan {
    std::vector<std::int64_t> offset;  // per node id: byte offset in the arena, or -1 (not placed)
    std::vector<LiveBuffer> live;      // per node id: size and live range of a placed value
    // Per node id: for an operand of a joined concat (below), the concat's id, else -1. A
    // joined concat is one whose operands are placed inside its own output, each at its
    // place in it, so that when every operand was computed there the concat has nothing to
    // copy: an opaque concat along an axis with nothing but size-1 axes before it (batch 1,
    // channels), whose operands are values placed in the arena, each read by the concat
    // alone and viewed by nothing, of whole kArenaAlign multiples but the last. Its output
    // is placed, living from its first operand's group on. (squeezenet1_1's fire modules,
    // batch 1: their concats copied 1.5 MB at 55 x 55.)
    // At batch N > 1, a concat along axis 1 joins the same way where each operand's group runs
    // its outer indices image by image (plan_memory's `group_images`, its only output the
    // operand) outside every sample run, and each operand's bytes per image, and so its place
    // in an image of the concat, are whole kArenaAlign multiples: the operand then sits in
    // pieces, one per image, `join_pitch` bytes apart (below), and its group's code runs once
    // per image, each time given the place of that image's piece (jit/exec/run_plan.cpp).
    // (squeezenet1_1 at batch 8: its eight concats copied 46 MB a call.)
    std::vector<std::int64_t> joined_into;
    // Per node id: for an operand of a concat joined across images, the concat's bytes per
    // image (the distance from one of the operand's pieces to the next; `offset` is its piece of
    // image 0 and live[id].bytes the bytes of one piece), else 0.
    std::vector<std::int64_t> join_pitch;
    std::vector<SampleRun> runs;       // what plan_memory was given
    // Per node id: for a value computed and read only inside a run, its bytes per image, and
    // `offset` is then its place in the image region (its writer and readers address image s
    // at s * image_bytes: the code of image s gets the address of its place less that); else 0.
    std::vector<std::int64_t> image_bytes;
    std::size_t image_region_bytes = 0;  // multiple of kArenaAlign
    std::size_t arena_bytes = 0;       // multiple of kArenaAlign
    std::size_t placed_bytes = 0;      // sum of the arena's values' sizes (rounded up to kArenaAlign)
    std::size_t placed = 0;            // number of values in the arena (a joined concat's operands too)
    std::size_t joined = 0;            // number of joined concats
};

// Does the interpreter's kernel of `op` possibly return a view of its first operand?
bool may_return_view(ir::Op op);

// The layout for one shape signature. `compilable[i]`: whether group i of `partition` can run
// compiled at these shapes; `shapes`: every node's concrete shape (ShapePlan::shapes);
// `runs`: the sample runs at these shapes (in order, disjoint, of compilable groups);
// `group_images`: per group, the images N (> 1) whose outer indices its code runs one image
// after another, each image's alone (jit/exec/sample_runs.h, image_major_groups), else 0 (or
// empty: none).
MemoryPlan plan_memory(const ir::Graph& g, const passes::Partition& partition, const std::vector<bool>& compilable,
                       const std::vector<Shape>& shapes, std::span<const SampleRun> runs = {},
                       std::span<const std::int64_t> group_images = {});

// A MemoryPlan computed once, on first use, by whichever thread gets there first (lock-free;
// a thread that loses the race drops its copy). Lives in the immutable, shared ShapePlan.
class LazyMemoryPlan {
public:
    LazyMemoryPlan() = default;
    LazyMemoryPlan(const LazyMemoryPlan&) = delete;
    LazyMemoryPlan& operator=(const LazyMemoryPlan&) = delete;
    ~LazyMemoryPlan() { delete plan_.load(std::memory_order_acquire); }

    template <class Make> const MemoryPlan& get(Make&& make) const {
        if (const MemoryPlan* p = plan_.load(std::memory_order_acquire)) return *p;
        auto fresh = std::make_unique<const MemoryPlan>(make());
        const MemoryPlan* expected = nullptr;
        if (plan_.compare_exchange_strong(expected, fresh.get(), std::memory_order_acq_rel, std::memory_order_acquire))
            return *fresh.release();
        return *expected;
    }

private:
    mutable std::atomic<const MemoryPlan*> plan_{nullptr};
};

// Arena blocks of one function, shared by its concurrent calls.
//
// Policy: the pool has kSlots slots, each empty or holding one block. acquire() takes the
// first pooled block it finds (an atomic exchange per slot, no lock); if that block is too
// small for this call's arena it is freed and a block of the needed size allocated instead,
// and if no slot holds a block a new one is allocated. release() puts the block into the first
// empty slot (an atomic compare-exchange), or frees it when every slot is taken. So:
// - concurrent calls each hold their own block, never shared;
// - in a steady state of at most kSlots concurrent calls, no call allocates: blocks move
//   between the slots and the calls;
// - the pool keeps at most kSlots blocks, each as large as the largest arena it was needed
//   for (blocks grow to the largest shape signature in traffic and stay there until trim());
//   calls beyond kSlots at once allocate and free their own block (through the host
//   allocator, whose cache keeps large blocks mapped).
class ArenaPool {
public:
    static constexpr std::size_t kSlots = limits::arena_pool_slots;

    ArenaPool() = default;
    ArenaPool(const ArenaPool&) = delete;
    ArenaPool& operator=(const ArenaPool&) = delete;
    ~ArenaPool() { trim(); }

    // A checked-out block; returns itself to the pool when destroyed.
    class Lease {
    public:
        Lease() = default;
        Lease(Lease&& o) noexcept : pool_(o.pool_), block_(o.block_) { o.pool_ = nullptr, o.block_ = nullptr; }
        Lease& operator=(Lease&& o) noexcept;
        Lease(const Lease&) = delete;
        Lease& operator=(const Lease&) = delete;
        ~Lease() { reset(); }
        std::byte* data() const;  // 64-byte aligned; null when nothing was acquired
        void reset();             // returns the block now

    private:
        friend class ArenaPool;
        Lease(ArenaPool* pool, void* block) : pool_(pool), block_(block) {}
        ArenaPool* pool_ = nullptr;
        void* block_ = nullptr;
    };

    // A block of at least `bytes` (bytes > 0).
    Lease acquire(std::size_t bytes);
    // Frees every pooled block (blocks checked out now are pooled or freed when returned).
    void trim();

    // For tests and statistics.
    std::size_t pooled_blocks() const;
    std::uint64_t blocks_allocated() const { return allocated_.load(std::memory_order_relaxed); }

private:
    void release(void* block);

    std::array<std::atomic<void*>, kSlots> slots_{};
    std::atomic<std::uint64_t> allocated_{0};
};

}  // namespace kiln::jit
