// clip_grad.cpp — the global gradient norm, summed on the grads' device in float64.
#include "optim/clip_grad.h"

#include <cmath>

#include "autograd/ops.h"

namespace ampgrad::optim {

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  Tensor sum_sq;  // 0-d float64
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor g64 = g.to(kFloat64);
    Tensor s = sum(g64 * g64);
    sum_sq = sum_sq.defined() ? sum_sq + s : s;
  }
  if (!sum_sq.defined()) return 0.0;
  // The one host read of the step: the caller wants the norm as a number, and the branch needs it.
  const double norm = std::sqrt(sum_sq.item<double>());
  if (std::isfinite(norm) && norm > max_norm) {
    const double clip_coef = max_norm / (norm + 1e-6);
    for (const Tensor& p : params)
      if (p.grad().defined()) p.grad().mul_(clip_coef);
  }
  return norm;
}

}  // namespace ampgrad::optim
