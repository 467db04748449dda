// conv.h — Conv2d (square kernel, PyTorch's default initialisation) and MaxPool2d. The ops
// themselves, forward and backward, are autograd's conv2d() and max_pool2d(); these modules
// only own parameters and settings. Letters: N batch, C channels, H W height and width, k kernel.
//
//   auto conv = std::make_shared<nn::Conv2d>(1, 8, 3, /*stride=*/1, /*padding=*/1);
//   auto pool = std::make_shared<nn::MaxPool2d>(2);
//   Tensor y = pool->forward(conv->forward(x));   // (N, 1, 28, 28) -> (N, 8, 14, 14)
#pragma once
#include <optional>

#include "nn/module.h"

namespace ampgrad::nn {

class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1, int64_t padding = 0, bool bias = true);
  // x (N, Cin, H, W) -> (N, Cout, (H + 2·padding − k) / stride + 1, likewise for W)
  Tensor forward(const Tensor& x) override;
  void reset_parameters();  // W, b ~ U(−1/√fan_in, 1/√fan_in), fan_in = Cin·k·k

  Tensor weight;  // (Cout, Cin, k, k)
  Tensor bias;    // (Cout), undefined without bias
  int64_t stride, padding;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel_size, std::optional<int64_t> stride = {}) : kernel_size(kernel_size), stride(stride) {}
  Tensor forward(const Tensor& x) override;  // x (N, C, H, W) -> (N, C, (H − k) / stride + 1, ...)

  int64_t kernel_size;
  std::optional<int64_t> stride;  // defaults to kernel_size, as in PyTorch
};

}  // namespace ampgrad::nn
