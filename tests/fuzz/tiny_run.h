// tiny_run.h — the small training run whose saved states fuzz_training_state restores and
// whose real saved states seed its corpus: a 4-3-2 MLP, SGD with momentum or AdamW, an enabled
// GradScaler and a StepLR schedule, all the state a trainer's saved state holds, at toy size.
#pragma once
#include <memory>
#include <string>

#include "amp/grad_scaler.h"
#include "autograd/ops.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tensor/random.h"

namespace ampgrad::fuzz {

struct TinyRun {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<optim::Optimizer> opt;
  amp::GradScaler scaler;
  std::unique_ptr<optim::StepLR> schedule;

  explicit TinyRun(const std::string& optimizer) {  // "sgd" or "adamw"
    manual_seed(0);
    model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::ReLU>());
    model->push_back(std::make_shared<nn::Linear>(3, 2));
    if (optimizer == "sgd") opt = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    else opt = std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 0.01});
    schedule = std::make_unique<optim::StepLR>(*opt, /*step_size=*/2, /*gamma=*/0.5);
  }

  // One scaled step on a fixed batch of two, then the schedule's step.
  void step() {
    const Tensor x = arange(0.0, 8.0).reshape({2, 4}) * 0.25;
    const Tensor y = arange(0.0, 2.0).to(kInt64);
    scaler.scale(cross_entropy(model->forward(x), y)).backward();
    scaler.step(*opt);
    scaler.update();
    opt->zero_grad();
    schedule->step();
  }
};

}  // namespace ampgrad::fuzz
