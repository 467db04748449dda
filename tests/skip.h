// skip.h — for test cases that cannot run here (no GPU, no data set, running as root). Such a
// case prints a marker that ctest's SKIP_REGULAR_EXPRESSION (tests/CMakeLists.txt) turns into
// a visible "Skipped" — never a silent pass, and never hidden from the list as doctest::skip is.
#pragma once
#include <doctest/doctest.h>

#include "tensor/device.h"

#define SKIP_TEST_IF(cond, reason)          \
  if (cond) {                               \
    MESSAGE("SKIPPED: " << reason);         \
    return;                                 \
  }
#define SKIP_WITHOUT_GPU() SKIP_TEST_IF(!::ampgrad::cuda::is_available(), ::ampgrad::cuda::unavailable_reason())
