// amp_kernels.cu — the GradScaler's kernels on the GPU: a multi-tensor unscale that flags
// inf/NaN, and the scale update, both with the scalar rules of scale_math.h, so the CPU tests
// of amp_kernels.cpp cover their arithmetic. Kernels first, then launchers.
#include "amp/amp_kernels_cuda.h"
#include "amp/scale_math.h"
#include "tensor/cuda/multi_tensor.h"
#include "tensor/cuda/runtime.h"

namespace ampgrad::cuda {

// One block per chunk of one gradient (multi_tensor.h). inv_scale is read here, on the device,
// so the host never learns the scale; one thread per block that saw a non-finite value writes
// the flag (several blocks may write the same 1, which is harmless).
__global__ void non_finite_check_and_unscale_kernel(const __grid_constant__ TensorPack<GradSpan> pack, float* found_inf,
                                                    const float* inv_scale) {
  const BlockChunk chunk = chunk_at(pack, blockIdx.x);
  float* g = pack.items[chunk.item].data;
  const float inv = *inv_scale;
  bool non_finite = false;
  float value[kIlp];
  for_each_ilp(chunk, [&](int u, int64_t i) { value[u] = g[i]; },
               [&](int u, int64_t i) {
                 non_finite |= amp::unscale_value(value[u], inv);
                 g[i] = value[u];
               });
  if (__syncthreads_or(non_finite) && threadIdx.x == 0) *found_inf = 1.f;
}

__global__ void update_scale_kernel(float* scale, int64_t* growth_tracker, const float* found_inf, double growth_factor,
                                    double backoff_factor, int64_t growth_interval) {
  amp::grow_or_back_off(*scale, *growth_tracker, *found_inf != 0.f, growth_factor, backoff_factor, growth_interval);
}

void amp_non_finite_check_and_unscale_(const std::vector<GradSpan>& grads, float* found_inf, const float* inv_scale) {
  for_each_pack(grads, [&](const TensorPack<GradSpan>& pack) {
    non_finite_check_and_unscale_kernel<<<pack.blocks(), kMultiTensorBlock, 0, stream()>>>(pack, found_inf, inv_scale);
    AMPGRAD_CUDA_CHECK(cudaGetLastError());
  });
}

void amp_update_scale_(float* scale, int64_t* growth_tracker, const float* found_inf, double growth_factor, double backoff_factor,
                       int64_t growth_interval) {
  update_scale_kernel<<<1, 1, 0, stream()>>>(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval);
  AMPGRAD_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ampgrad::cuda
