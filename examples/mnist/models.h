// models.h — the networks of the MNIST example.
//   mlp:    784-512-512-10 with ReLU
//   cnn:    conv5x5(32)-relu-maxpool2-conv5x5(64)-relu-maxpool2-fc(128)-relu-fc(10)
//   cnn-bn: the cnn with a BatchNorm2d after each convolution (which then has no bias)
//   cnn-gn: the same with a GroupNorm of 8 groups instead (4 and 8 channels a group)
#pragma once
#include <memory>
#include <string>

#include "nn/nn.h"

namespace mnist {

std::shared_ptr<ampgrad::nn::Sequential> make_model(const std::string& name);  // "mlp", "cnn", "cnn-bn" or "cnn-gn"

}  // namespace mnist
