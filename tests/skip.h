#pragma once
// Skipping a test case, or a part of one, with a printed reason (missing hardware, backend or
// data). kiln::test::skip(reason) prints "skipped: <reason>" and records the skip; it does not
// leave the case: return after it, or go on with the parts that can run.
//
// How ctest reports it (tests/main.cpp, tests/doctest_discovery.cmake): the process exits 77,
// which ctest reports as skipped, only when the run passed, recorded a skip and ran no
// assertion at all. So a case that skipped everything is "skipped"; a case that skipped one
// part and checked another "passed"; a case that printed a skip and then failed "failed".
#include <atomic>
#include <iostream>
#include <source_location>
#include <string_view>

namespace kiln::test {

// Skips recorded in this process.
inline std::atomic<int> g_skips{0};

inline void skip(std::string_view reason, std::source_location where = std::source_location::current()) {
    g_skips.fetch_add(1, std::memory_order_relaxed);
    std::string_view file = where.file_name();
    if (const auto slash = file.find_last_of("/\\"); slash != std::string_view::npos) file.remove_prefix(slash + 1);
    std::cout << file << ":" << where.line() << ": skipped: " << reason << std::endl;
}

inline int skips_recorded() { return g_skips.load(std::memory_order_relaxed); }

}  // namespace kiln::test
