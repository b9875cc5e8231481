#include "src/support/check.h"

namespace kiln::support {
void throw_internal(const char* file, int line, const std::string& msg) {
    throw std::logic_error(std::string("kiln internal error at ") + file + ":" + std::to_string(line) +
                           ": " + msg);
}
}  // namespace kiln::support
