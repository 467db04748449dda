// models.cpp — builds the networks from nn/ modules; weights are drawn from the default
// generator, so the caller's manual_seed fixes them.
#include "mnist/models.h"

namespace mnist {
using namespace ampgrad;
using std::make_shared;

std::shared_ptr<nn::Sequential> make_model(const std::string& name) {
  if (name == "mlp")
    return make_shared<nn::Sequential>(make_shared<nn::Flatten>(), make_shared<nn::Linear>(784, 512), make_shared<nn::ReLU>(),
                                       make_shared<nn::Linear>(512, 512), make_shared<nn::ReLU>(), make_shared<nn::Linear>(512, 10));
  if (name == "cnn")                                                  // (N, 1, 28, 28)
    return make_shared<nn::Sequential>(make_shared<nn::Conv2d>(1, 32, 5), make_shared<nn::ReLU>(),   // (N, 32, 24, 24)
                                       make_shared<nn::MaxPool2d>(2),                                // (N, 32, 12, 12)
                                       make_shared<nn::Conv2d>(32, 64, 5), make_shared<nn::ReLU>(),  // (N, 64, 8, 8)
                                       make_shared<nn::MaxPool2d>(2),                                // (N, 64, 4, 4)
                                       make_shared<nn::Flatten>(), make_shared<nn::Linear>(64 * 4 * 4, 128),
                                       make_shared<nn::ReLU>(), make_shared<nn::Linear>(128, 10));
  AMPGRAD_CHECK(false, "unknown model '" << name << "' (expected mlp or cnn)");
  return nullptr;
}

}  // namespace mnist
