// init.h — parameter initialisers (torch.nn.init's names), and the default that Linear and
// Conv2d draw their weights from. All fill in place under NoGradGuard, drawing from `gen` or,
// when null, the default generator, so manual_seed makes a model reproducible.
//
//   manual_seed(0);
//   auto fc = std::make_shared<nn::Linear>(784, 10);   // same weights on every run
//   nn::init::xavier_uniform_(fc->weight);              // or re-initialise by hand
#pragma once
#include <utility>

#include "tensor/random.h"

namespace ampgrad::nn::init {

// (fan_in, fan_out) of a weight (out, in, *kernel): in·k and out·k, k = the kernel's size.
std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& weight);

Tensor uniform_(Tensor t, double low = 0, double high = 1, Generator* gen = nullptr);
Tensor normal_(Tensor t, double mean = 0, double std = 1, Generator* gen = nullptr);
Tensor zeros_(Tensor t);
Tensor ones_(Tensor t);
// U(−b, b) with b = gain·√(3 / fan_in), gain = √(2 / (1 + a²)) (a leaky ReLU of slope a).
Tensor kaiming_uniform_(Tensor t, double a = 0, Generator* gen = nullptr);
// U(−b, b) with b = gain·√(6 / (fan_in + fan_out)).
Tensor xavier_uniform_(Tensor t, double gain = 1, Generator* gen = nullptr);

// PyTorch's reset_parameters() of Linear and Conv: kaiming_uniform_(a = √5), which works out
// to weight ~ U(−1/√fan_in, 1/√fan_in), then bias (if defined) ~ U(−1/√fan_in, 1/√fan_in).
// Weight first, then bias: the same draw order as PyTorch.
void linear_default_(Tensor weight, Tensor bias, Generator* gen = nullptr);

}  // namespace ampgrad::nn::init
