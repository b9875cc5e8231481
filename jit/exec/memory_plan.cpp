#include "jit/exec/memory_plan.h"

#include "src/core/allocator.h"
#include "src/support/check.h"
#include "src/support/checked.h"

#include <algorithm>
#include <numeric>

namespace kiln::jit {

std::size_t assign_offsets(std::span<const LiveBuffer> buffers, std::vector<std::size_t>& offsets) {
    const std::size_t n = buffers.size();
    offsets.assign(n, 0);
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    // Sizes, offsets and the arena's size stay within int64 (MemoryPlan::offset is one).
    std::vector<std::size_t> sizes(n);
    for (std::size_t i = 0; i < n; ++i)
        sizes[i] = support::checked_round_up(buffers[i].bytes, kArenaAlign, "plan_memory: a buffer");
    auto size_of = [&](std::size_t i) { return sizes[i]; };
    // Largest first; among equals, the earliest defined (deterministic).
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        if (size_of(a) != size_of(b)) return size_of(a) > size_of(b);
        return buffers[a].first < buffers[b].first;
    });
    std::vector<std::size_t> placed, conflicts;
    std::size_t arena = 0;
    for (std::size_t i : order) {
        const std::size_t size = size_of(i);
        if (size == 0) continue;
        const LiveBuffer& b = buffers[i];
        // The placed buffers live at the same time as this one, by offset.
        conflicts.clear();
        for (std::size_t j : placed)
            if (buffers[j].first <= b.last && b.first <= buffers[j].last) conflicts.push_back(j);
        std::sort(conflicts.begin(), conflicts.end(), [&](std::size_t x, std::size_t y) { return offsets[x] < offsets[y]; });
        // The smallest gap between them that fits, else the end of the last one.
        std::size_t end = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
        for (std::size_t j : conflicts) {
            if (offsets[j] > end && offsets[j] - end >= size && offsets[j] - end < best_gap) {
                best = end;
                best_gap = offsets[j] - end;
            }
            end = std::max(end, offsets[j] + size_of(j));  // placed: within the bound
        }
        offsets[i] = best != SIZE_MAX ? best : end;
        arena = std::max(arena, support::checked_add_bytes(offsets[i], size, "plan_memory: the arena"));
        placed.push_back(i);
    }
    return arena;
}

bool may_return_view(ir::Op op) {
    switch (op) {
    case ir::Op::reshape:
    case ir::Op::permute:
    case ir::Op::squeeze:
    case ir::Op::unsqueeze:
    case ir::Op::broadcast_to:
    case ir::Op::slice:
    case ir::Op::narrow: return true;
    default: return false;
    }
}

