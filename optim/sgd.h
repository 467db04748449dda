// sgd.h — stochastic gradient descent with momentum, dampening, weight decay and Nesterov,
// exactly torch.optim.SGD (the rule itself: sgd_update in update.h).
//
//   optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
#pragma once
#include "optim/optimizer.h"
#include "optim/update.h"

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
  const SGDOptions& options() const { return options_; }  // options_.lr is the initial rate; lr() the live one

 protected:
  std::vector<std::string> buffer_names() const override;
  std::map<std::string, double> options_state() const override;
  void load_options(const std::map<std::string, double>& options) override;
  void update_cpu(float* param, const float* grad, int64_t n, int64_t step, ParamState& state) override;
#ifdef AMPGRAD_WITH_CUDA
  void update_cuda(const std::vector<FusedParam>& params, const float* found_inf) override;
#endif

 private:
  SGDScalars scalars(bool first_step) const;  // the options and the live lr, in float32
  SGDOptions options_;
};

}  // namespace ampgrad::optim
