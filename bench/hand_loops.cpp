// hand_loops: the hand-written baselines of the elementwise workloads, compiled as a user
// compiles a hot loop (-O3 -march=native, no -ffast-math; see bench/CMakeLists.txt).
//
//   usage: hand_loops [--quick]
//
// - chain_16M: y = gelu_tanh(a*b + c) * sigmoid(a) on 16M floats in one fused pass, with the
//   interpreter's math (tiers/interp/elementwise.cpp): the tanh form of GELU and the
//   sigmoid that is stable for both signs, in float.
// - softmax_ln_4096x1024: softmax(layer_norm(x) * gamma + beta) row by row in one pass per
//   row (the row stays in L1), in float with 16 partial sums per reduction.
// Work is split over KILN_NUM_THREADS std::threads (0 or unset: every core), contiguous
// parts, so that the comparison with Kiln uses the same thread count.
//
// Prints `RESULT name=... impl=hand ms=... p10=... p90=... threads=... err=...`; err is
// max |hand - reference| / max |reference| against a double-precision reference.
#include "bench_util.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

using I64 = std::int64_t;
using kiln_bench::Result;

__attribute__((noinline)) void chain_loop(const float* __restrict a, const float* __restrict b, const float* __restrict c,
                                          float* __restrict y, I64 begin, I64 end) {
    const float k = 0.79788456080286535588f;  // sqrt(2 / pi)
    for (I64 i = begin; i < end; ++i) {
        const float t = a[i] * b[i] + c[i];
        const float g = 0.5f * t * (1.0f + std::tanh(k * (t + 0.044715f * t * t * t)));
        const float v = a[i];
        float s;
        if (v >= 0.0f) {
            s = 1.0f / (1.0f + std::exp(-v));
        } else {
            const float e = std::exp(v);
            s = e / (1.0f + e);
        }
        y[i] = g * s;
    }
}

constexpr int kLanes = 16;

float lane_sum(const float* acc) {
    float s = 0;
    for (int l = 0; l < kLanes; ++l) s += acc[l];
    return s;
}

__attribute__((noinline)) void softmax_ln_rows(const float* __restrict x, const float* __restrict gamma,
                                               const float* __restrict beta, float* __restrict y, I64 d, I64 row_begin,
                                               I64 row_end) {
    const I64 dv = d / kLanes * kLanes;
    for (I64 r = row_begin; r < row_end; ++r) {
        const float* xi = x + r * d;
        float* yi = y + r * d;
        // mean
        float acc[kLanes] = {};
        for (I64 k = 0; k < dv; k += kLanes)
            for (int l = 0; l < kLanes; ++l) acc[l] += xi[k + l];
        float sum = lane_sum(acc);
        for (I64 k = dv; k < d; ++k) sum += xi[k];
        const float mean = sum / float(d);
        // biased variance, second pass
        float acc2[kLanes] = {};
        for (I64 k = 0; k < dv; k += kLanes)
            for (int l = 0; l < kLanes; ++l) {
                const float c = xi[k + l] - mean;
                acc2[l] += c * c;
            }
        float var = lane_sum(acc2);
        for (I64 k = dv; k < d; ++k) var += (xi[k] - mean) * (xi[k] - mean);
        var /= float(d);
        const float inv = 1.0f / std::sqrt(var + 1e-5f);
        // normalise and find the maximum
        float mx[kLanes];
        for (int l = 0; l < kLanes; ++l) mx[l] = -INFINITY;
        for (I64 k = 0; k < dv; k += kLanes)
            for (int l = 0; l < kLanes; ++l) {
                const float v = (xi[k + l] - mean) * inv * gamma[k + l] + beta[k + l];
                yi[k + l] = v;
                mx[l] = mx[l] > v ? mx[l] : v;
            }
        float m = -INFINITY;
        for (int l = 0; l < kLanes; ++l) m = m > mx[l] ? m : mx[l];
        for (I64 k = dv; k < d; ++k) {
            yi[k] = (xi[k] - mean) * inv * gamma[k] + beta[k];
            m = m > yi[k] ? m : yi[k];
        }
        // exp and sum, then scale
        float es = 0;
        for (I64 k = 0; k < d; ++k) es += (yi[k] = std::exp(yi[k] - m));
        const float rs = 1.0f / es;
        for (I64 k = 0; k < d; ++k) yi[k] *= rs;
    }
}

