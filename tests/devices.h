// devices.h — the device parameter of the numeric suites: one test body, run on every backend.
//
//   DEVICE_TEST_CASE("softmax against closed forms") {
//     Tensor x = from_vector<double>({1, 2, 3}).to(dev);  // dev: the Device this run is on
//     ...
//   }
//
// registers two doctest cases, "softmax against closed forms (cpu)" and "... (cuda)", each
// calling the body with its Device. Without a GPU the cuda case reports itself skipped (skip.h),
// so ctest counts what did not run instead of passing it silently.
#pragma once
#include "skip.h"

#define DEVICE_TEST_CASE(name) DEVICE_TEST_CASE_WITH_BODY(name, DOCTEST_ANONYMOUS(device_test_body_))
#define DEVICE_TEST_CASE_WITH_BODY(name, body)                                 \
  static void body(::ampgrad::Device dev);                                   \
  TEST_CASE(name " (cpu)") { body(::ampgrad::Device::cpu()); }              \
  TEST_CASE(name " (cuda)") {                                                \
    SKIP_WITHOUT_GPU();                                                      \
    body(::ampgrad::Device::cuda());                                         \
  }                                                                          \
  static void body([[maybe_unused]] ::ampgrad::Device dev)
