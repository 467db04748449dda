// test_main.cpp — doctest's main, shared by every suite, with one guard: a run in which no test
// case passes the filters fails. ctest runs each case by its name (--test-case=NAME), and a name
// that does not reach the binary whole (CMake cuts a name at ';') would otherwise run nothing and
// pass.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <iostream>

namespace {

int cases_run = -1;  // how many cases passed the filters, once a run has ended

struct CountCases : doctest::IReporter {
  explicit CountCases(const doctest::ContextOptions&) {}
  void test_run_end(const doctest::TestRunStats& stats) override { cases_run = int(stats.numTestCasesPassingFilters); }
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
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

DOCTEST_REGISTER_LISTENER("count_cases", 1, CountCases);

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int rc = context.run();
  if (cases_run == 0) {
    std::cerr << "no test case matched the filters (a name with ';' in it is cut there by CMake: rename the case)\n";
    return 1;
  }
  return rc;
}