MemoryPlan plan_memory(const ir::Graph& g, const passes::Partition& partition, const std::vector<bool>& compilable,
                       const std::vector<Shape>& shapes, std::span<const SampleRun> runs,
                       std::span<const std::int64_t> group_images) {
    const std::size_t n = g.nodes.size();
    KILN_CHECK(compilable.size() == partition.groups.size() && shapes.size() == n && partition.group_of.size() == n,
               "plan_memory: partition, compilable flags and shapes disagree on sizes");
    auto u = [](auto v) { return static_cast<std::size_t>(v); };
    std::vector<bool> is_output(n, false);
    for (auto o : g.outputs) is_output[u(o)] = true;

    // Each value's alias root: the value it may be a view of (through chains of view ops),
    // else itself. The root's alias set escapes when a graph output is in it, and lives
    // until the last group that reads any value of the set.
    std::vector<std::size_t> root(n);
    std::vector<std::int32_t> last_group(n, -1);
    for (std::size_t id = 0; id < n; ++id) {
        const ir::Node& node = g.nodes[id];
        root[id] = may_return_view(node.op) && !node.inputs.empty() ? root[u(node.inputs[0])] : id;
        const int gi = partition.group_of[id];
        if (gi < 0) continue;
        for (auto in : node.inputs) last_group[u(in)] = std::max(last_group[u(in)], static_cast<std::int32_t>(gi));
    }
    std::vector<std::int32_t> set_last(n, -1);
    std::vector<bool> escapes(n, false);
    for (std::size_t id = 0; id < n; ++id) {
        set_last[root[id]] = std::max(set_last[root[id]], last_group[id]);
        if (is_output[id]) escapes[root[id]] = true;
    }

    auto bytes_of = [&](std::size_t v) {
        return static_cast<std::size_t>(support::checked_bytes(shapes[v], dtype_size(g.nodes[v].type.dtype), "plan_memory"));
    };
    // The values compiled groups may write into the arena, and their groups.
    std::vector<std::int32_t> def_group(n, -1);
    for (std::size_t gi = 0; gi < partition.groups.size(); ++gi) {
        if (!compilable[gi]) continue;
        for (auto o : partition.groups[gi].outputs) {
            const std::size_t v = u(o);
            if (!is_output[v] && !escapes[root[v]] && bytes_of(v) > 0) def_group[v] = static_cast<std::int32_t>(gi);
        }
    }
    // Joined concats (MemoryPlan::joined_into): operand -> concat, and each operand's offset in it.
    std::vector<std::int64_t> joined_into(n, -1), inner(n, 0), join_pitch(n, 0);
    std::vector<std::int32_t> joined_first(n, -1);
    std::vector<int> readers(n, 0);
    std::vector<bool> viewed(n, false);
    for (std::size_t id = 0; id < n; ++id) {
        for (auto in : g.nodes[id].inputs) ++readers[u(in)];
        if (root[id] != id) viewed[root[id]] = true;
    }
    for (std::size_t gi = 0; gi < partition.groups.size(); ++gi) {
        const passes::Group& grp = partition.groups[gi];
        if (grp.kind != passes::GroupKind::opaque || grp.nodes.size() != 1) continue;
        const std::size_t v = u(grp.nodes.front());
        const ir::Node& cat = g.nodes[v];
        if (cat.op != ir::Op::concat || is_output[v] || escapes[root[v]] || bytes_of(v) == 0) continue;
        const Shape& shape = shapes[v];
        std::int64_t axis = cat.attrs.i("axis");
        if (axis < 0) axis += static_cast<std::int64_t>(shape.size());
        bool ok = axis >= 0 && axis < static_cast<std::int64_t>(shape.size());
        bool leading = true;  // only size-1 axes before the axis: the operands are one piece each
        for (std::int64_t d = 0; ok && d < axis; ++d) leading = leading && shape[u(d)] == 1;
        // Else, across images (MemoryPlan::join_pitch): axis 1 of a batch of N images.
        const auto images = static_cast<std::size_t>(leading ? 1 : axis == 1 ? shape[0] : 0);
        ok = ok && images >= 1 && (images == 1 || !group_images.empty());
        std::size_t at = 0;
        std::int32_t first = static_cast<std::int32_t>(gi);
        auto in_a_run = [&](std::int32_t at_group) {
            return std::any_of(runs.begin(), runs.end(), [&](const SampleRun& r) { return at_group >= r.first && at_group <= r.last; });
        };
        for (std::size_t i = 0; ok && i < cat.inputs.size(); ++i) {
            const std::size_t in = u(cat.inputs[i]);
            ok = def_group[in] >= 0 && readers[in] == 1 && !viewed[in] && joined_into[in] < 0 &&
                 g.nodes[in].type.dtype == cat.type.dtype && at % kArenaAlign == 0 && bytes_of(in) % images == 0;
            if (ok && images > 1) {
                const auto def = u(def_group[in]);
                ok = group_images[def] == static_cast<std::int64_t>(images) && partition.groups[def].outputs.size() == 1 &&
                     !in_a_run(def_group[in]) && (bytes_of(in) / images) % kArenaAlign == 0;
            }
            if (!ok) break;
            at += bytes_of(in) / images;
            first = std::min(first, def_group[in]);
        }
        if (!ok || at * images != bytes_of(v)) continue;
        at = 0;
        for (auto in : cat.inputs) {
            joined_into[u(in)] = static_cast<std::int64_t>(v);
            inner[u(in)] = static_cast<std::int64_t>(at);
            if (images > 1) join_pitch[u(in)] = static_cast<std::int64_t>(bytes_of(v) / images);
            at += bytes_of(u(in)) / images;
        }
        joined_first[v] = first;
    }

    std::vector<LiveBuffer> buffers, image_buffers;
    std::vector<std::size_t> values, image_values;
    std::vector<std::int64_t> image_bytes(n, 0);
    for (std::size_t v = 0; v < n; ++v) {
        const bool joined = joined_first[v] >= 0;
        if ((def_group[v] < 0 && !joined) || joined_into[v] >= 0) continue;
        const std::int32_t first = joined ? joined_first[v] : def_group[v];
        const std::int32_t own = joined ? static_cast<std::int32_t>(partition.group_of[v]) : first;
        LiveBuffer b{bytes_of(v), first, std::max(own, set_last[root[v]])};
        for (const SampleRun& r : runs) {
            if (b.last < r.first || r.last < b.first) continue;
            const std::int64_t batch = r.batch;
            const bool inside = !joined && !viewed[v] && b.first >= r.first && b.last <= r.last && !shapes[v].empty() &&
                                shapes[v][0] == batch && b.bytes % static_cast<std::size_t>(batch) == 0;
            if (inside) {
                b.bytes /= static_cast<std::size_t>(batch);
                image_bytes[v] = static_cast<std::int64_t>(b.bytes);
            } else {
                b.first = std::min(b.first, r.first);
                b.last = std::max(b.last, r.last);
            }
        }
        if (image_bytes[v] > 0) {
            image_buffers.push_back(b);
            image_values.push_back(v);
        } else {
            buffers.push_back(b);
            values.push_back(v);
        }
    }
    MemoryPlan mp;
    mp.runs.assign(runs.begin(), runs.end());
    mp.image_bytes = std::move(image_bytes);
    mp.offset.assign(n, -1);
    mp.live.assign(n, LiveBuffer{});
    mp.joined_into = joined_into;
    mp.join_pitch = join_pitch;
    std::vector<std::size_t> offsets;
    mp.arena_bytes = assign_offsets(buffers, offsets);
    for (std::size_t i = 0; i < values.size(); ++i) {
        mp.offset[values[i]] = static_cast<std::int64_t>(offsets[i]);
        mp.live[values[i]] = buffers[i];
        mp.placed_bytes = support::checked_add_bytes(
            mp.placed_bytes, support::checked_round_up(buffers[i].bytes, kArenaAlign, "plan_memory"), "plan_memory");
        mp.joined += joined_first[values[i]] >= 0;
    }
    mp.placed = values.size();
    mp.image_region_bytes = assign_offsets(image_buffers, offsets);
    for (std::size_t i = 0; i < image_values.size(); ++i) {
        mp.offset[image_values[i]] = static_cast<std::int64_t>(offsets[i]);
        mp.live[image_values[i]] = image_buffers[i];
    }
    for (std::size_t v = 0; v < n; ++v) {
        if (joined_into[v] < 0) continue;
        const auto cat = u(joined_into[v]);
        mp.offset[v] = mp.offset[cat] + inner[v];
        const std::size_t pieces = join_pitch[v] > 0 ? bytes_of(cat) / static_cast<std::size_t>(join_pitch[v]) : 1;
        mp.live[v] = {bytes_of(v) / pieces, def_group[v], mp.live[cat].last};
        ++mp.placed;
    }
    return mp;
}

