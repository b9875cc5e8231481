#pragma once
// The Chrome-trace writer behind KILN_TRACE=file.json: a JSON file that Perfetto and
// chrome://tracing open. Events: calls of a function and each of its groups with the tier it
// ran on (complete events, per calling thread), compiles (backend, tier, duration, outcome;
// on the compile thread), guard failures with the failing fact and deopts (instant events).
// Events are buffered in memory (bounded: past kMaxEvents they are counted as dropped) and
// the file is written when the last owner (the engine or a function it loaded) lets go.
// Observes only: nothing reads the trace to decide anything.
#include "src/support/limits.h"

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::profiling {

class ChromeTrace {
public:
    using Clock = std::chrono::steady_clock;
    static constexpr std::size_t kMaxEvents = limits::trace_max_events;

    explicit ChromeTrace(std::string path);
    ~ChromeTrace();  // writes the file (errors are logged, never thrown)
    ChromeTrace(const ChromeTrace&) = delete;
    ChromeTrace& operator=(const ChromeTrace&) = delete;

    // A span [t0, t1) named `name` in category `cat` ("call", "group", "compile") on the
    // calling thread; `args` is a JSON object body without braces (e.g. "\"tier\":2") or empty.
    void complete(std::string_view cat, std::string_view name, Clock::time_point t0, Clock::time_point t1,
                  std::string_view args = {});
    // A moment: "guard_failure", "deopt", ...
    void instant(std::string_view cat, std::string_view name, std::string_view args = {});

    const std::string& path() const { return path_; }
    // JSON string literal body: quotes, backslashes and control characters escaped.
    static std::string escape(std::string_view s);

private:
    void add(std::string event);
    double us(Clock::time_point t) const;
    static std::uint64_t thread_id();

    const std::string path_;
    const Clock::time_point origin_ = Clock::now();
    std::mutex mu_;
    std::vector<std::string> events_;
    std::uint64_t dropped_ = 0;
};

}  // namespace kiln::profiling
