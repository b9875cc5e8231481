#pragma once
// Matmul cases shared by the tests of the compiled matmul kernels (tier 1's GEMM driver,
// tier 2's blocked GEMM): y = epilogue(x @ W) graphs, the tolerance of a sum of k products,
// and a comparison of a compiled function with the interpreter.
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include "reference.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace kiln::test::matmul_cases {


// Tolerance for a sum of k products of N(0,1) values, relative to 1 + |result|.
inline double tol(DType dt, std::int64_t k) {
    const double eps = dt == DType::f32 ? 1.2e-7 : 2.3e-16;
    return 8.0 * eps * std::sqrt(static_cast<double>(std::max<std::int64_t>(k, 1))) * 4.0;
}

enum class Epi { none, bias_relu, bias_gelu, residual, gelu_tanh_scale };

// y = epi(x @ W) with W a constant [K, N] (or a run-time second input when runtime_b).
inline Graph make_graph(DType dt, std::vector<Dim> xdims, std::int64_t K, std::int64_t N, Epi epi, bool runtime_b,
                 std::vector<Dim> wdims = {}) {
    Tensor W = Tensor::randn({K, N}, 11, dt), b = Tensor::randn({N}, 12, dt);
    std::vector<ArgSpec> args{arg("x", dt, xdims)};
    if (runtime_b) args.push_back(arg("w", dt, wdims.empty() ? std::vector<Dim>{K, N} : wdims));
    std::vector<Dim> rdims = xdims;
    rdims.back() = N;
    if (epi == Epi::residual) args.push_back(arg("r", dt, rdims));
    return trace("mm", args, [&](const std::vector<Var>& in) -> std::vector<Var> {
        Var w = runtime_b ? in[1] : Var(W);
        Var m = matmul(in[0], w);
        switch (epi) {
        case Epi::none: return {m};
        case Epi::bias_relu: return {relu(m + b)};
        case Epi::bias_gelu: return {gelu(m + b)};
        case Epi::residual: return {tanh(m + b) + in.back()};
        case Epi::gelu_tanh_scale: return {gelu(m * 0.5, true) - 1.0};
        }
        return {m};
    });
}


// Runs f (jit) and fi (interpreter) `times` times on inputs, comparing each result.
inline void compare(Function& fj, Function& fi, const std::vector<Tensor>& in, int times, double tolerance) {
    const Tensor want = fi(in)[0];
    for (int i = 0; i < times; ++i) {
        const Tensor got = fj(in)[0];
        CHECK(ref::max_rel_diff(got, want) < tolerance);
    }
}


}  // namespace kiln::test::matmul_cases
