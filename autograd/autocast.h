// autocast.h — step 1 of every op: cast the inputs as the op's policy row says.
// The one point where amp touches an op; op bodies never cast for precision themselves.
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
