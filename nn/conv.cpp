// conv.cpp — Conv2d's parameters and initialisation; MaxPool2d's forward.
#include "nn/conv.h"

#include "autograd/ops.h"
#include "nn/init.h"

namespace ampgrad::nn {

Conv2d::Conv2d(int64_t cin, int64_t cout, int64_t k, int64_t stride, int64_t padding, bool with_bias) : stride(stride), padding(padding) {
  AMPGRAD_CHECK(cin > 0 && cout > 0 && k > 0, "Conv2d: channels and kernel size must be > 0, got " << cin << ", " << cout << ", " << k);
  weight = register_parameter("weight", empty({cout, cin, k, k}));
  if (with_bias) bias = register_parameter("bias", empty({cout}));
  reset_parameters();
}

void Conv2d::reset_parameters() { init::linear_default_(weight, bias); }

Tensor Conv2d::forward(const Tensor& x) { return conv2d(x, weight, bias, stride, padding); }

Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, kernel_size, stride); }

}  // namespace ampgrad::nn
