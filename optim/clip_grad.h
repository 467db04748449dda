// clip_grad.h — clip_grad_norm_: rescale all gradients together so their global L2 norm is at
// most max_norm (torch.nn.utils.clip_grad_norm_). Under AMP, call it after
// GradScaler::unscale_, so the norm is that of the true gradients.
//
//   loss.backward();
//   double norm = optim::clip_grad_norm_(model->parameters(), 1.0);
#pragma once
#include <vector>

#include "tensor/tensor.h"

namespace ampgrad::optim {

// norm = √(Σ over parameters with a grad of Σ g²), accumulated in float64. When norm > max_norm,
// every grad is multiplied in place by max_norm / (norm + 1e-6). Returns norm (before clipping).
// A non-finite norm is returned as is and the grads are left alone: that step is bad anyway,
// and GradScaler skips it on seeing the inf/nan.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

}  // namespace ampgrad::optim
