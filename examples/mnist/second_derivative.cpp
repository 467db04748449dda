// second_derivative.cpp — what the MNIST trainer differentiates twice: the gradient penalty
// (--grad-penalty) and the FGSM attack it is measured against (--fgsm).
#include "mnist/second_derivative.h"

#include "autograd/grad.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/functional.h"

namespace mnist {
using namespace ampgrad;

// --grad-penalty λ: double backpropagation (Drucker & LeCun, 1992), λ · mean_n ‖∂loss_n/∂x_n‖²,
// which flattens the loss around every training image. It follows PyTorch's AMP recipe for a
// gradient penalty: the gradient of the *scaled* loss, taken with create_graph so the penalty can
// be differentiated in turn, is unscaled before use (here divided by the scale tensor, which needs
// no host read), and the penalty is computed under autocast like the rest of the forward.
Tensor input_gradient_penalty(const Tensor& loss, const Tensor& x, amp::GradScaler& scaler, double lambda,
                                     const examples::AmpSetting& precision) {
  const Tensor scaled_grad = autograd::grad({scaler.scale(loss)}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  const Tensor grad = scaled_grad / scaler.scale(ones({}, TensorOptions().device(x.device())));
  examples::Autocast ac(x.device().type, precision);
  // loss is the batch's mean, so ∂loss/∂x_n = ∂loss_n/∂x_n / N: mean_n ‖∂loss_n/∂x_n‖² = N · Σ grad²
  return sum(grad * grad) * (lambda * double(x.size(0)));
}

// --fgsm ε: each test image moved by ε against the model, x + ε·sign(∂loss/∂x), clamped to [0, 1]
// (the fast gradient sign method, Goodfellow et al., 2015). The attack's gradient is taken in
// float32 whatever the training precision, so every run faces the same attack.
Tensor fgsm(nn::Module& model, const Tensor& x, const Tensor& y, double eps) {
  EnableGradGuard with_grad;
  const Tensor xr = x.detach().requires_grad_();
  const Tensor g = autograd::grad({nn::functional::cross_entropy(model.forward(xr), y)}, {xr})[0];
  const Tensor zero = zeros({}, TensorOptions().device(x.device()));
  const Tensor sign = gt(g, zero).to(kFloat32) - lt(g, zero).to(kFloat32);
  return clamp(x + sign * eps, 0.0, 1.0);
}

}  // namespace mnist