// ---- ArenaPool ----
// A block is one host allocation: a header line, then the arena (both 64-byte aligned).
namespace {

struct BlockHeader {
    std::size_t capacity;  // of the host allocation
    std::size_t usable;    // arena bytes after the header
};
constexpr std::size_t kHeader = kArenaAlign;
static_assert(sizeof(BlockHeader) <= kHeader);
// host_alloc aligns blocks of 1 KiB and more to 64 bytes.
constexpr std::size_t kMinBlock = 1024;

BlockHeader* header(void* block) { return static_cast<BlockHeader*>(block); }

void* new_block(std::size_t bytes) {
    std::size_t capacity = 0;
    void* p = core::host_alloc(std::max(support::checked_add_bytes(bytes, kHeader, "ArenaPool"), kMinBlock), &capacity);
    auto* h = header(p);
    h->capacity = capacity;
    h->usable = capacity - kHeader;
    return p;
}

void free_block(void* block) { core::host_free(block, header(block)->capacity); }

}  // namespace

ArenaPool::Lease& ArenaPool::Lease::operator=(Lease&& o) noexcept {
    if (this != &o) {
        reset();
        pool_ = o.pool_;
        block_ = o.block_;
        o.pool_ = nullptr;
        o.block_ = nullptr;
    }
    return *this;
}

std::byte* ArenaPool::Lease::data() const { return block_ ? static_cast<std::byte*>(block_) + kHeader : nullptr; }

void ArenaPool::Lease::reset() {
    if (block_) pool_->release(block_);
    pool_ = nullptr;
    block_ = nullptr;
}

ArenaPool::Lease ArenaPool::acquire(std::size_t bytes) {
    for (auto& slot : slots_) {
        if (!slot.load(std::memory_order_relaxed)) continue;
        void* b = slot.exchange(nullptr, std::memory_order_acquire);
        if (!b) continue;
        if (header(b)->usable >= bytes) return Lease(this, b);
        free_block(b);  // too small for this signature: replace it by one that fits
        break;
    }
    allocated_.fetch_add(1, std::memory_order_relaxed);
    return Lease(this, new_block(bytes));
}

void ArenaPool::release(void* block) {
    for (auto& slot : slots_) {
        void* expected = nullptr;
        if (slot.compare_exchange_strong(expected, block, std::memory_order_release, std::memory_order_relaxed)) return;
    }
    free_block(block);
}

void ArenaPool::trim() {
    for (auto& slot : slots_)
        if (void* b = slot.exchange(nullptr, std::memory_order_acquire)) free_block(b);
}

std::size_t ArenaPool::pooled_blocks() const {
    std::size_t n = 0;
    for (const auto& slot : slots_) n += slot.load(std::memory_order_relaxed) != nullptr;
    return n;
}

}  // namespace kiln::jit
