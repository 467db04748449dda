// test_profile.cpp — the Profile counts each kernel call once, inside backward() and outside
// apart, its times add up to no more than the wall time; nested kernels, nested Profiles, calls
// that throw, and calls made while no Profile lives.
#include <doctest/doctest.h>

#include <sstream>

#include "autograd/ops.h"
#include "devices.h"
#include "tensor/kernels.h"
#include "tensor/profile.h"

using namespace ampgrad;

static const ProfileRow* find(const std::vector<ProfileRow>& rows, const std::string& kernel, bool backward) {
  for (const ProfileRow& r : rows)
    if (r.kernel == kernel && r.backward == backward) return &r;
  return nullptr;
}

DEVICE_TEST_CASE("a Profile counts each kernel call, inside backward() and outside apart") {
  manual_seed(1);
  Tensor x = randn({8, 5}).to(dev).requires_grad_(), w = randn({5, 3}).to(dev).requires_grad_();
  (void)exp(x.detach());  // before the Profile: not counted
  Profile prof(dev.is_cuda());
  Tensor y = relu(matmul(x, w));  // forward: one matmul, one relu
  sum(y).backward();              // backward: dx = g wᵀ and dw = xᵀ g, and relu's mask
  (void)relu(y.detach());         // after backward(): outside it again
  const std::vector<ProfileRow> rows = prof.rows();
  CHECK_FALSE(find(rows, "exp", false));
  REQUIRE(find(rows, "matmul", false));
  CHECK(find(rows, "matmul", false)->calls == 1);
  REQUIRE(find(rows, "matmul", true));
  CHECK(find(rows, "matmul", true)->calls == 2);
  REQUIRE(find(rows, "relu", false));
  CHECK(find(rows, "relu", false)->calls == 2);
  REQUIRE(find(rows, "relu_backward", true));
  CHECK(find(rows, "relu_backward", true)->calls == 1);
  CHECK_FALSE(find(rows, "relu_backward", false));

  double total = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i > 0) CHECK(rows[i - 1].ms >= rows[i].ms);  // the largest first
    total += rows[i].ms;
  }
  CHECK(total <= prof.wall_ms());
  std::ostringstream table;
  prof.print(table);
  CHECK(table.str().rfind("kernel          phase        calls    total ms    share\n", 0) == 0);
  CHECK(table.str().find("\nmatmul          backward         2") != std::string::npos);
  CHECK(table.str().find("\n(outside)") != std::string::npos);
  CHECK(table.str().find("100.0%\n") != std::string::npos);  // the wall time's line
}

TEST_CASE("a kernel's own kernel calls are part of its time, not rows of their own") {
  // col2im starts from an image of zeros, made by kernels::fill_.
  Tensor cols = randn({9, 8});
  Profile prof;
  (void)kernels::col2im(cols, {1, 2, 4, 4}, 2, 2, 1, 0);
  const std::vector<ProfileRow> rows = prof.rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].kernel == "col2im");
  CHECK(rows[0].calls == 1);
}

TEST_CASE("a kernel call that throws is not counted, and the ones after it are") {
  Tensor x = ones({2, 3});
  Profile prof;
  CHECK_THROWS_AS(kernels::sum(x, {7}, false), Error);  // the dim is checked inside the backend
  (void)exp(x);
  const std::vector<ProfileRow> rows = prof.rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].kernel == "exp");
  CHECK(rows[0].calls == 1);
}

TEST_CASE("Profiles nest: the inner one records while it lives, then the outer one again") {
  Tensor a = ones({3});
  Profile outer;
  (void)exp(a);
  {
    Profile inner;
    (void)exp(a);
    (void)exp(a);
    REQUIRE(inner.rows().size() == 1);
    CHECK(inner.rows()[0].calls == 2);
  }
  (void)exp(a);
  REQUIRE(outer.rows().size() == 1);
  CHECK(outer.rows()[0].calls == 2);
}
