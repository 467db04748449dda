// skip.h — for test cases that cannot run here (no GPU, no data set, running as root). Such a
// case opens with SKIP_TEST_IF (or SKIP_WITHOUT_GPU); when it skips, the run exits 77, which
// ctest's SKIP_RETURN_CODE shows as "Skipped" — never a silent pass, never hidden from the list
// as doctest::skip is. A run counts as skipped only when every case in it skipped and none
// failed (doctest_main.h), so a skip never hides a failure.
#pragma once
#include <doctest/doctest.h>

#include "tensor/device.h"

namespace ampgrad_test {
void skip_case(const char* file, int line);  // doctest_main.h: notes the skip; a check before it fails the case
}

#define SKIP_TEST_IF(cond, reason)                       \
  if (cond) {                                            \
    ::ampgrad_test::skip_case(__FILE__, __LINE__);       \
    MESSAGE("SKIPPED: " << reason);                      \
    return;                                              \
  }
#define SKIP_WITHOUT_GPU() SKIP_TEST_IF(!::ampgrad::cuda::is_available(), ::ampgrad::cuda::unavailable_reason())
