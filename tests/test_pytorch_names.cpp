// test_pytorch_names.cpp — what a program written from PyTorch habits reaches for: creation
// options that keep the element type, mm and bmm with PyTorch's shape rules, the names that
// resolve in both ampgrad:: and nn::functional as in torch and torch.nn.functional, and the
// CUDA device's name. Leaves the ops' numerics to test_ops.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "devices.h"
#include "nn/functional.h"
#include "test_util.h"

using namespace ampgrad;
namespace F = ampgrad::nn::functional;

static bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

DEVICE_TEST_CASE("options without a dtype keep each creation function's own") {
  const TensorOptions on = TensorOptions().device(dev);
  // The newcomer's case: class labels built with a device only stay int64, and cross_entropy takes them.
  Tensor y = from_vector(std::vector<int64_t>{2, 0}, {2}, on);
  CHECK(y.dtype() == kInt64);
  CHECK(y.device() == dev);
  CHECK(to_vector<int64_t>(y) == std::vector<int64_t>{2, 0});
  Tensor logits = zeros({2, 3}, on);
  CHECK(cross_entropy(logits, y).item<double>() == doctest::Approx(std::log(3.0)));  // uniform over 3 classes

  CHECK(from_vector(std::vector<double>{0.1}, {1}, on.requires_grad()).dtype() == kFloat64);
  CHECK(from_vector(std::vector<bool>{true, false}, {2}, on).dtype() == kBool);
  CHECK(randint(0, 5, {4}, on).dtype() == kInt64);
  CHECK(arange(4, on).dtype() == kInt64);
  // float32 stays the default where PyTorch's is (torch.get_default_dtype()), and a chosen dtype converts.
  CHECK(zeros({2}, on).dtype() == kFloat32);
  CHECK(randn({2}, on).dtype() == kFloat32);
  CHECK(arange(0.0, 2.0, 1.0, on).dtype() == kFloat32);
  Tensor f = from_vector(std::vector<int64_t>{3, -1}, {2}, on.dtype(kFloat16));
  CHECK(f.dtype() == kFloat16);
  CHECK(to_vector<float>(f) == std::vector<float>{3, -1});
}

DEVICE_TEST_CASE("mm: matmul of two matrices, and nothing else") {
  Tensor a = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}).to(dev).requires_grad_();
  Tensor b = from_vector<double>({7, 8, 9, 10, 11, 12}, {3, 2}).to(dev);
  Tensor c = mm(a, b);
  CHECK(c.shape() == Shape{2, 2});
  CHECK(to_vector<double>(c) == std::vector<double>{58, 64, 139, 154});
  c.sum().backward();
  CHECK(to_vector<double>(a.grad()) == std::vector<double>{15, 19, 23, 15, 19, 23});  // ones (2, 2) @ bᵀ: b's row sums

  CHECK(error_of([&] { mm(a, b.unsqueeze(0)); }) == "mm: expected two 2-D tensors, got shapes [2, 3] and [1, 3, 2]");
  CHECK(error_of([&] { mm(a.select(0, 0), b); }) == "mm: expected two 2-D tensors, got shapes [3] and [3, 2]");  // matmul would take it
  CHECK(error_of([&] { mm(a, a); }) == "mm: cannot multiply shapes [2, 3] and [2, 3]");
}

DEVICE_TEST_CASE("bmm: one product per batch entry, batch sizes equal, no broadcasting") {
  // batch 0: identity @ m = m; batch 1: 2·identity @ m = 2m
  Tensor a = from_vector<double>({1, 0, 0, 1, 2, 0, 0, 2}, {2, 2, 2}).to(dev);
  Tensor m = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}).to(dev);
  Tensor b = stack({m, m});
  Tensor c = bmm(a, b);
  CHECK(c.shape() == Shape{2, 2, 3});
  CHECK(to_vector<double>(c) == std::vector<double>{1, 2, 3, 4, 5, 6, 2, 4, 6, 8, 10, 12});

  CHECK(error_of([&] { bmm(a, m); }) == "bmm: expected two 3-D tensors, got shapes [2, 2, 2] and [2, 3]");
  Tensor one = m.unsqueeze(0);  // (1, 2, 3): matmul broadcasts it over the batch, bmm refuses
  CHECK(matmul(a, one).shape() == Shape{2, 2, 3});
  CHECK(has(error_of([&] { bmm(a, one); }), "bmm: cannot multiply shapes [2, 2, 2] and [1, 2, 3] (the batch sizes must be equal"));
  CHECK(error_of([&] { bmm(a, b.transpose(1, 2)); }) ==
        "bmm: cannot multiply shapes [2, 2, 2] and [2, 3, 2] (the batch sizes must be equal: bmm does not broadcast)");
}

// Compiled, not run: each name PyTorch has both as torch.X and torch.nn.functional.X is the same
// function here under both namespaces, so a missing one fails to build, naming it.
#define SAME_IN_BOTH(name) static_assert(&F::name == &ampgrad::name, #name " must resolve in ampgrad:: and nn::functional")
SAME_IN_BOTH(sigmoid);
SAME_IN_BOTH(tanh);
SAME_IN_BOTH(relu);
SAME_IN_BOTH(softmax);
SAME_IN_BOTH(log_softmax);
SAME_IN_BOTH(dropout);
SAME_IN_BOTH(embedding);
SAME_IN_BOTH(conv2d);
SAME_IN_BOTH(max_pool2d);
SAME_IN_BOTH(layer_norm);
SAME_IN_BOTH(batch_norm);
SAME_IN_BOTH(group_norm);
SAME_IN_BOTH(binary_cross_entropy_with_logits);
// torch.nn.functional's alone (no torch.X in PyTorch), here in nn::functional; gelu and the rest
// are the autograd ops themselves, scaled_dot_product_attention is composed of them.
SAME_IN_BOTH(gelu);
SAME_IN_BOTH(linear);
SAME_IN_BOTH(cross_entropy);
SAME_IN_BOTH(nll_loss);
SAME_IN_BOTH(mse_loss);
SAME_IN_BOTH(binary_cross_entropy);
static_assert(std::is_function_v<decltype(F::scaled_dot_product_attention)>);

TEST_CASE("cuda::device_name: an error naming an index past the devices, and why there is none") {
  const int n = cuda::device_count();
  const std::string past = error_of([&] { cuda::device_name(n); });
  CHECK(has(past, "cuda::device_name(" + std::to_string(n) + "): "));
  if (n == 0) CHECK(has(past, cuda::unavailable_reason()));  // why there is none: no backend, no driver or no GPU
  CHECK(has(error_of([] { cuda::device_name(-1); }), "cuda::device_name(-1): "));
}

TEST_CASE("cuda::device_name: each device's name") {
  SKIP_WITHOUT_GPU();
  for (int i = 0; i < cuda::device_count(); ++i) {
    CAPTURE(i);
    const std::string name = cuda::device_name(i);
    MESSAGE("cuda:" << i << ": " << name);
    CHECK(!name.empty());
  }
}
