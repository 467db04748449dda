// cast.h — the fp16 cast AMP is about, and step 1 of every op: cast its inputs as the op's
// policy row says (cast_inputs). The one point where amp casts an op's inputs; op bodies never
// cast for precision themselves. An op built of other ops' calls (cross_entropy, nll_loss, batch
// norm, the binary cross-entropy, a linear route) runs those calls under amp::suspend, as
// PyTorch's autocast wrapper runs the op with its own dispatch key excluded: the inputs were cast
// once, at the op's entry, and the calls inside are its steps, neither cast again nor traced.
//   auto [x, w, b] = cast_inputs(amp::Op::linear, x_in, w_in, b_in);
#pragma once
#include <array>

#include "amp/autocast.h"
#include "tensor/observer.h"
#include "tensor/tensor.h"

namespace ampgrad::autograd {

// The raw differentiable cast, with no policy step of its own: its backward casts the gradient
// back, which is how float32 master weights receive the gradients of their 16-bit copies.
Tensor cast(const Tensor& x, DType dtype);

void cast_inputs_in_place(amp::Op op, Tensor* xs, size_t n);  // on copies of the handles

// Whether a listener may hear what autocast does here (observer.h's on_autocast): outside a suspend.
inline bool autocast_observed() { return observed() && !amp::suspended(); }

// The first Required inputs must be defined (those after may be absent: a bias, a weight); an
// undefined one is refused here, naming the op and the argument.
template <size_t Required = SIZE_MAX, class... Ts> std::array<Tensor, sizeof...(Ts)> cast_inputs(amp::Op op, const Ts&... in) {
  std::array<Tensor, sizeof...(Ts)> xs{in...};
  for (size_t i = 0; i < xs.size() && i < Required; ++i)
    AMPGRAD_CHECK(xs[i].defined(), amp::policy_row(op).name << ": argument " << i + 1 << " is an undefined tensor");
  if (amp::any_enabled() || autocast_observed()) cast_inputs_in_place(op, xs.data(), xs.size());
  return xs;
}

}  // namespace ampgrad::autograd
