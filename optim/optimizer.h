// optimizer.h — Optimizer, the base of SGD, Adam and AdamW: the parameter list, the live
// learning rate (schedulers set it), zero_grad, per-parameter state and its state_dict.
// The update rules are in sgd.h and adam.h, their per-element math in update.h.
//
//   optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
//   opt.zero_grad();
//   loss.backward();
//   opt.step();
#pragma once
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace ampgrad::optim {

// What a checkpoint stores: scalars "lr" and "state.<i>.step", and tensors
// "state.<i>.<buffer>" (e.g. "state.3.exp_avg"), i being the parameter's index in params().
struct OptimizerState {
  std::map<std::string, double> scalars;
  std::vector<std::pair<std::string, Tensor>> tensors;
};

class Optimizer {
 public:
  Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;

  virtual void step() = 0;  // skips parameters whose grad is undefined
  // set_to_none: make grads undefined (the next backward allocates them); else zero in place.
  void zero_grad(bool set_to_none = true);
  const std::vector<Tensor>& params() const { return params_; }
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }

  OptimizerState state_dict() const;  // buffers shared, not copied
  // Strict, like Module::load_state_dict: an unexpected key, a missing one, or a buffer whose
  // shape or dtype (float32) does not fit its parameter is an Error naming the key.
  void load_state_dict(const OptimizerState& state);

 protected:
  // One parameter's state, created on its first step: the steps it has taken and the buffers
  // its update rule keeps (float32, the parameter's shape), named as in PyTorch.
  struct ParamState {
    int64_t step = 0;
    std::map<std::string, Tensor> buffers;
  };
  virtual std::vector<std::string> buffer_names() const = 0;

  // The loop every step() runs: for each parameter with a gradient, checks both are float32,
  // contiguous and on the CPU, creates zeroed buffers on the first step, counts the step,
  // then hands the raw data to `update` (n elements each).
  using UpdateFn = std::function<void(float* param, const float* grad, int64_t n, ParamState& state)>;
  void for_each_param(const char* optimizer, const UpdateFn& update);

  std::vector<Tensor> params_;
  std::vector<ParamState> state_;  // one per parameter
  double lr_;
};

}  // namespace ampgrad::optim
