// op_enum.h — the op enums of the elementwise primitives, with no Eigen: the CUDA kernels
// (nvcc) switch on them too. The primitives themselves are declared in kernels.h.
#pragma once
#include <cstdint>

namespace ampgrad::kernels {

enum class Unary : uint8_t { neg, exp, log, log1p, sqrt, abs, tanh, sigmoid, relu, gelu };
enum class Binary : uint8_t {
  add, sub, mul, div,
  eq, ne, lt, le, gt, ge,           // comparisons: output bool
  relu_backward,                    // (grad, x) -> grad * (x > 0)
  gelu_backward,                    // (grad, x) -> grad * gelu'(x)
};
// The comparisons, whose output is bool whatever the inputs' dtype.
inline bool is_comparison_op(Binary op) { return op >= Binary::eq && op <= Binary::ge; }
const char* unary_name(Unary op);
const char* binary_name(Binary op);

}  // namespace ampgrad::kernels
