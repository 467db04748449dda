// linear.cpp — Linear's parameters and their default initialisation.
#include "nn/linear.h"

#include "autograd/ops.h"
#include "nn/init.h"

namespace ampgrad::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias) {
  AMPGRAD_CHECK(in_features >= 0 && out_features >= 0, "Linear: feature counts must be >= 0, got " << in_features << " and " << out_features);
  weight = register_parameter("weight", empty({out_features, in_features}));
  if (with_bias) bias = register_parameter("bias", empty({out_features}));
  reset_parameters();
}

void Linear::reset_parameters() { init::linear_default_(weight, bias); }

Tensor Linear::forward(const Tensor& x) { return linear(x, weight, bias); }

}  // namespace ampgrad::nn
