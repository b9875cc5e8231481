#include "profiling/chrome_trace.h"

#include "src/support/log.h"

#include <atomic>
#include <cstdio>
#include <fstream>

namespace kiln::profiling {

ChromeTrace::ChromeTrace(std::string path) : path_(std::move(path)) {}

ChromeTrace::~ChromeTrace() {
    std::ofstream out(path_, std::ios::trunc);
    if (!out) {
        support::log().error("KILN_TRACE={}: cannot write the trace file", path_);
        return;
    }
    out << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"kiln\",\"dropped_events\":" << dropped_
        << "},\"traceEvents\":[\n";
    for (std::size_t i = 0; i < events_.size(); ++i) out << events_[i] << (i + 1 < events_.size() ? ",\n" : "\n");
    out << "]}\n";
    if (!out) support::log().error("KILN_TRACE={}: writing the trace file failed", path_);
}

std::string ChromeTrace::escape(std::string_view s) {
    std::string r;
    r.reserve(s.size());
    for (char c : s) {
        if (c == '"' || c == '\\') {
            r += '\\';
            r += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
            r += buf;
        } else {
            r += c;
        }
    }
    return r;
}

double ChromeTrace::us(Clock::time_point t) const { return std::chrono::duration<double, std::micro>(t - origin_).count(); }

std::uint64_t ChromeTrace::thread_id() {
    static std::atomic<std::uint64_t> next{1};
    thread_local const std::uint64_t id = next.fetch_add(1, std::memory_order_relaxed);
    return id;
}

void ChromeTrace::add(std::string event) {
    std::lock_guard<std::mutex> lock(mu_);
    if (events_.size() >= kMaxEvents) {
        ++dropped_;
        return;
    }
    events_.push_back(std::move(event));
}

void ChromeTrace::complete(std::string_view cat, std::string_view name, Clock::time_point t0, Clock::time_point t1,
                     std::string_view args) {
    char head[160];
    std::snprintf(head, sizeof head, "\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":1,\"tid\":%llu", us(t0),
                  std::chrono::duration<double, std::micro>(t1 - t0).count(),
                  static_cast<unsigned long long>(thread_id()));
    add("{\"name\":\"" + escape(name) + "\",\"cat\":\"" + std::string(cat) + "\"," + head + ",\"args\":{" +
        std::string(args) + "}}");
}

void ChromeTrace::instant(std::string_view cat, std::string_view name, std::string_view args) {
    char head[128];
    std::snprintf(head, sizeof head, "\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,\"pid\":1,\"tid\":%llu", us(Clock::now()),
                  static_cast<unsigned long long>(thread_id()));
    add("{\"name\":\"" + escape(name) + "\",\"cat\":\"" + std::string(cat) + "\"," + head + ",\"args\":{" +
        std::string(args) + "}}");
}

}  // namespace kiln::profiling
