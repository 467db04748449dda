// kernels.h — the primitives autograd builds every op from (forward and backward). Nothing
// here is differentiable: these are plain functions of tensors that dispatch on device
// (tensor/kernels.cpp), then on dtype inside each backend. The list itself is
// tensor/primitives.inc; a backend implements exactly that list (tensor/cpu/*.cpp,
// tensor/cuda/*), and a missing one fails to link.
//
// Conventions: inputs of a binary/ternary kernel share one dtype (autograd promotes first);
// outputs are freshly allocated and contiguous; half types compute in float32 and round once
// on store. Shape letters: B batch, M/N/K matrix dims, N C H W images, R reduced length.
#pragma once
#include <optional>
#include <utility>

#include "tensor/tensor.h"

namespace ampgrad::kernels {

enum class Unary : uint8_t { neg, exp, log, sqrt, abs, tanh, sigmoid, relu, gelu };
enum class Binary : uint8_t {
  add, sub, mul, div,
  eq, ne, lt, le, gt, ge,           // comparisons: output bool
  relu_backward,                    // (grad, x) -> grad * (x > 0)
  gelu_backward,                    // (grad, x) -> grad * gelu'(x)
};
const char* unary_name(Unary op);
const char* binary_name(Binary op);

#include "tensor/primitives.inc"

}  // namespace ampgrad::kernels
