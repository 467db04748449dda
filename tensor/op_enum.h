// op_enum.h — the op enums of the elementwise primitives and their names, generated from
// tensor/ops.def, with no Eigen: the CUDA kernels (nvcc) switch on them too. The primitives
// themselves are declared in kernels.h, the functors that run them in elementwise_ops.h.
#pragma once
#include <array>
#include <cstdint>

namespace ampgrad::kernels {

// A unary op's scalar arguments (ops.def's ARG), in order, as float64: {0.2} for a slope of 0.2.
using ScalarArgs = std::array<double, 2>;

enum class Unary : uint8_t {
#define UNARY_KERNEL(name, Functor, cuda, cpu, args, ...) name,
#include "tensor/ops.def"
};
enum class Binary : uint8_t {
#define BINARY_KERNEL(name, Functor, cuda, cpu) name,
#define BACKWARD_KERNEL(name, Functor) name,
#include "tensor/ops.def"
};

// The comparisons, whose output is bool whatever the inputs' dtype.
constexpr bool is_comparison_op(Binary op) {
  return false
#define COMPARE_KERNEL(name, Functor, cuda, cpu) || op == Binary::name
#include "tensor/ops.def"
      ;
}

constexpr const char* unary_name(Unary op) {
  switch (op) {
#define UNARY_KERNEL(name, Functor, cuda, cpu, args, ...) case Unary::name: return #name;
#include "tensor/ops.def"
  }
  return "?";
}
constexpr const char* binary_name(Binary op) {
  switch (op) {
#define BINARY_KERNEL(name, Functor, cuda, cpu) case Binary::name: return #name;
#define BACKWARD_KERNEL(name, Functor) case Binary::name: return #name;
#include "tensor/ops.def"
  }
  return "?";
}

}  // namespace ampgrad::kernels
