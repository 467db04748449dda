// normalization.h — LayerNorm over the trailing dims, BatchNorm1d/2d over each channel, and
// GroupNorm over groups of each sample's channels, with an optional learned scale and shift
// (weight = 1, bias = 0 initially, as in PyTorch). The ops themselves are autograd's
// layer_norm(), batch_norm() and group_norm().
//
//   auto ln = std::make_shared<nn::LayerNorm>(Shape{64});
//   Tensor y = ln->forward(x);          // x (N, T, 64): each row normalised to mean 0, var 1
//   auto bn = std::make_shared<nn::BatchNorm2d>(32);
//   Tensor z = bn->forward(img);        // img (N, 32, H, W): each channel over N, H, W; eval() uses
//                                       // the running estimates that training gathered
//   auto gn = std::make_shared<nn::GroupNorm>(8, 32);
//   Tensor u = gn->forward(img);        // each sample's 32 channels in 8 groups of 4, each over its
//                                       // channels and positions: no batch statistics at all
#pragma once
#include <optional>
#include <vector>

#include "autograd/ops.h"
#include "nn/module.h"

namespace ampgrad::nn {

class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true)
      : normalized_shape(std::move(normalized_shape)), eps(eps) {
    if (!elementwise_affine) return;
    weight = register_parameter("weight", ones(this->normalized_shape));
    bias = register_parameter("bias", zeros(this->normalized_shape));
  }
  Tensor forward(const Tensor& x) override { return layer_norm(x, normalized_shape, weight, bias, eps); }

  Shape normalized_shape;
  double eps;
  Tensor weight, bias;  // normalized_shape each, undefined without elementwise_affine
};

struct BatchNormOptions {
  double eps = 1e-5;
  std::optional<double> momentum = 0.1;  // none: the running estimates are plain averages of every batch so far
  bool affine = true;                    // learn weight and bias
  bool track_running_stats = true;       // without: batch statistics in eval mode too, and no buffers
};

// BatchNorm1d and BatchNorm2d differ only in the input ranks they take, as PyTorch's _BatchNorm.
// Buffers: running_mean (zeros), running_var (ones), num_batches_tracked (int64, 0-d); a
// state_dict holds them beside weight and bias.
class BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  void reset_running_stats();

  int64_t num_features;
  BatchNormOptions options;
  Tensor weight, bias;                                         // (C), undefined without affine
  Tensor running_mean, running_var, num_batches_tracked;      // undefined without track_running_stats

 protected:
  BatchNorm(const char* name, std::vector<int64_t> ranks, int64_t num_features, BatchNormOptions options);

 private:
  const char* name_;
  std::vector<int64_t> ranks_;  // the input dims this kind accepts
};

class BatchNorm1d : public BatchNorm {  // x (N, C) or (N, C, L)
 public:
  explicit BatchNorm1d(int64_t num_features, BatchNormOptions options = {}) : BatchNorm("BatchNorm1d", {2, 3}, num_features, options) {}
};
class BatchNorm2d : public BatchNorm {  // x (N, C, H, W)
 public:
  explicit BatchNorm2d(int64_t num_features, BatchNormOptions options = {}) : BatchNorm("BatchNorm2d", {4}, num_features, options) {}
};

// x (N, C, ...) with C = num_channels, a multiple of num_groups; weight and bias (C) per channel.
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true)
      : num_groups(num_groups), num_channels(num_channels), eps(eps) {
    AMPGRAD_CHECK(num_groups > 0 && num_channels % num_groups == 0,
                  "GroupNorm: num_channels = " << num_channels << " does not split into num_groups = " << num_groups << " equal groups");
    if (!affine) return;
    weight = register_parameter("weight", ones({num_channels}));
    bias = register_parameter("bias", zeros({num_channels}));
  }
  Tensor forward(const Tensor& x) override { return group_norm(x, num_groups, weight, bias, eps); }

  int64_t num_groups, num_channels;
  double eps;
  Tensor weight, bias;  // (num_channels) each, undefined without affine
};

}  // namespace ampgrad::nn
