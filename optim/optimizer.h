// optimizer.h — Optimizer, the base of SGD, Adam and AdamW: the parameters in groups, each
// group's live learning rate (schedulers set it), zero_grad, per-parameter state and its
// state_dict, and the bookkeeping of a step on either device. The update rules are in sgd.h and
// adam.h, their per-element math in update.h, their fused CUDA kernels in fused.cu.
//
//   optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
//   opt.zero_grad();
//   loss.backward();
//   opt.step();
//
// Parameter groups (torch::optim::OptimizerParamGroup) give parameters their own options, e.g.
// weight decay for a transformer's matrices but not for its biases and norms:
//
//   optim::AdamW opt({{matrices, {.lr = 1e-3, .weight_decay = 0.1}},
//                     {vectors, {.lr = 1e-3, .weight_decay = 0}}});
#pragma once
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "optim/fused.h"
#include "tensor/tensor.h"

namespace ampgrad::optim {

// A group of parameters and the options they share. Every group carries a whole options struct:
// a field left out takes the library's default, not another group's value.
template <class Options> struct ParamGroup {
  std::vector<Tensor> params;
  Options options;
};

// What a saved state stores, as PyTorch's state_dict lays it out: for each group g the scalars
// "param_groups.<g>.lr", its other options ("...momentum", "...beta1", "...eps"; a flag as 0 or
// 1) and "param_groups.<g>.num_params"; per parameter "state.<i>.step" and the tensors
// "state.<i>.<buffer>" (e.g. "state.3.exp_avg"), i being the parameter's index in params(),
// which numbers the groups' parameters one after another.
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
  const std::vector<Tensor>& params() const { return params_; }  // every group's, in order
  size_t num_param_groups() const { return lrs_.size(); }
  std::span<const Tensor> param_group(size_t group) const;
  double lr(size_t group = 0) const;
  void set_lr(size_t group, double lr);
  void set_lr(double lr);  // every group's

  OptimizerState state_dict() const;  // buffers shared, not copied
  // Strict, like Module::load_state_dict: an unexpected key, a missing one, another number of
  // groups or of parameters in a group, an option the constructor would refuse, or a buffer
  // whose shape or dtype (float32) does not fit its parameter is an Error naming the key, and
  // the optimizer is left as it was. As in PyTorch, the loaded options replace the
  // constructor's. A one-group state saved before groups existed ("lr", "momentum", ... with no
  // prefix) loads too.
  void load_state_dict(const OptimizerState& state);

 protected:
  // `name` ("SGD", "Adam", ...) prefixes the messages of every check. The derived constructor
  // adds the groups (add_group), then calls require_params.
  explicit Optimizer(const char* name) : name_(name) {}
  const char* name() const { return name_; }
  void require_params() const;  // an Error if no group brought a parameter

  // One parameter's state, created on its first step: the steps it has taken and the buffers
  // its update rule keeps (float32, the parameter's shape), named as in PyTorch. The count is a
  // 0-d int64 tensor beside the parameter because on a GPU whether a step happens is decided
  // there (found_inf): PyTorch's fused optimizers keep `step` on the device for the same reason.
  struct ParamState {
    Tensor step;  // undefined until the first step
    std::map<std::string, Tensor> buffers;
  };
  // What each optimizer writes, for a group's options: the buffers its parameters keep (at most
  // 2: FusedParam::buffer) ...
  virtual std::vector<std::string> buffer_names(size_t group) const = 0;
  // ... the options a saved state carries beside lr, by name, and their restore from a map
  // holding every one of those names (checked as the constructor checks them, before any is set) ...
  virtual std::map<std::string, double> options_state(size_t group) const = 0;
  virtual void load_options(size_t group, const std::map<std::string, double>& options) = 0;
  // ... its rule on elements [begin, end) of one parameter's CPU data (run_step gives each
  // thread a stretch) at its step count `step` (from 1, already counted) ...
  virtual void update_cpu(size_t group, float* param, const float* grad, int64_t begin, int64_t end, int64_t step, ParamState& state) = 0;
#ifdef AMPGRAD_WITH_CUDA
  // ... and on a group's parameters at once on the GPU: one fused launch (fused.h), which counts
  // the steps itself and does nothing when found_inf (a device pointer, or null) is set.
  virtual void update_cuda(size_t group, const std::vector<FusedParam>& params, const float* found_inf) = 0;
#endif
  size_t check_group(size_t group) const;  // group itself, or an Error naming the groups there are
  // Appends a group of leaves, none of them a parameter already, with its initial lr (the
  // derived optimizer's add_param_group checks and keeps the group's other options).
  void add_group(const std::vector<Tensor>& params, double lr);

 private:
  // step() and step_if_finite(): checks every parameter with a gradient (float32, contiguous,
  // all on one device), creates missing state, then runs update_cpu or update_cuda per group.
  void run_step(const Tensor& found_inf);
  // load_state_dict's checks and loading of the lrs and the per-parameter state, options already set.
  void load_state(const OptimizerState& state);
  size_t group_of(size_t param) const;

  std::vector<Tensor> params_;
  std::vector<size_t> group_begin_ = {0};  // group g holds params_[group_begin_[g], group_begin_[g + 1])
  std::vector<double> lrs_;          // the live lr of each group
  std::vector<ParamState> state_;    // one per parameter
  const char* name_;
};

}  // namespace ampgrad::optim
