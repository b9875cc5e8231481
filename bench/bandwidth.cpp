// bandwidth: the memory bandwidth of this machine, STREAM-like, for the bandwidth floors of
// scripts/bench.sh (bytes a workload must move / measured bandwidth).
//
//   usage: bandwidth [--quick]
//
// Kernels on arrays of doubles far larger than the caches (3 x 256 MiB by default):
//   copy:  a[i] = b[i]              counts 16 bytes per element (1 read + 1 write)
//   triad: a[i] = b[i] + s * c[i]   counts 24 bytes per element (2 reads + 1 write)
// Bytes are counted as STREAM counts them: without the write-allocate traffic of the
// stores. Best (highest) rate of several runs, single-threaded and with KILN_NUM_THREADS
// std::threads (0 or unset: every core), each thread on its own contiguous part, which it
// also initialised (first touch). Compiled with -O3 -march=native (bench/CMakeLists.txt).
//
// Prints `RESULT name=bw_copy|bw_triad impl=machine threads=N gbs=... runs=... mib=...`.
#include "bench_util.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace {

using I64 = std::int64_t;

__attribute__((noinline)) void copy_part(double* __restrict a, const double* __restrict b, I64 lo, I64 hi) {
    for (I64 i = lo; i < hi; ++i) a[i] = b[i];
}

__attribute__((noinline)) void triad_part(double* __restrict a, const double* __restrict b, const double* __restrict c,
                                          double s, I64 lo, I64 hi) {
    for (I64 i = lo; i < hi; ++i) a[i] = b[i] + s * c[i];
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
    const I64 n = quick ? (I64{1} << 24) : (I64{1} << 25);  // doubles per array
    const int runs = quick ? 4 : 8;
    const int threads = kiln_bench::threads_from_env();
    const std::unique_ptr<double[]> a(new double[static_cast<std::size_t>(n)]), b(new double[static_cast<std::size_t>(n)]),
        c(new double[static_cast<std::size_t>(n)]);
    std::printf("# bandwidth: 3 arrays of %lld doubles (%.0f MiB each), best of %d runs\n", static_cast<long long>(n),
                double(n) * 8 / (1 << 20), runs);

    const int counts[] = {1, threads};
    for (int ti = 0; ti < (threads > 1 ? 2 : 1); ++ti) {
        const int t = counts[ti];
        kiln_bench::parallel_parts(n, t, [&](I64 lo, I64 hi) {
            for (I64 i = lo; i < hi; ++i) {
                a[static_cast<std::size_t>(i)] = 0.0;
                b[static_cast<std::size_t>(i)] = 1.0;
                c[static_cast<std::size_t>(i)] = 2.0;
            }
        });
        struct Kernel { const char* name; double bytes_per_elem; };
        for (const Kernel& k : {Kernel{"bw_copy", 16.0}, Kernel{"bw_triad", 24.0}}) {
            const bool triad = k.bytes_per_elem == 24.0;
            double best_ms = INFINITY;
            for (int r = 0; r < runs; ++r) {
                const auto t0 = kiln_bench::Clock::now();
                kiln_bench::parallel_parts(n, t, [&](I64 lo, I64 hi) {
                    if (triad) triad_part(a.get(), b.get(), c.get(), 3.0, lo, hi);
                    else copy_part(a.get(), b.get(), lo, hi);
                });
                best_ms = std::min(best_ms, kiln_bench::ms_since(t0));
            }
            const double gbs = k.bytes_per_elem * double(n) / (best_ms * 1e6);
            kiln_bench::Result(k.name, "machine").add_int("threads", t).add("gbs", gbs, 5).add("best_ms", best_ms, 5)
                .add_int("runs", runs).add("mib", 3.0 * double(n) * 8 / (1 << 20), 5).print();
        }
    }
    // Keep the stores observable.
    volatile double sink = a[static_cast<std::size_t>(n / 2)];
    (void)sink;
    return 0;
}
