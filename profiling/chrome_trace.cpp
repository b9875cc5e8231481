#include "profiling/chrome_trace.h"

#include "src/support/log.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace kiln::profiling {

ChromeTrace::ChromeTrace(std::string path) : path_(std::move(path)) {
    std::lock_guard<std::mutex> lock(mu_);
    errno = 0;
    file_ = std::fopen(path_.c_str(), "w");
    if (!file_) {
        failures_.fetch_add(1, std::memory_order_relaxed);
        support::log().error("KILN_TRACE={}: cannot create the trace file: {}", path_,
                             errno ? std::strerror(errno) : "unknown error");
        return;
    }
    // The head goes out now, so that a file that cannot be written is reported at start.
    std::fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", file_);
    std::fflush(file_);
    check("writing the trace file failed");
}

ChromeTrace::~ChromeTrace() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!file_) return;
    std::fprintf(file_, "%s],\"otherData\":{\"producer\":\"kiln\",\"dropped_events\":%llu}}\n", written_ ? "\n" : "",
                 static_cast<unsigned long long>(dropped_));
    std::fflush(file_);
    if (!check("completing the trace file failed")) return;
    // A file whose directory went away was written into nothing.
    std::error_code ec;
    if (!std::filesystem::exists(path_, ec)) {
        failures_.fetch_add(1, std::memory_order_relaxed);
        support::log().error("KILN_TRACE={}: the trace file was removed while it was written", path_);
    }
    if (std::fclose(file_) != 0) {
        failures_.fetch_add(1, std::memory_order_relaxed);
        support::log().error("KILN_TRACE={}: closing the trace file failed: {}", path_, std::strerror(errno));
    }
    file_ = nullptr;
}

bool ChromeTrace::check(const char* doing) {
    if (!std::ferror(file_)) return true;
    const int err = errno;
    failures_.fetch_add(1, std::memory_order_relaxed);
    support::log().error("KILN_TRACE={}: {}: {}; the trace stops here", path_, doing, err ? std::strerror(err) : "unknown error");
    std::fclose(file_);
    file_ = nullptr;
    return false;
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

void ChromeTrace::add(const std::string& event) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!file_) return;
    if (written_ >= kMaxEvents) {
        ++dropped_;
        return;
    }
    std::fputs(written_ ? ",\n" : "", file_);
    std::fwrite(event.data(), 1, event.size(), file_);
    ++written_;
    check("writing the trace file failed");
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
