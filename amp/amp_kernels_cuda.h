// amp_kernels_cuda.h — launchers of the GradScaler's two CUDA kernels (amp/amp_kernels.cu), on
// raw device pointers so nvcc never sees a Tensor; amp_kernels.cpp checks the tensors and calls
// these. Neither reads anything back to the host: the scale and the verdict stay on the device.
#pragma once
#include <cstdint>
#include <vector>

namespace ampgrad::cuda {

struct GradSpan {  // one contiguous float32 gradient
  float* data;
  int64_t numel;
};

// Every grads[i].data[0, numel) *= *inv_scale; *found_inf = 1 if any value is inf or NaN. One
// launch per ~150 gradients, their pointers passed by value (tensor/cuda/multi_tensor.h).
void amp_non_finite_check_and_unscale_(const std::vector<GradSpan>& grads, float* found_inf, const float* inv_scale);

// amp::update_scale (scale_math.h) on the device, by one thread.
void amp_update_scale_(float* scale, int64_t* growth_tracker, const float* found_inf, double growth_factor, double backoff_factor,
                       int64_t growth_interval);

}  // namespace ampgrad::cuda
