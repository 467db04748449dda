// amp_kernels.h — the two fused kernels of the GradScaler, named as PyTorch names them.
// Both read and write 0-d tensors where the scale lives, so on a GPU neither needs the host.
#pragma once
#include <vector>

#include "tensor/tensor.h"

namespace ampgrad::amp {

// grads[i] *= inv_scale for every float32 gradient, in one pass; found_inf (0-d float32) is
// set to 1 if any value (before or after scaling) is inf or NaN. Never cleared here.
void non_finite_check_and_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale);

// scale (0-d float32) and growth_tracker (0-d int64) updated in place by grow_or_back_off().
void update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                   double backoff_factor, int64_t growth_interval);

}  // namespace ampgrad::amp