std::vector<float> randn(I64 n, unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = dist(gen);
    return v;
}

double rel_err(const std::vector<float>& got, const std::vector<double>& ref) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double d = std::fabs(double(got[i]) - ref[i]);
        num = std::isnan(d) ? INFINITY : std::max(num, d);
        den = std::max(den, std::fabs(ref[i]));
    }
    return den > 0 ? num / den : num;
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
    const int threads = kiln_bench::threads_from_env();
    kiln_bench::TimingPlan plan;
    plan.budget_ms = quick ? 300 : 1500;
    plan.min_reps = quick ? 3 : 5;
    std::printf("# hand_loops: -O3%s, %d thread(s)\n",
#if defined(__AVX512F__)
                " -march=native (AVX-512)",
#elif defined(__AVX2__)
                " -march=native (AVX2)",
#else
                "",
#endif
                threads);
    int failures = 0;

    {  // chain
        const I64 n = I64{1} << 24;
        const std::vector<float> a = randn(n, 1), b = randn(n, 2), c = randn(n, 3);
        std::vector<float> y(static_cast<std::size_t>(n));
        auto body = [&] {
            kiln_bench::parallel_parts(n, threads, [&](I64 lo, I64 hi) { chain_loop(a.data(), b.data(), c.data(), y.data(), lo, hi); });
        };
        body();
        const kiln_bench::Timing t = kiln_bench::time_calls(body, plan);
        std::vector<double> ref(static_cast<std::size_t>(n));
        for (std::size_t i = 0; i < ref.size(); ++i) {
            const double u = double(a[i]) * double(b[i]) + double(c[i]);
            ref[i] = 0.5 * u * (1.0 + std::tanh(0.79788456080286535588 * (u + 0.044715 * u * u * u))) / (1.0 + std::exp(-double(a[i])));
        }
        const double err = rel_err(y, ref);
        failures += err <= 1e-3 ? 0 : 1;
        Result("chain_16M", "hand").timing(t).add("bytes", 16.0 * double(n), 10).add_int("threads", threads).add("err", err, 3).print();
    }
    {  // softmax(layer_norm)
        const I64 m = 4096, d = 1024;
        const std::vector<float> x = randn(m * d, 10), g0 = randn(d, 11), b0 = randn(d, 12);
        std::vector<float> gamma(g0.size()), beta(b0.size()), y(x.size());
        for (std::size_t i = 0; i < gamma.size(); ++i) {
            gamma[i] = 1.0f + 0.1f * g0[i];
            beta[i] = 0.1f * b0[i];
        }
        auto body = [&] {
            kiln_bench::parallel_parts(m, threads, [&](I64 lo, I64 hi) { softmax_ln_rows(x.data(), gamma.data(), beta.data(), y.data(), d, lo, hi); });
        };
        body();
        const kiln_bench::Timing t = kiln_bench::time_calls(body, plan);
        std::vector<double> ref(x.size());
        for (I64 r = 0; r < m; ++r) {
            const float* xi = x.data() + r * d;
            double* yi = ref.data() + r * d;
            double mean = 0, var = 0, mx = -INFINITY, s = 0;
            for (I64 k = 0; k < d; ++k) mean += xi[k];
            mean /= double(d);
            for (I64 k = 0; k < d; ++k) var += (xi[k] - mean) * (xi[k] - mean);
            const double inv = 1.0 / std::sqrt(var / double(d) + 1e-5);
            for (I64 k = 0; k < d; ++k) mx = std::max(mx, yi[k] = (xi[k] - mean) * inv * gamma[static_cast<std::size_t>(k)] + beta[static_cast<std::size_t>(k)]);
            for (I64 k = 0; k < d; ++k) s += (yi[k] = std::exp(yi[k] - mx));
            for (I64 k = 0; k < d; ++k) yi[k] /= s;
        }
        const double err = rel_err(y, ref);
        failures += err <= 1e-3 ? 0 : 1;
        Result("softmax_ln_4096x1024", "hand").timing(t).add("bytes", 8.0 * double(m * d), 10).add_int("threads", threads).add("err", err, 3).print();
    }
    if (failures != 0) std::fprintf(stderr, "hand_loops: %d result(s) differ from the reference\n", failures);
    return failures == 0 ? 0 : 1;
}
