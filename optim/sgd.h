// sgd.h — stochastic gradient descent with momentum, dampening, weight decay and Nesterov,
// exactly torch.optim.SGD (the rule itself: sgd_update in update.h).
//
//   optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
//   optim::SGD opt({{weights, {.lr = 0.1, .weight_decay = 1e-4}}, {biases, {.lr = 0.1}}});
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
  explicit SGD(std::vector<ParamGroup<SGDOptions>> groups);
  explicit SGD(std::vector<Tensor> params, SGDOptions options = {}) : SGD({{std::move(params), options}}) {}
  // A group's options; their lr is the initial rate, lr(group) the live one.
  const SGDOptions& options(size_t group = 0) const { return options_[check_group(group)]; }
  // As torch.optim's: one more group (say, layers unfrozen for fine-tuning). A scheduler made
  // before does not schedule it.
  void add_param_group(const ParamGroup<SGDOptions>& group);

 protected:
  std::vector<std::string> buffer_names(size_t group) const override;
  std::map<std::string, double> options_state(size_t group) const override;
  void load_options(size_t group, const std::map<std::string, double>& options) override;
  void update_cpu(size_t group, float* param, const float* grad, int64_t begin, int64_t end, int64_t step, ParamState& state) override;
#ifdef AMPGRAD_WITH_CUDA
  void update_cuda(size_t group, const std::vector<FusedParam>& params, const float* found_inf) override;
#endif

 private:
  SGDScalars scalars(size_t group, bool first_step) const;  // a group's options and live lr, in float32
  std::vector<SGDOptions> options_;  // one per group
};

}  // namespace ampgrad::optim
