// consumer — a program of another project, built against ampgrad (examples/consumer/CMakeLists.txt):
// a small MLP learns which of its three inputs is largest, under float16 autocast with the
// GradScaler, and prints its loss as it falls. The README's AMP step, in a project of its own.
#include <cstdio>

#include "amp/autocast.h"
#include "amp/grad_scaler.h"
#include "nn/nn.h"
#include "optim/optim.h"

using namespace ampgrad;

int main() {
  manual_seed(0);
  Tensor x = randn({256, 3});                    // (N, 3)
  Tensor y = argmax(x, 1);                       // (N) int64: the index of the largest input
  nn::Sequential model(std::make_shared<nn::Linear>(3, 32), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(32, 3));
  optim::Adam opt(model.parameters(), {.lr = 0.01});
  amp::GradScaler scaler;
  for (int step = 0; step <= 100; ++step) {
    opt.zero_grad();
    Tensor loss;
    {
      amp::autocast ac(DeviceType::CPU, kFloat16);  // the Linears' GEMMs in float16
      loss = nn::functional::cross_entropy(model.forward(x), y);  // float32, as the policy table says
    }
    scaler.scale(loss).backward();  // float16 gradients lifted clear of underflow
    scaler.step(opt);               // unscaled in one pass; skipped if any is inf/NaN
    scaler.update();
    if (step % 25 == 0) std::printf("step %3d  loss %.4f  scale %g\n", step, loss.item<double>(), scaler.get_scale());
  }
}
