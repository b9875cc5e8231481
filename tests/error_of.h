#pragma once
// error_of(f): the message of the kiln::Error that `f` throws, for tests that check what an
// error says. Returns "" when f throws none (a test then fails on the text it expected).
#include <kiln/error.h>

#include <string>

namespace kiln::test {

template <class F> std::string error_of(F&& f) {
    try {
        f();
    } catch (const kiln::Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace kiln::test
