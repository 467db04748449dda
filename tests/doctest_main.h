// doctest_main.h — the run both doctest mains share (tests/test_main.cpp, and the MPI suites'
// distributed/tests/mpi_test_main.cpp): it runs the cases and returns the exit status ctest
// reads — 0 passed, 1 failed, 77 (kSkipped, SKIP_RETURN_CODE) when every case that ran skipped
// itself (skip.h) and none failed. A failure is never reported as a skip, and a run in which
// no case passes the filters fails: ctest runs each case by its name (--test-case=NAME), and a
// name that does not reach the binary whole (CMake cuts a name at ';') would run nothing and pass.
// Included once, by the file that defines DOCTEST_CONFIG_IMPLEMENT.
#pragma once
#include <doctest/doctest.h>

#include <iostream>

#include "skip.h"

namespace ampgrad_test {

constexpr int kSkipped = 77;

struct Counts {
  int passing_filters = -1;  // set when a run ends (a --list-test-cases run is no run)
  int ended = 0, skipped = 0;
  bool skip_now = false;  // the running case called skip_case()
};
Counts counts;

// A skip comes before the case's first check: a check before it runs only where the case is
// reported skipped, so it could never be seen to fail. (doctest keeps the count in g_cs.)
void skip_case(const char* file, int line) {
  if (doctest::detail::g_cs->numAssertsCurrentTest_atomic > 0) ADD_FAIL_CHECK_AT(file, line, "a case skips before its first check, not after it");
  counts.skip_now = true;
}

struct CountSkips : doctest::IReporter {
  explicit CountSkips(const doctest::ContextOptions&) {}
  void test_case_start(const doctest::TestCaseData&) override { counts.skip_now = false; }
  void test_case_end(const doctest::CurrentTestCaseStats& s) override {
    ++counts.ended;
    counts.skipped += counts.skip_now && s.failure_flags == 0;
  }
  void test_run_end(const doctest::TestRunStats& s) override { counts.passing_filters = int(s.numTestCasesPassingFilters); }
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
DOCTEST_REGISTER_LISTENER("count_skips", 1, CountSkips);

int run_cases(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int rc = context.run();
  if (rc != 0) return rc;
  if (counts.passing_filters == 0) {
    std::cerr << "no test case matched the filters (a name with ';' in it is cut there by CMake: rename the case)\n";
    return 1;
  }
  return counts.ended > 0 && counts.skipped == counts.ended ? kSkipped : 0;
}

}  // namespace ampgrad_test
