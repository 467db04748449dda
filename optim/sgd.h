// sgd.h — stochastic gradient descent with momentum, dampening, weight decay and Nesterov,
// exactly torch.optim.SGD (the rule itself: sgd_update in update.h).
//
//   optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
#pragma once
#include "optim/optimizer.h"

namespace ampgrad::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  explicit SGD(std::vector<Tensor> params, SGDOptions options = {});
  void step() override;
  const SGDOptions& options() const { return options_; }  // options_.lr is the initial rate; lr() the live one

 protected:
  std::vector<std::string> buffer_names() const override;

 private:
  SGDOptions options_;
};

}  // namespace ampgrad::optim
