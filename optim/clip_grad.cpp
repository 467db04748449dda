// clip_grad.cpp — the global gradient norm, summed on the grads' device in float64, and the
// clipping factor applied there too.
#include "optim/clip_grad.h"

#include <cmath>

#include "autograd/ops.h"

namespace ampgrad::optim {

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, bool error_if_nonfinite) {
  NoGradGuard no_grad;
  Tensor sum_sq;  // 0-d float64
  DType dtype = kFloat32;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!sum_sq.defined()) dtype = g.dtype();
    Tensor g64 = g.to(kFloat64);
    Tensor s = sum(g64 * g64);
    sum_sq = sum_sq.defined() ? sum_sq + s : s;
  }
  if (!sum_sq.defined()) return zeros({}, dtype);
  Tensor total = sqrt(sum_sq);
  if (error_if_nonfinite) {
    const double norm = total.item<double>();
    AMPGRAD_CHECK(std::isfinite(norm), "clip_grad_norm_: the total norm of the gradients is "
                                           << norm << ", so it cannot be clipped; to scale the gradients by it anyway, set error_if_nonfinite = false");
  }
  // exercise 2.2: clip_grad_norm — every gradient × max_norm / (total + 1e-6), only where that is below 1
  const Tensor clip_coef = clamp(max_norm / (total + 1e-6), std::nullopt, 1.0);  // 1 when already within max_norm
  for (const Tensor& p : params)
    if (Tensor g = p.grad(); g.defined()) g.copy_(g * clip_coef);
  // end exercise 2.2
  return total.to(dtype);
}

}  // namespace ampgrad::optim
