// Reductions: sum, mean, prod, max, min, argmax, argmin over sorted axes.
//
// The operand is viewed as a dense [A, R, B] array whose middle axis is reduced: in place
// when it is contiguous and the reduced axes are adjacent, else after copying it with the
// kept axes first (B = 1). Each output element reduces R values in index order.
// Semantics:
// - sum/prod accumulate floating types in double and integers in uint64_t (wrapping
//   around, then truncated to the dtype); sum over nothing is 0, prod over nothing is 1.
// - mean (floating only) is the double sum divided by R; over nothing it is NaN.
// - max/min propagate NaN; argmax/argmin return the first index of the extreme value,
//   where a NaN counts as the extreme (the first NaN wins). The index counts along the
//   one reduced axis.
// - max/min/argmax/argmin over a zero-size axis throw kiln::Error (no identity), even when
//   the output itself is empty.
// - Parallelism: rows are split across threads; when there are few long rows, each row is
//   split into fixed chunks of kChunk elements whose partial results are merged in order.
//   The chunking depends only on the shape, never on the thread count, so results are
//   deterministic.
// - Sums and means of f32 down a middle axis run on the vector kernel of src/cpu/col_sum.h
//   (double lanes across the kept columns, each column added in index order: the same bits).
#include "src/core/strided.h"
#include "src/cpu/col_sum.h"
#include "src/support/check.h"
#include "tiers/interp/kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

