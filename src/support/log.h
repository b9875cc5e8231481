#pragma once
// Kiln's logger (spdlog, named "kiln", to stderr). Level from Options::log_level (KILN_LOG).
#include <spdlog/spdlog.h>

#include <string>

namespace kiln::support {

spdlog::logger& log();
// Sets the level: off, error, warn, info, debug, trace. Returns false for an unknown name.
bool set_log_level(const std::string& level);
bool is_log_level(const std::string& level);

}  // namespace kiln::support
