// The doctest main of kiln_tests. Test cases live in tests/test_*.cpp (and reference
// implementations in tests/reference*.cpp); ctest runs each test case in its own
// process (tests/doctest_discovery.cmake). Run the binary directly for all of them, or
// e.g. `kiln_tests --test-case="*matmul*"`; `--help` lists doctest's options.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