namespace kiln::interp {
namespace {

using I64 = std::int64_t;
using U64 = std::uint64_t;

constexpr I64 kChunk = 1 << 14;

// An accumulator: State init(); void add(State&, T value, I64 index); void merge(State& a,
// const State& b) (b covers later indices than a); Out finish(const State&, I64 count).
template <class T> struct SumAcc {
    static constexpr bool kFloat = std::is_floating_point_v<core::compute_t<T>>;
    using State = std::conditional_t<kFloat, double, U64>;
    bool mean = false;
    State init() const { return State(0); }
    void add(State& s, T v, I64) const {
        if constexpr (kFloat) s += static_cast<double>(ld<T>(v));
        else s += static_cast<U64>(v);
    }
    void merge(State& a, const State& b) const { a += b; }
    T finish(const State& s, I64 count) const {
        if constexpr (kFloat) {
            if (!mean) return core::convert<T>(s);
            if (count == 0) return core::convert<T>(std::numeric_limits<double>::quiet_NaN());
            return core::convert<T>(s / static_cast<double>(count));
        } else {
            return static_cast<T>(s);
        }
    }
};

template <class T> struct ProdAcc {
    static constexpr bool kFloat = std::is_floating_point_v<core::compute_t<T>>;
    using State = std::conditional_t<kFloat, double, U64>;
    State init() const { return State(1); }
    void add(State& s, T v, I64) const {
        if constexpr (kFloat) s *= static_cast<double>(ld<T>(v));
        else s *= static_cast<U64>(v);
    }
    void merge(State& a, const State& b) const { a *= b; }
    T finish(const State& s, I64) const {
        if constexpr (kFloat) return core::convert<T>(s);
        else return static_cast<T>(s);
    }
};

// The extreme value and its first index; used for max/min (finish gives the value) and
// argmax/argmin (finish gives the index). kMax: larger wins, else smaller wins.
template <class T, bool kMax, bool kArg> struct ExtremeAcc {
    using C = core::compute_t<T>;
    struct State {
        C value{};
        I64 index = -1;  // -1: nothing seen yet
        bool nan = false;
    };
    using Out = std::conditional_t<kArg, I64, T>;
    static bool better(C a, C b) { return kMax ? a > b : a < b; }
    State init() const { return {}; }
    void add(State& s, T v, I64 i) const {
        if (s.nan) return;
        const C c = ld<T>(v);
        if constexpr (std::is_floating_point_v<C>) {
            if (std::isnan(c)) {
                s = {c, i, true};
                return;
            }
        }
        if (s.index < 0 || better(c, s.value)) s = {c, i, false};
    }
    void merge(State& a, const State& b) const {
        if (a.nan || b.index < 0) return;
        if (b.nan || a.index < 0 || better(b.value, a.value)) a = b;
    }
    Out finish(const State& s, I64) const {
        if constexpr (kArg) return s.index;
        else return st<T>(s.value);
    }
};

// Reduces each row of the dense [m, r] matrix x into out[row].
template <class T, class Acc, class Out>
void reduce_rows(const T* x, I64 m, I64 r, const Acc& acc, Out* out) {
    using S = decltype(acc.init());
    auto run = [&](const T* row, I64 begin, I64 end) {
        S s = acc.init();
        for (I64 i = begin; i < end; ++i) acc.add(s, row[i], i);
        return s;
    };
    const bool split = r >= 2 * kChunk && m < 64;
    if (!split) {
        core::parallel_range(m, std::max<I64>(r, 1), [&](I64 b, I64 e) {
            for (I64 i = b; i < e; ++i) out[i] = acc.finish(run(x + i * r, 0, r), r);
        });
        return;
    }
    const I64 chunks = (r + kChunk - 1) / kChunk;
    std::vector<S> part(static_cast<std::size_t>(m * chunks));
    core::parallel_range(m * chunks, kChunk, [&](I64 b, I64 e) {
        for (I64 t = b; t < e; ++t) {
            const I64 row = t / chunks, c = t % chunks;
            part[static_cast<std::size_t>(t)] = run(x + row * r, c * kChunk, std::min(r, (c + 1) * kChunk));
        }
    });
    for (I64 row = 0; row < m; ++row) {
        S s = part[static_cast<std::size_t>(row * chunks)];
        for (I64 c = 1; c < chunks; ++c) acc.merge(s, part[static_cast<std::size_t>(row * chunks + c)]);
        out[row] = acc.finish(s, r);
    }
}

// Reduces down the middle axis of the dense [a, r, b] array x (b > 1): out[i * b + j]
// reduces x[i, :, j]. Each task owns a block of columns, so no transposing copy is needed.
template <class T, class Acc, class Out>
void reduce_cols(const T* x, I64 a, I64 r, I64 b, const Acc& acc, Out* out) {
    using S = decltype(acc.init());
    // f32 sums and means: the vector kernel (src/cpu/col_sum.h), the same additions in the
    // same order (the blocked layout's global average pools, [N, Cb, H, W, 16] over H and W).
    if constexpr (std::is_same_v<T, float> && std::is_same_v<Acc, SumAcc<float>>) {
        const cpu::CpuIsa isa = cpu::kernel_cpu_isa();
        core::parallel_range(a, b * std::max<I64>(r, 1), [&](I64 lo, I64 hi) {
            std::vector<double> s(static_cast<std::size_t>((hi - lo) * b));
            cpu::col_sum_f32(isa, x + lo * r * b, hi - lo, r, b, s.data());
            for (I64 t = 0; t < (hi - lo) * b; ++t) out[lo * b + t] = acc.finish(s[static_cast<std::size_t>(t)], r);
        });
        return;
    }
    constexpr I64 kCols = 256;
    const I64 blocks = (b + kCols - 1) / kCols;
    core::parallel_range(a * blocks, kCols * std::max<I64>(r, 1), [&](I64 lo, I64 hi) {
        std::vector<S> s(static_cast<std::size_t>(kCols));
        for (I64 t = lo; t < hi; ++t) {
            const I64 ai = t / blocks, j0 = (t % blocks) * kCols, nj = std::min(kCols, b - j0);
            std::fill(s.begin(), s.end(), acc.init());
            const T* base = x + ai * r * b + j0;
            for (I64 i = 0; i < r; ++i) {
                const T* row = base + i * b;
                for (I64 j = 0; j < nj; ++j) acc.add(s[static_cast<std::size_t>(j)], row[j], i);
            }
            for (I64 j = 0; j < nj; ++j) out[ai * b + j0 + j] = acc.finish(s[static_cast<std::size_t>(j)], r);
        }
    });
}

// Dispatches to the row or the column form (see reduce()).
template <class T, class Acc, class Out>
void reduce_any(const T* x, I64 a, I64 r, I64 b, const Acc& acc, Out* out) {
    if (b == 1) reduce_rows(x, a, r, acc, out);
    else reduce_cols(x, a, r, b, acc, out);
}

}  // namespace

Tensor reduce(const ir::Node& node, const Tensor& x, const Shape& out_shape) {
    const auto& axes = node.attrs.ints("axes");
    const ir::Op op = node.op;
    const bool extreme = op == ir::Op::max || op == ir::Op::min || op == ir::Op::argmax || op == ir::Op::argmin;
    std::vector<bool> reduced(static_cast<std::size_t>(x.rank()), false);
    for (auto a : axes) {
        KILN_CHECK(a >= 0 && a < x.rank(), "interp: " << ir::op_name(op) << ": axis " << a << " out of range");
        reduced[static_cast<std::size_t>(a)] = true;
        KILN_USER_CHECK(!extreme || x.dim(a) != 0, ir::op_name(op) << ": cannot reduce the zero-size axis " << a);
    }
    // Kept axes first, then the reduced ones: a dense [m, r] matrix.
    std::vector<I64> perm;
    I64 m = 1, r = 1;
    for (int pass = 0; pass < 2; ++pass)
        for (I64 d = 0; d < x.rank(); ++d) {
            const bool red = reduced[static_cast<std::size_t>(d)];
            if (red != (pass == 1)) continue;
            perm.push_back(d);
            (red ? r : m) *= x.dim(d);
        }
    KILN_CHECK(m == numel_of(out_shape), "interp: " << ir::op_name(op) << ": output size mismatch");
    // A contiguous operand whose reduced axes are adjacent is used in place as [a, r, b]
    // (kept axes before and after the reduced block); any other operand is copied into
    // the [m, r] order (kept axes first) and reduced as [m, r, 1].
    I64 a = m, b = 1;
    Tensor rows;
    const bool adjacent = axes.back() - axes.front() + 1 == static_cast<I64>(axes.size());
    if (x.is_contiguous() && adjacent) {
        rows = x;
        for (I64 d = axes.back() + 1; d < x.rank(); ++d) b *= x.dim(d);
        a = m / std::max<I64>(b, 1);
    } else {
        rows = x.permute(perm).contiguous();
    }

    const bool arg = op == ir::Op::argmax || op == ir::Op::argmin;
    Tensor out = Tensor::empty(out_shape, arg ? DType::i64 : x.dtype());
    if (m == 0) return out;
    core::dispatch(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, bool>) {
            KILN_UNREACHABLE("interp: " << ir::op_name(op) << " on bool");
        } else {
            const T* px = static_cast<const T*>(rows.data());
            T* po = static_cast<T*>(out.data());
            I64* pi = static_cast<I64*>(out.data());
            switch (op) {
            case ir::Op::sum: reduce_any(px, a, r, b, SumAcc<T>{}, po); break;
            case ir::Op::mean: reduce_any(px, a, r, b, SumAcc<T>{true}, po); break;
            case ir::Op::prod: reduce_any(px, a, r, b, ProdAcc<T>{}, po); break;
            case ir::Op::max: reduce_any(px, a, r, b, ExtremeAcc<T, true, false>{}, po); break;
            case ir::Op::min: reduce_any(px, a, r, b, ExtremeAcc<T, false, false>{}, po); break;
            case ir::Op::argmax: reduce_any(px, a, r, b, ExtremeAcc<T, true, true>{}, pi); break;
            case ir::Op::argmin: reduce_any(px, a, r, b, ExtremeAcc<T, false, true>{}, pi); break;
            default: KILN_UNREACHABLE("interp: " << ir::op_name(op) << " is not a reduction");
            }
        }
    });
    return out;
}

}  // namespace kiln::interp
