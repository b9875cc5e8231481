#include "src/support/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace kiln::support {
namespace {
struct Level {
    const char* name;
    spdlog::level::level_enum level;
};
constexpr Level kLevels[] = {{"off", spdlog::level::off},   {"error", spdlog::level::err},
                             {"warn", spdlog::level::warn}, {"info", spdlog::level::info},
                             {"debug", spdlog::level::debug}, {"trace", spdlog::level::trace}};
}  // namespace

spdlog::logger& log() {
    static std::shared_ptr<spdlog::logger> logger = [] {
        auto l = spdlog::stderr_color_mt("kiln");
        l->set_level(spdlog::level::warn);
        l->set_pattern("[kiln %l] %v");
        return l;
    }();
    return *logger;
}

bool is_log_level(const std::string& level) {
    for (const auto& l : kLevels)
        if (level == l.name) return true;
    return false;
}

bool set_log_level(const std::string& level) {
    for (const auto& l : kLevels)
        if (level == l.name) {
            log().set_level(l.level);
            return true;
        }
    return false;
}

}  // namespace kiln::support
