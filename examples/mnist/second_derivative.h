// second_derivative.h — the MNIST trainer's two uses of a second derivative: a penalty on the
// loss's gradient with respect to the input, and the FGSM attack that tests what it buys.
#pragma once
#include "amp/grad_scaler.h"
#include "nn/module.h"
#include "trainer_support.h"

namespace mnist {

// λ · mean_n ‖∂loss_n/∂x_n‖², to add to the loss, by PyTorch's AMP recipe for a gradient penalty.
ampgrad::Tensor input_gradient_penalty(const ampgrad::Tensor& loss, const ampgrad::Tensor& x, ampgrad::amp::GradScaler& scaler, double lambda,
                                       const ampgrad::examples::AmpSetting& precision);
// Each image of x moved by ε against the model, clamped to [0, 1].
ampgrad::Tensor fgsm(ampgrad::nn::Module& model, const ampgrad::Tensor& x, const ampgrad::Tensor& y, double eps);

}  // namespace mnist
