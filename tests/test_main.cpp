// test_main.cpp — doctest's main, shared by every suite: doctest_main.h's run, whose exit status
// tells ctest passed, failed or skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include "doctest_main.h"

int main(int argc, char** argv) { return ampgrad_test::run_cases(argc, argv); }
