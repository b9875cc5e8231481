// The doctest main of kiln_tests. Test cases live in tests/test_*.cpp (and reference
// implementations in tests/reference*.cpp); ctest runs each test case in its own
// process (tests/doctest_discovery.cmake). Run the binary directly for all of them, or
// e.g. `kiln_tests --test-case="*matmul*"`; `--help` lists doctest's options.
//
// Exit status: doctest's, except 77 (ctest's SKIP_RETURN_CODE) when the run passed, a case
// called kiln::test::skip (tests/skip.h) and no assertion ran: only a run that did nothing
// but skip is reported as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "skip.h"

#include <atomic>

namespace {

std::atomic<int> g_asserts{0};

// Records how many assertions the run made (passed or failed; WARN_* ones do not count).
struct AssertCounter : doctest::IReporter {
    explicit AssertCounter(const doctest::ContextOptions&) {}
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_run_end(const doctest::TestRunStats& s) override { g_asserts.store(s.numAsserts); }
    void test_case_start(const doctest::TestCaseData&) override {}
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats&) override {}
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

DOCTEST_REGISTER_LISTENER("kiln_assert_counter", 1, AssertCounter);

int main(int argc, char** argv) {
    doctest::Context context(argc, argv);
    const int rc = context.run();
    if (context.shouldExit()) return rc;  // --help, --list-test-cases, ...
    if (rc == 0 && kiln::test::skips_recorded() > 0 && g_asserts.load() == 0) return 77;
    return rc;
}
