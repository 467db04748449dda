// fused.h — the optimizers' fused CUDA steps (optim/fused.cu): every parameter of a group (whose
// options they share) in one launch (per ~68 parameters, tensor/cuda/multi_tensor.h), on raw
// device pointers so nvcc never sees a Tensor; Optimizer (optimizer.cpp) gathers them. Each step first counts itself in
// every parameter's device step counter, then updates, and does neither when *found_inf != 0:
// the GradScaler's verdict is read on the device, so the host never waits for it.
#pragma once
#include <cstdint>
#include <vector>

#include "optim/update.h"

namespace ampgrad::optim {

struct FusedParam {  // one float32 parameter, contiguous, and what its update touches
  float* param;
  const float* grad;
  float* buffer[2];  // the optimizer's buffers in buffer_names(group) order; null where it has fewer
  int64_t* step;     // 0-d: the updates taken so far
  int64_t numel;
};

}  // namespace ampgrad::optim

namespace ampgrad::cuda {

// found_inf may be null (no GradScaler): the step always runs. s.first_step is ignored: each
// parameter's momentum buffer starts from its gradient when its own step count reaches 1.
void fused_sgd_(const std::vector<optim::FusedParam>& params, const optim::SGDScalars& s, const float* found_inf);
void fused_adam_(const std::vector<optim::FusedParam>& params, const optim::AdamHyperparams& h, const float* found_inf);

}  // namespace ampgrad::cuda
