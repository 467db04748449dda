// op_support.h — what every op file of autograd/ uses: the three steps of an op (autocast,
// kernel, record) and their names, brought into namespace ampgrad. Included by autograd/*.cpp
// only; the public API is autograd/ops.h.
#pragma once
#include "autograd/autocast.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"

namespace ampgrad {
using amp::Op;
using autograd::autocast;
using autograd::grads;
using autograd::Needs;
using autograd::record;

// g · factor, with the factor applied in float32 or wider. (g * factor would first round the
// factor to g's dtype: 1/70000 is 0 in float16, and 1/0.9 is 1.1113.)
inline Tensor scaled(const Tensor& g, double factor) {
  Tensor out = g.clone();
  kernels::scale_(out, factor);
  return out;
}
}  // namespace ampgrad
