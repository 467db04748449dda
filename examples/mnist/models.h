// models.h — the two networks of the MNIST example.
//   mlp: 784-512-512-10 with ReLU
//   cnn: conv5x5(32)-relu-maxpool2-conv5x5(64)-relu-maxpool2-fc(128)-relu-fc(10)
#pragma once
#include <memory>
#include <string>

#include "nn/nn.h"

namespace mnist {

std::shared_ptr<ampgrad::nn::Sequential> make_model(const std::string& name);  // "mlp" or "cnn"

}  // namespace mnist
