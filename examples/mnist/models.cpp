// models.cpp — builds the networks from nn/ modules; weights are drawn from the default
// generator, so the caller's manual_seed fixes them.
#include "mnist/models.h"

namespace mnist {
using namespace ampgrad;
using std::make_shared;

std::shared_ptr<nn::Sequential> make_model(const std::string& name) {
  // Layers are made one statement at a time, in order: as arguments of one call, their weights
  // would be drawn in the order the compiler evaluates arguments, which C++ leaves unspecified
  // (g++ goes right to left, clang left to right).
  auto net = make_shared<nn::Sequential>();
  if (name == "mlp") {
    net->push_back(make_shared<nn::Flatten>());
    for (auto [in, out] : {std::pair<int64_t, int64_t>{784, 512}, {512, 512}}) {
      net->push_back(make_shared<nn::Linear>(in, out));
      net->push_back(make_shared<nn::ReLU>());
    }
    net->push_back(make_shared<nn::Linear>(512, 10));
    return net;
  }
  AMPGRAD_CHECK(name == "cnn" || name == "cnn-bn" || name == "cnn-gn", "unknown model '" << name << "' (expected mlp, cnn, cnn-bn or cnn-gn)");
  const bool norm = name != "cnn";
  // (N, 1, 28, 28) -> conv (N, 32, 24, 24) -> pool (N, 32, 12, 12) -> conv (N, 64, 8, 8) -> pool (N, 64, 4, 4)
  for (auto [in, out] : {std::pair<int64_t, int64_t>{1, 32}, {32, 64}}) {
    net->push_back(make_shared<nn::Conv2d>(in, out, 5, 1, 0, /*bias=*/!norm));  // a norm's mean cancels any bias
    if (name == "cnn-bn") net->push_back(make_shared<nn::BatchNorm2d>(out));
    if (name == "cnn-gn") net->push_back(make_shared<nn::GroupNorm>(8, out));
    net->push_back(make_shared<nn::ReLU>());
    net->push_back(make_shared<nn::MaxPool2d>(2));
  }
  net->push_back(make_shared<nn::Flatten>());
  net->push_back(make_shared<nn::Linear>(64 * 4 * 4, 128));
  net->push_back(make_shared<nn::ReLU>());
  net->push_back(make_shared<nn::Linear>(128, 10));
  return net;
}

}  // namespace mnist
