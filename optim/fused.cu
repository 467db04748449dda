// fused.cu — the fused multi-tensor steps of SGD and Adam/AdamW on the GPU (fused.h), calling
// the per-element rules of update.h that the CPU loops (sgd.cpp, adam.cpp) call too. Kernels
// first, then launchers. Leaves out amsgrad and foreach-style variants without fusion.
#include "optim/fused.h"
#include "tensor/cuda/multi_tensor.h"
#include "tensor/cuda/runtime.h"

namespace ampgrad::cuda {
using optim::FusedParam;

// Thread t counts parameter t's step, unless the GradScaler found inf/NaN. Launched before the
// update, which reads the new count: in one kernel, the blocks of a parameter could not all
// read it before one of them incremented it.
__global__ void count_steps_kernel(const __grid_constant__ TensorPack<FusedParam> pack, const float* found_inf) {
  if (found_inf && *found_inf != 0.f) return;
  if (int(threadIdx.x) < pack.count) ++*pack.items[threadIdx.x].step;
}

__global__ void sgd_kernel(const __grid_constant__ TensorPack<FusedParam> pack, optim::SGDScalars s, const float* found_inf) {
  if (found_inf && *found_inf != 0.f) return;
  const BlockChunk chunk = chunk_at(pack, blockIdx.x);
  const FusedParam& p = pack.items[chunk.item];
  s.first_step = *p.step == 1;
  float* momentum_buffer = p.buffer[0];  // null without momentum
  float param[kIlp], grad[kIlp], buffer[kIlp];
  for_each_ilp(
      chunk,
      [&](int u, int64_t i) {
        param[u] = p.param[i], grad[u] = p.grad[i];
        if (momentum_buffer) buffer[u] = momentum_buffer[i];
      },
      [&](int u, int64_t i) {
        optim::sgd_update(param[u], grad[u], momentum_buffer ? &buffer[u] : nullptr, s);
        p.param[i] = param[u];
        if (momentum_buffer) momentum_buffer[i] = buffer[u];
      });
}

__global__ void adam_kernel(const __grid_constant__ TensorPack<FusedParam> pack, optim::AdamHyperparams h, const float* found_inf) {
  if (found_inf && *found_inf != 0.f) return;
  const BlockChunk chunk = chunk_at(pack, blockIdx.x);
  const FusedParam& p = pack.items[chunk.item];
  const optim::AdamScalars s = optim::adam_scalars(h, *p.step);  // in double, as on the CPU: once per thread
  float *exp_avg = p.buffer[0], *exp_avg_sq = p.buffer[1];
  float param[kIlp], grad[kIlp], m[kIlp], v[kIlp];
  for_each_ilp(
      chunk, [&](int u, int64_t i) { param[u] = p.param[i], grad[u] = p.grad[i], m[u] = exp_avg[i], v[u] = exp_avg_sq[i]; },
      [&](int u, int64_t i) {
        optim::adam_update(param[u], grad[u], m[u], v[u], s);
        p.param[i] = param[u], exp_avg[i] = m[u], exp_avg_sq[i] = v[u];
      });
}

// Per pack: count the steps, then update. Both kernels skip themselves on overflow.
template <class Hyper>
static void fused_step(void (*update_kernel)(TensorPack<FusedParam>, Hyper, const float*), const std::vector<FusedParam>& params,
                       const Hyper& hyper, const float* found_inf) {
  for_each_pack(params, [&](const TensorPack<FusedParam>& pack) {
    count_steps_kernel<<<1, pack.count, 0, stream()>>>(pack, found_inf);
    AMPGRAD_CUDA_CHECK(cudaGetLastError());
    update_kernel<<<pack.blocks(), kMultiTensorBlock, 0, stream()>>>(pack, hyper, found_inf);
    AMPGRAD_CUDA_CHECK(cudaGetLastError());
  });
}

void fused_sgd_(const std::vector<FusedParam>& params, const optim::SGDScalars& s, const float* found_inf) {
  fused_step(sgd_kernel, params, s, found_inf);
}
void fused_adam_(const std::vector<FusedParam>& params, const optim::AdamHyperparams& h, const float* found_inf) {
  fused_step(adam_kernel, params, h, found_inf);
}

}  // namespace ampgrad::cuda
