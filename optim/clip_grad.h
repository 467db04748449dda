// clip_grad.h — clip_grad_norm_: rescale all gradients together so their global L2 norm is at
// most max_norm (torch.nn.utils.clip_grad_norm_). Under AMP, call it after
// GradScaler::unscale_, so the norm is that of the true gradients.
//
//   loss.backward();
//   Tensor norm = optim::clip_grad_norm_(model->parameters(), 1.0);   // norm.item<double>() to print it
#pragma once
#include <vector>

#include "tensor/tensor.h"

namespace ampgrad::optim {

// total = √(Σ over parameters with a grad of Σ g²), accumulated in float64 and returned as a 0-d
// tensor in the first grad's dtype (0 with no grads). Every grad is multiplied in place by
// min(1, max_norm / (total + 1e-6)), worked out on the grads' device, so clipping never makes
// the host wait for a GPU. As in PyTorch, a non-finite total makes that factor 0 or NaN (under
// the GradScaler the step is skipped anyway); error_if_nonfinite raises instead, which reads the
// total on the host.
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, bool error_if_nonfinite = false);

}  // namespace ampgrad::optim
