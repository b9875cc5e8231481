#include "jit/tiering/cost_model.h"

#include <algorithm>

namespace kiln::jit {
namespace {

using profiling::CodeKind;
using profiling::index_of;

// Initial estimates, replaced by what the engine measures. Compile costs in µs, [tier - 1]:
// tier 1 (asmjit) takes a few hundred µs; tier 2 (LLVM at -O3) tens of ms, more for a
// blocked GEMM or convolution than for a loop.
constexpr double kInitialCompileUs[kNumGroupKinds][2] = {
    {300, 15'000},  // elementwise
    {300, 25'000},  // row_reduction
    {300, 40'000},  // matmul
    {300, 60'000},  // conv
    {300, 20'000},  // opaque (never lowered, so never compiled)
};
// The initial ratios: time per call relative to the interpreter's, [interpreted, baseline,
// generic, specialised]; the ratio from one kind of code to another is the quotient of their
// levels. Matmul and conv groups run the same vectorised GEMM on the interpreter and at
// tier 1 (src/cpu/gemm.h): tier 1 saves the epilogue's passes over memory and the
// interpreter's per-op work, tier 2 a little more where it binds the dims (measured on an
// AVX2 host: tier 1 at 0.70-0.99x the interpreter's time, tier 2 at 0.5-2.4x tier 1's).
constexpr double kInitialLevel[kNumGroupKinds][profiling::kNumCodeKinds] = {
    {1.0, 0.30, 0.20, 0.18},  // elementwise
    {1.0, 0.35, 0.25, 0.22},  // row_reduction
    {1.0, 0.85, 0.80, 0.75},  // matmul
    {1.0, 0.75, 0.74, 0.72},  // conv
    {1.0, 1.00, 1.00, 1.00},  // opaque
};
constexpr double kAlpha = 0.3;  // weight of a new measurement in the moving averages

}  // namespace

CostModel::CostModel() {
    for (std::size_t g = 0; g < kNumGroupKinds; ++g) {
        for (std::size_t t = 0; t < 2; ++t) compile_us_[g][t].store(kInitialCompileUs[g][t]);
        for (std::size_t a = 0; a < profiling::kNumCodeKinds; ++a)
            for (std::size_t b = 0; b < profiling::kNumCodeKinds; ++b)
                ratio_[g][a][b].store(kInitialLevel[g][b] / kInitialLevel[g][a]);
    }
}

double CostModel::compile_us(int tier, passes::GroupKind kind) const {
    return compile_us_[k(kind)][tier <= 1 ? 0 : 1].load(std::memory_order_relaxed);
}

std::uint64_t CostModel::compiles_measured(int tier, passes::GroupKind kind) const {
    return compiles_[k(kind)][tier <= 1 ? 0 : 1].load(std::memory_order_relaxed);
}

void CostModel::record_compile(int tier, passes::GroupKind kind, double us) {
    const std::size_t t = tier <= 1 ? 0 : 1;
    std::lock_guard<std::mutex> lock(mu_);
    auto& v = compile_us_[k(kind)][t];
    // The first measurement replaces the initial estimate.
    const bool first = compiles_[k(kind)][t].fetch_add(1, std::memory_order_relaxed) == 0;
    v.store(first ? us : v.load(std::memory_order_relaxed) + kAlpha * (us - v.load(std::memory_order_relaxed)),
            std::memory_order_relaxed);
}

double CostModel::time_ratio(CodeKind from, CodeKind to, passes::GroupKind kind) const {
    return ratio_[k(kind)][index_of(from)][index_of(to)].load(std::memory_order_relaxed);
}

void CostModel::record_ratio(CodeKind from, CodeKind to, passes::GroupKind kind, double ratio) {
    if (!(ratio > 0) || from == to) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto& v = ratio_[k(kind)][index_of(from)][index_of(to)];
    const double next = v.load(std::memory_order_relaxed) + kAlpha * (ratio - v.load(std::memory_order_relaxed));
    v.store(std::clamp(next, 1e-4, 16.0), std::memory_order_relaxed);
}

TierUpEstimate estimate_tierup(double now_ns, double ratio, std::uint64_t calls_so_far,
                               std::uint64_t min_future_calls, double cost_us, std::uint64_t backoff) {
    TierUpEstimate e;
    e.now_ns = now_ns;
    e.next_ns = now_ns * ratio;
    e.future_calls = static_cast<double>(std::max(calls_so_far, min_future_calls));
    e.saving_us = std::max(0.0, e.now_ns - e.next_ns) * e.future_calls * 1e-3;
    e.cost_us = cost_us * static_cast<double>(backoff);
    return e;
}

}  // namespace kiln::jit
