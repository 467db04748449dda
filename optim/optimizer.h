// optimizer.h — Optimizer, the base of SGD, Adam and AdamW: the parameter list, the live
// learning rate (schedulers set it), zero_grad, per-parameter state and its state_dict, and the
// bookkeeping of a step on either device. The update rules are in sgd.h and adam.h, their
// per-element math in update.h, their fused CUDA kernels in fused.cu.
//
//   optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
//   opt.zero_grad();
//   loss.backward();
//   opt.step();
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "optim/fused.h"
#include "tensor/tensor.h"

namespace ampgrad::optim {

// What a checkpoint stores: scalars "lr", the optimizer's other options (as PyTorch's
// param_groups keep them: "momentum", "beta1", "eps", ...; a flag as 0 or 1) and
// "state.<i>.step", and tensors "state.<i>.<buffer>" (e.g. "state.3.exp_avg"), i being the
// parameter's index in params().
struct OptimizerState {
  std::map<std::string, double> scalars;
  std::vector<std::pair<std::string, Tensor>> tensors;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  void step();  // skips parameters whose grad is undefined
  // step(), unless found_inf (a 0-d float32 flag, GradScaler::unscale_'s) is nonzero: then no
  // parameter, buffer or step count changes. On the CPU the flag is read; with the parameters
  // on a GPU and the flag beside them, the fused kernel reads it there and the host never waits.
  void step_if_finite(const Tensor& found_inf);
  // set_to_none: make grads undefined (the next backward allocates them); else zero in place.
  void zero_grad(bool set_to_none = true);
  const std::vector<Tensor>& params() const { return params_; }
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }

  OptimizerState state_dict() const;  // buffers shared, not copied
  // Strict, like Module::load_state_dict: an unexpected key, a missing one, an option the
  // constructor would refuse, or a buffer whose shape or dtype (float32) does not fit its
  // parameter is an Error naming the key, and the optimizer is left as it was. As in PyTorch,
  // the loaded options replace the constructor's.
  void load_state_dict(const OptimizerState& state);

 protected:
  // `name` ("SGD", "Adam", ...) prefixes the messages of every check a step makes.
  Optimizer(std::vector<Tensor> params, double lr, const char* name);

  // One parameter's state, created on its first step: the steps it has taken and the buffers
  // its update rule keeps (float32, the parameter's shape), named as in PyTorch. The count is a
  // 0-d int64 tensor beside the parameter because on a GPU whether a step happens is decided
  // there (found_inf): PyTorch's fused optimizers keep `step` on the device for the same reason.
  struct ParamState {
    Tensor step;  // undefined until the first step
    std::map<std::string, Tensor> buffers;
  };
  virtual std::vector<std::string> buffer_names() const = 0;  // at most 2 (FusedParam::buffer)
  // The options a checkpoint carries beside lr, by name, and their restore from a map holding
  // every one of those names (checked as the constructor checks them, before any is set).
  virtual std::map<std::string, double> options_state() const = 0;
  virtual void load_options(const std::map<std::string, double>& options) = 0;

  // What each optimizer writes: its rule on one parameter's CPU data (n floats) at its step
  // count `step` (from 1, already counted) ...
  virtual void update_cpu(float* param, const float* grad, int64_t n, int64_t step, ParamState& state) = 0;
#ifdef AMPGRAD_WITH_CUDA
  // ... and on every parameter at once on the GPU: one fused launch (fused.h), which counts the
  // steps itself and does nothing when found_inf (a device pointer, or null) is set.
  virtual void update_cuda(const std::vector<FusedParam>& params, const float* found_inf) = 0;
#endif

  std::vector<Tensor> params_;
  std::vector<ParamState> state_;  // one per parameter
  double lr_;

 private:
  // step() and step_if_finite(): checks every parameter with a gradient (float32, contiguous,
  // all on one device), creates missing state, then runs update_cpu or update_cuda.
  void run_step(const Tensor& found_inf);
  // load_state_dict's checks and loading of lr and the per-parameter state, options already set.
  void load_state(const OptimizerState& state);
  const char* name_;
};

}  // namespace ampgrad::optim
