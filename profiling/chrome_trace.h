#pragma once
// The Chrome-trace writer behind KILN_TRACE=file.json: a JSON file that Perfetto and
// chrome://tracing open. Events: calls of a function and each of its groups with the tier it
// ran on (complete events, per calling thread), compiles (backend, tier, duration, outcome;
// on the compile thread), guard failures with the failing fact and deopts (instant events).
// The file is created when the trace is made (at engine start), events are written to it as
// they come (bounded: past kMaxEvents they are counted as dropped), and it is completed when
// the last owner (the engine or a function it loaded) lets go. A file that cannot be created
// or written is logged as an error and counted (write_failures(), EngineStats'
// trace_write_failures); from then on events are not written. Never throws.
// Observes only: nothing reads the trace to decide anything.
#include "src/support/limits.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

namespace kiln::profiling {

class ChromeTrace {
public:
    using Clock = std::chrono::steady_clock;
    static constexpr std::size_t kMaxEvents = limits::trace_max_events;

    explicit ChromeTrace(std::string path);  // creates the file and writes its head
    ~ChromeTrace();                          // completes the file
    ChromeTrace(const ChromeTrace&) = delete;
    ChromeTrace& operator=(const ChromeTrace&) = delete;

    // A span [t0, t1) named `name` in category `cat` ("call", "group", "compile") on the
    // calling thread; `args` is a JSON object body without braces (e.g. "\"tier\":2") or empty.
    void complete(std::string_view cat, std::string_view name, Clock::time_point t0, Clock::time_point t1,
                  std::string_view args = {});
    // A moment: "guard_failure", "deopt", ...
    void instant(std::string_view cat, std::string_view name, std::string_view args = {});

    const std::string& path() const { return path_; }
    // Failed attempts to create or write the file (each logged as an error); 0 while it is fine.
    std::uint64_t write_failures() const { return failures_.load(std::memory_order_relaxed); }
    // JSON string literal body: quotes, backslashes and control characters escaped.
    static std::string escape(std::string_view s);

private:
    void add(const std::string& event);
    // Checks the stream after a write; on error logs `doing` with the reason, counts it and
    // closes the file (under mu_).
    bool check(const char* doing);
    double us(Clock::time_point t) const;
    static std::uint64_t thread_id();

    const std::string path_;
    const Clock::time_point origin_ = Clock::now();
    std::mutex mu_;
    std::FILE* file_ = nullptr;  // null once it failed
    std::uint64_t written_ = 0;  // events written
    std::uint64_t dropped_ = 0;
    std::atomic<std::uint64_t> failures_{0};
};

}  // namespace kiln::profiling
