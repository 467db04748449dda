// normalization.cpp — BatchNorm's forward: which statistics to use and at what momentum, as
// PyTorch's _BatchNorm.forward decides it; the arithmetic is autograd's batch_norm().
#include "nn/normalization.h"

#include <algorithm>

#include "autograd/grad_mode.h"

namespace ampgrad::nn {

BatchNorm::BatchNorm(const char* name, std::vector<int64_t> ranks, int64_t num_features, BatchNormOptions options)
    : num_features(num_features), options(options), name_(name), ranks_(std::move(ranks)) {
  AMPGRAD_CHECK(num_features > 0, name << ": num_features must be positive, got " << num_features);
  if (options.affine) {
    weight = register_parameter("weight", ones({num_features}));
    bias = register_parameter("bias", zeros({num_features}));
  }
  if (options.track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({num_features}));
    running_var = register_buffer("running_var", ones({num_features}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
  }
}

void BatchNorm::reset_running_stats() {
  if (!options.track_running_stats) return;
  NoGradGuard no_grad;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

Tensor BatchNorm::forward(const Tensor& x) {
  AMPGRAD_CHECK(std::ranges::count(ranks_, x.dim()), name_ << ": expected " << ranks_[0] << "D" << (ranks_.size() > 1 ? " or " + std::to_string(ranks_[1]) + "D" : "")
                                                        << " input (got " << x.dim() << "D input of shape " << shape_str(x.shape()) << ")");
  const bool tracking = is_training() && options.track_running_stats && !is_forward_rerun();  // a rerun counted already
  double momentum = 0;
  // no momentum: a cumulative average, weight 1/n for the n-th batch (reading n is a host sync on a GPU)
  if (tracking) momentum = options.momentum ? *options.momentum : 1.0 / double(num_batches_tracked.item<int64_t>() + 1);
  // Eval mode normalises with the running estimates, unless there are none to use.
  Tensor y = batch_norm(x, running_mean, running_var, weight, bias, is_training() || !options.track_running_stats, momentum, options.eps);
  if (tracking) {  // counted once the batch was taken: a refused input changes nothing
    NoGradGuard no_grad;
    num_batches_tracked.add_(ones({}, TensorOptions(kInt64).device(num_batches_tracked.device())));
  }
  return y;
}

}  // namespace ampgrad::nn
