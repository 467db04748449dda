// scale_math.h — the GradScaler's arithmetic as scalar functions, shared by the CPU loops
// (amp/amp_kernels.cpp) and, under nvcc, a CUDA kernel: PyTorch's _amp_update_scale_ rule.
#pragma once
#include <cmath>
#include <cstdint>

#include "tensor/host_device.h"

namespace ampgrad::amp {

// After an iteration: back off on overflow, grow after growth_interval clean steps in a row
// (unless growing would overflow float32 itself).
AMPGRAD_HD inline void grow_or_back_off(float& scale, int64_t& growth_tracker, bool found_inf, double growth_factor,
                                    double backoff_factor, int64_t growth_interval) {
  // exercise 1.4: update_scale — on inf/NaN scale × backoff_factor; after growth_interval clean steps in a row × growth_factor
  if (found_inf) {
    scale = float(scale * backoff_factor);
    growth_tracker = 0;
    return;
  }
  const int64_t successful = growth_tracker + 1;
  if (successful == growth_interval) {
    const float grown = float(scale * growth_factor);
    if (std::isfinite(grown)) scale = grown;
    growth_tracker = 0;
  } else {
    growth_tracker = successful;
  }
  // end exercise 1.4
}

// One gradient value: unscale, and report whether it was inf/NaN.
AMPGRAD_HD inline bool unscale_value(float& g, float inv_scale) {
  g *= inv_scale;
  return !std::isfinite(g);
}

}  // namespace ampgrad::amp
