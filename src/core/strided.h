#pragma once
// Strided N-d iteration over K operands that share a shape (broadcast operands carry
// stride 0). The iteration is split into rows along the innermost dim after merging dims
// that are contiguous in every operand, so kernels run a tight inner loop:
//   for_each_row<2>(shape, {out_strides, in_strides},
//       [&](int64_t n, const std::array<int64_t,2>& off, const std::array<int64_t,2>& step) {...});
// Offsets and steps are in elements. parallel_for_each_row splits rows across threads when
// the work is large.
#include <kiln/tensor.h>

#include "src/support/checked.h"

#include <array>
#include <functional>
#include <cstdint>
#include <vector>

namespace kiln::core {

// Work below this many elements runs on the calling thread.
inline constexpr std::int64_t kParallelGrain = 1 << 15;

template <std::size_t K> struct RowPlan {
    Shape shape;                                        // merged dims, innermost last
    std::array<std::vector<std::int64_t>, K> strides;   // per operand, merged
    std::int64_t rows = 1;                              // product of all but the last dim
    std::int64_t row_len = 1;
};

template <std::size_t K>
RowPlan<K> plan_rows(const Shape& shape, const std::array<const std::vector<std::int64_t>*, K>& strides) {
    RowPlan<K> p;
    // No elements: one empty row. (The other dims of a zero-size tensor may be huge: their
    // products need not fit in int64.)
    for (std::size_t d = 0; d < shape.size(); ++d)
        if (shape[d] == 0) {
            p.shape = {0};
            for (std::size_t k = 0; k < K; ++k) p.strides[k].assign(1, 0);
            p.row_len = 0;
            return p;
        }
    // Drop size-1 dims; merge dim i into i+1 when every operand is contiguous across them.
    // (A stride times its dim may overflow, e.g. i8 [2,2] with strides [1,2^62]: then they do
    // not merge.)
    for (std::size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] == 1) continue;
        if (!p.shape.empty()) {
            bool mergeable = true;
            for (std::size_t k = 0; k < K; ++k) {
                std::int64_t outer = 0;
                if (!support::mul_fits((*strides[k])[d], shape[d], &outer) || p.strides[k].back() != outer)
                    mergeable = false;
            }
            if (mergeable) {
                p.shape.back() *= shape[d];
                for (std::size_t k = 0; k < K; ++k) p.strides[k].back() = (*strides[k])[d];
                continue;
            }
        }
        p.shape.push_back(shape[d]);
        for (std::size_t k = 0; k < K; ++k) p.strides[k].push_back((*strides[k])[d]);
    }
    if (p.shape.empty()) {
        p.shape.push_back(1);
        for (std::size_t k = 0; k < K; ++k) p.strides[k].push_back(0);
    }
    p.row_len = p.shape.back();
    for (std::size_t d = 0; d + 1 < p.shape.size(); ++d) p.rows *= p.shape[d];
    return p;
}

// Runs fn over rows [begin, end) of a plan.
template <std::size_t K, class Fn> void run_rows(const RowPlan<K>& p, std::int64_t begin, std::int64_t end, Fn&& fn) {
    const std::size_t outer = p.shape.size() - 1;
    std::array<std::int64_t, K> step;
    for (std::size_t k = 0; k < K; ++k) step[k] = p.strides[k][outer];
    std::vector<std::int64_t> idx(outer, 0);
    // Decompose `begin` into an index.
    std::int64_t r = begin;
    for (std::size_t d = outer; d-- > 0;) {
        idx[d] = r % p.shape[d];
        r /= p.shape[d];
    }
    std::array<std::int64_t, K> off{};
    for (std::size_t k = 0; k < K; ++k)
        for (std::size_t d = 0; d < outer; ++d) off[k] += idx[d] * p.strides[k][d];
    for (std::int64_t row = begin; row < end; ++row) {
        fn(p.row_len, off, step);
        for (std::size_t d = outer; d-- > 0;) {  // odometer increment
            ++idx[d];
            for (std::size_t k = 0; k < K; ++k) off[k] += p.strides[k][d];
            if (idx[d] < p.shape[d]) break;
            for (std::size_t k = 0; k < K; ++k) off[k] -= p.strides[k][d] * p.shape[d];
            idx[d] = 0;
        }
    }
}

template <std::size_t K, class Fn>
void for_each_row(const Shape& shape, const std::array<const std::vector<std::int64_t>*, K>& strides, Fn&& fn) {
    RowPlan<K> p = plan_rows<K>(shape, strides);
    if (p.row_len == 0) return;
    run_rows<K>(p, 0, p.rows, fn);
}

// Splits [0, n) into chunks across the current thread arena when n * cost_per_item is large
// (at most about four chunks per thread; one call of fn on the whole range with one thread).
void parallel_range(std::int64_t n, std::int64_t cost_per_item,
                    const std::function<void(std::int64_t, std::int64_t)>& fn);

// Runs fn(i) for every i in [0, n), each its own task across the current thread arena (in
// any order, some at once); returns when all have run.
void parallel_tasks(std::int64_t n, const std::function<void(std::int64_t)>& fn);

// The number of threads parallel_range may use from here (the current arena's concurrency,
// capped by KILN_NUM_THREADS): kernels that split work into parts size them with it.
int parallel_width();

template <std::size_t K, class Fn>
void parallel_for_each_row(const Shape& shape, const std::array<const std::vector<std::int64_t>*, K>& strides,
                           Fn&& fn) {
    RowPlan<K> p = plan_rows<K>(shape, strides);
    if (p.row_len == 0 || p.rows == 0) return;
    if (p.rows == 1 && p.row_len >= 2 * kParallelGrain) {
        // One long row: split it.
        std::array<std::int64_t, K> step;
        for (std::size_t k = 0; k < K; ++k) step[k] = p.strides[k][0];
        parallel_range(p.row_len, 1, [&](std::int64_t b, std::int64_t e) {
            std::array<std::int64_t, K> off;
            for (std::size_t k = 0; k < K; ++k) off[k] = b * step[k];
            fn(e - b, off, step);
        });
        return;
    }
    parallel_range(p.rows, p.row_len, [&](std::int64_t b, std::int64_t e) { run_rows<K>(p, b, e, fn); });
}

}  // namespace kiln::core
