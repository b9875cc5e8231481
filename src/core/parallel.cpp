#include "src/core/strided.h"

#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>

namespace kiln::core {

void parallel_range(std::int64_t n, std::int64_t cost_per_item,
                    const std::function<void(std::int64_t, std::int64_t)>& fn) {
    if (n <= 0) return;
    std::int64_t cost = cost_per_item < 1 ? 1 : cost_per_item;
    const int width = parallel_width();
    if (n == 1 || width == 1 || n * cost < 2 * kParallelGrain) {
        fn(0, n);
        return;
    }
    // Chunks of at least the grain's work, and no more than about four per thread: a chunk
    // may have a fixed cost of its own (a GEMM packs its operand once per chunk).
    std::int64_t grain = std::max<std::int64_t>(kParallelGrain / cost, (n + 4 * width - 1) / (4 * width));
    if (grain < 1) grain = 1;
    // Each chunk ends with a release on `done`, which the caller acquires once parallel_for
    // returns: the join made visible to ThreadSanitizer (Debian's oneTBB is not instrumented,
    // so its own join is not), so that what the chunks read of the caller's stack does not
    // look like a race with the caller's later writes there.
    std::atomic<std::int64_t> done{0};
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, n, static_cast<std::size_t>(grain)),
                      [&](const tbb::blocked_range<std::int64_t>& r) {
                          fn(r.begin(), r.end());
                          done.fetch_add(1, std::memory_order_release);
                      });
    (void)done.load(std::memory_order_acquire);
}

void parallel_tasks(std::int64_t n, const std::function<void(std::int64_t)>& fn) {
    if (n <= 0) return;
    if (n == 1 || parallel_width() == 1) {
        for (std::int64_t i = 0; i < n; ++i) fn(i);
        return;
    }
    std::atomic<std::int64_t> done{0};  // the join, visible to ThreadSanitizer (parallel_range)
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, n, 1), [&](const tbb::blocked_range<std::int64_t>& r) {
        for (std::int64_t i = r.begin(); i < r.end(); ++i) fn(i);
        done.fetch_add(1, std::memory_order_release);
    });
    (void)done.load(std::memory_order_acquire);
}

int parallel_width() {
    const std::size_t cap = tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
    const int arena = tbb::this_task_arena::max_concurrency();
    return std::max(1, std::min(arena, static_cast<int>(std::min<std::size_t>(cap, 1 << 20))));
}

}  // namespace kiln::core
