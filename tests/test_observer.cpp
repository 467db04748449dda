// test_observer.cpp — the core's announcements (tensor/observer.h): the post-accumulate-grad
// hook hears each leaf once per backward, its .grad complete, the last layer's leaves first; a
// listener hears kernels, allocations and backward passes while registered, and nothing after.
#include <doctest/doctest.h>

#include "autograd/grad.h"
#include "autograd/ops.h"
#include "devices.h"
#include "tensor/observer.h"

using namespace ampgrad;

static std::vector<double> vec(const Tensor& t) { return to_vector<double>(t); }

DEVICE_TEST_CASE("the post-accumulate-grad hook hears each leaf of an MLP once, last layer first, its .grad complete") {
  // loss = sum(relu(x w1 + b1) w2 + b2), with values whose gradients are exact in float64.
  auto leaf = [&](std::vector<double> v, Shape s) { return from_vector<double>(v, s).to(dev).requires_grad_(); };
  const Tensor x = from_vector<double>({1, -2, 3, 0.5, 1, -1}, {2, 3}).to(dev);
  Tensor w1 = leaf({1, 0, -1, 2, 1, 1}, {3, 2}), b1 = leaf({0.5, 2}, {2});
  Tensor w2 = leaf({2, -1}, {2, 1}), b2 = leaf({3}, {1});
  const std::vector<Tensor> params{w1, b1, w2, b2};
  std::vector<std::pair<int, std::vector<double>>> heard;  // (which param, its .grad then)
  PostAccumulateGradHook hook([&](const Tensor& p) {
    for (int i = 0; i < 4; ++i)
      if (p.is_same(params[i])) heard.emplace_back(i, vec(p.grad()));
  });
  auto step = [&] { sum(matmul(relu(matmul(x, w1) + b1), w2) + b2).backward(); };

  step();  // h = relu(x w1 + b1) = relu([[6.5, 1], [-1, 3]]); dh = [[2, -1], [2, -1]], masked by h > 0
  const std::vector<std::pair<int, std::vector<double>>> once{
      {3, {2}},                          // db2 = column sums of ones
      {2, {6.5, 4}},                     // dw2 = hᵀ 1
      {1, {2, -2}},                      // db1 = column sums of dz = dh·mask = [[2, -1], [0, -1]]
      {0, {2, -1.5, -4, 1, 6, -2}}};     // dw1 = xᵀ dz
  CHECK(heard == once);

  heard.clear();
  step();  // a second backward: heard again, each .grad holding both passes' sum
  REQUIRE(heard.size() == 4);
  for (size_t k = 0; k < 4; ++k) {
    CHECK(heard[k].first == once[k].first);
    std::vector<double> twice = once[k].second;
    for (double& v : twice) v *= 2;
    CHECK(heard[k].second == twice);
  }

  heard.clear();
  (void)autograd::grad({sum(matmul(relu(matmul(x, w1) + b1), w2) + b2)}, {w1});  // no .grad changes: nothing heard
  CHECK(heard.empty());
}

DEVICE_TEST_CASE("a leaf used twice is heard once, after both paths' gradients are summed into its .grad") {
  Tensor w = from_vector<double>({1, 2, 3, 4}, {2, 2}).to(dev).requires_grad_();
  const Tensor x = from_vector<double>({1, 2}, {1, 2}).to(dev);
  std::vector<std::vector<double>> heard;
  PostAccumulateGradHook hook([&](const Tensor& p) { heard.push_back(vec(p.grad())); });
  // d sum(x w w)/dw = xᵀ (1 wᵀ) + (x w)ᵀ 1 = [[3, 7], [6, 14]] + [[7, 7], [10, 10]]
  sum(matmul(matmul(x, w), w)).backward();
  CHECK(heard == std::vector<std::vector<double>>{{10, 14, 16, 24}});
}

TEST_CASE("a listener hears kernels, allocations and backward passes while registered, then nothing") {
  struct Counts : Observer {
    int begun = 0, ended = 0, allocs = 0, frees = 0, passes = 0;
    std::vector<std::string> kernels;
    void on_kernel_begin(const char* kernel, Device) override {
      ++begun;
      kernels.push_back(kernel);
    }
    void on_kernel_end(const char*, Device) override { ++ended; }
    void on_alloc(Device, const void*, int64_t) override { ++allocs; }
    void on_free(Device, const void*, int64_t) override { ++frees; }
    void on_span_begin(const char*, SpanKind kind) override { passes += kind == SpanKind::backward; }
  } counts;
  Tensor x = from_vector<double>({1, 2, 3}).requires_grad_();
  add_observer(&counts);
  {
    Tensor y = exp(x);  // one kernel, one block
    CHECK(counts.kernels == std::vector<std::string>{"exp"});
    CHECK(counts.ended == 1);
    CHECK(counts.allocs == 1);
    sum(y).backward();
  }
  CHECK(counts.passes == 1);
  CHECK(counts.frees >= 1);
  remove_observer(&counts);
  const int begun = counts.begun, allocs = counts.allocs;
  (void)exp(x);
  CHECK(counts.begun == begun);
  CHECK(counts.allocs == allocs);
}
