#pragma once
// Random graphs for the engine-level differential test (tests/test_differential.cpp), built
// with the public tracing API. Each family makes one graph from a seed, with a symbolic batch
// dim (kiln::dyn) and several calls at different batch sizes. The same seed always gives the
// same graph and inputs.
//
// Values are kept where the tiers may differ only by rounding: inputs of bounded range, exp
// of a clamped operand, log/sqrt/division of operands kept away from 0; ops that are not
// continuous (comparisons, floor, round, sign, float-to-int casts) read graph inputs, which
// every tier sees bit for bit, never intermediate results.
// random_graphs.cpp: elementwise (float, integer and boolean), views, reductions,
// normalisation; random_graphs_nn.cpp: matmul and conv2d with epilogues.
#include "differential.h"

#include <kiln/kiln.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace kiln::test::diff {

Case elementwise_case(std::uint64_t seed);  // float chains with broadcasts, f32/f64/f16/bf16
Case integer_case(std::uint64_t seed);      // i8/u8/i32/i64 chains, comparisons, booleans
Case view_case(std::uint64_t seed);         // reshape/permute/slice/broadcast_to/squeeze/unsqueeze feeding elementwise
Case reduction_case(std::uint64_t seed);    // sum/mean/max/min over trailing axes, with producers and consumers
Case norm_case(std::uint64_t seed);         // softmax, log_softmax, layer_norm, rms_norm with producers and epilogues
Case matmul_case(std::uint64_t seed);       // matmul/linear with bias, activation and residual epilogues
Case conv_case(std::uint64_t seed);         // conv2d (stride, padding, dilation, groups) with epilogues
// Chains of conv2d (dense and depthwise, odd channel counts) with epilogues, residual adds,
// squeeze-excite and channel concats, run in the blocked channel layout (Case::nchwc).
Case nchwc_case(std::uint64_t seed);

// ---- helpers shared by the generators ----
using Rng = std::mt19937_64;

template <class T> const T& pick(Rng& rng, const std::vector<T>& v) { return v[rng() % v.size()]; }
inline bool chance(Rng& rng, int one_in) { return rng() % static_cast<std::uint64_t>(one_in) == 0; }

// A float dtype, f32 twice as often as each of the others.
DType pick_float(Rng& rng);

// Batch sizes for the calls of a case (the value of the symbol "B"): `n` values, sometimes 0
// when `allow_zero`.
std::vector<std::int64_t> pick_batches(Rng& rng, int n, bool allow_zero);

// One input set per binding of the symbols: shapes from the args' dims (static, or a symbol
// named in the binding), values uniform in [lo, hi) (integers: whole numbers; u8 from 0;
// booleans: false or true).
std::vector<std::vector<Tensor>> make_calls(const std::vector<ArgSpec>& args,
                                            const std::vector<std::map<std::string, std::int64_t>>& bindings,
                                            std::uint64_t seed, double lo, double hi);
// make_calls with the symbol "B" bound to each of `batches`.
std::vector<std::vector<Tensor>> batch_calls(const std::vector<ArgSpec>& args, const std::vector<std::int64_t>& batches,
                                             std::uint64_t seed, double lo, double hi);

// A random float op on h (continuous in h; the others read x and y, the graph's inputs).
Var float_step(Rng& rng, const Var& h, const Var& x, const Var& y);
// A random activation (or none).
Var activation(Rng& rng, const Var& h);

}  // namespace kiln::test::diff
