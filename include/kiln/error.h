#pragma once
// kiln::Error: the one exception type Kiln throws for a caller's mistake (a malformed trace,
// a bad call, a malformed environment variable). Its message names the argument, the
// expected and the actual value.
#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace kiln
