// autocast.h — step 1 of every op: cast the inputs as the op's policy row says. The one point
// where amp casts an op's inputs; op bodies never cast for precision themselves. An op built of
// other ops' calls (cross_entropy, nll_loss, batch norm, the binary cross-entropy, a linear
// route) runs those calls under amp::suspend, as PyTorch's autocast wrapper runs the op with its
// own dispatch key excluded: the inputs were cast once, at the op's entry, and the calls inside
// are its steps, neither cast again nor traced as calls of their own.
//   auto [x, w, b] = autocast(amp::Op::linear, x_in, w_in, b_in);
#pragma once
#include <array>

#include "amp/autocast.h"
#include "tensor/tensor.h"

namespace ampgrad::autograd {

void autocast_inputs(amp::Op op, Tensor* xs, size_t n);  // in place, on copies of the handles

template <class... Ts> std::array<Tensor, sizeof...(Ts)> autocast(amp::Op op, const Ts&... in) {
  std::array<Tensor, sizeof...(Ts)> xs{in...};
  if (amp::any_enabled() || amp::trace_active()) autocast_inputs(op, xs.data(), xs.size());
  return xs;
}

// The raw differentiable cast, with no autocast step of its own (used by autocast and promotion).
Tensor cast(const Tensor& x, DType dtype);

}  // namespace ampgrad::autograd
