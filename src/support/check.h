#pragma once
// Two kinds of failure, two macros:
//   KILN_USER_CHECK(cond, msg)  the caller's mistake: throws kiln::Error(msg)
//   KILN_CHECK(cond, msg)       Kiln's own invariant: throws std::logic_error naming the
//                               file and line (a bug in Kiln, never the caller's fault)
// `msg` is streamed: KILN_USER_CHECK(n > 0, "expected n > 0, got " << n).
#include <kiln/error.h>

#include <sstream>
#include <stdexcept>
#include <string>

namespace kiln::support {
[[noreturn]] void throw_internal(const char* file, int line, const std::string& msg);
}  // namespace kiln::support

#define KILN_USER_ERROR(msg)                                 \
    do {                                                     \
        std::ostringstream kiln_os_;                         \
        kiln_os_ << msg;                                     \
        throw ::kiln::Error(kiln_os_.str());                 \
    } while (0)

#define KILN_USER_CHECK(cond, msg)    \
    do {                              \
        if (!(cond)) KILN_USER_ERROR(msg); \
    } while (0)

#define KILN_CHECK(cond, msg)                                                  \
    do {                                                                       \
        if (!(cond)) {                                                         \
            std::ostringstream kiln_os_;                                       \
            kiln_os_ << msg;                                                   \
            ::kiln::support::throw_internal(__FILE__, __LINE__, kiln_os_.str()); \
        }                                                                      \
    } while (0)

#define KILN_UNREACHABLE(msg)                                           \
    do {                                                                \
        std::ostringstream kiln_os_;                                    \
        kiln_os_ << msg;                                                \
        ::kiln::support::throw_internal(__FILE__, __LINE__, kiln_os_.str()); \
    } while (0)
