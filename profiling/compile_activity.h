#pragma once
// Whether a compile ran beside a timed call. A tier's compile (on a compile-queue thread, or
// on the caller's with KILN_ASYNC_COMPILE=0) takes a core, cache and memory bandwidth from
// the calls running meanwhile, and a call that shares its threads' work across cores waits
// for the one the compile holds. Such a call's time says little about its code, so the
// executor keeps it out of the per-signature record that the tier-up policy compares kinds
// of code by (jit/exec/run_plan.cpp), and only there: the group's totals keep it.
// Process-wide: the engines of a process share its cores.
//
// Measured: an MLP's 784 -> 1024 -> 1024 -> 10 at batch 8 on 2 threads timed its first
// tier-2 calls while the next group's tier-2 compile held the other core (130-158 us a call
// against 64-81 us once it was done) and pinned tier 1 (92-120 us) in about half of the
// processes: 0.215 ms a call instead of 0.145 (AVX2, AMD EPYC Zen 4).
#include <atomic>
#include <cstdint>

namespace kiln::profiling {

class CompileActivity {
public:
    // What a timed call reads as it starts.
    struct Mark {
        std::uint64_t events = 0;  // compiles started and ended so far
        bool running = false;      // a compile was running
    };
    static Mark mark() {
        Mark m;
        m.events = events_.load(std::memory_order_acquire);
        m.running = running_.load(std::memory_order_acquire) > 0;
        return m;
    }
    // No compile ran at `m`, and none started or ended since.
    static bool quiet_since(const Mark& m) { return !m.running && events_.load(std::memory_order_acquire) == m.events; }

    // Held around one compile.
    class Scope {
    public:
        Scope() {
            running_.fetch_add(1, std::memory_order_acq_rel);
            events_.fetch_add(1, std::memory_order_acq_rel);
        }
        ~Scope() {
            events_.fetch_add(1, std::memory_order_acq_rel);
            running_.fetch_sub(1, std::memory_order_acq_rel);
        }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;
    };

private:
    static inline std::atomic<std::uint64_t> events_{0};
    static inline std::atomic<std::int64_t> running_{0};
};

}  // namespace kiln::profiling
