// adam.h — Adam and AdamW, exactly torch.optim.Adam / AdamW (amsgrad left out). They differ in
// one line: Adam adds weight decay to the gradient, AdamW shrinks the weight itself, apart
// from the adaptive scaling. The rule: adam_update in update.h.
//
//   optim::AdamW opt(model->parameters(), {.lr = 3e-4});     // weight_decay 0.01 by default
//   optim::AdamW opt({{matrices, {.lr = 3e-4, .weight_decay = 0.1}}, {vectors, {.lr = 3e-4, .weight_decay = 0}}});
//                    // each group names its lr: one left out would be the default 1e-3, not 3e-4
#pragma once
#include <utility>

#include "optim/optimizer.h"
#include "optim/update.h"

namespace ampgrad::optim {

// Adam's and AdamW's options differ only in the default weight decay (PyTorch: 0 and 1e-2).
template <bool Decoupled> struct AdamOptionsFor {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = Decoupled ? 1e-2 : 0;
};
using AdamOptions = AdamOptionsFor<false>;
using AdamWOptions = AdamOptionsFor<true>;

class Adam : public Optimizer {
 public:
  explicit Adam(std::vector<ParamGroup<AdamOptions>> groups) : Adam(std::move(groups), false) {}
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {}) : Adam({{std::move(params), options}}) {}
  // A group's options; their lr is the initial rate, lr(group) the live one.
  const AdamOptions& options(size_t group = 0) const { return options_[check_group(group)]; }
  // As torch.optim's: one more group (say, layers unfrozen for fine-tuning). A scheduler made
  // before does not schedule it.
  void add_param_group(const ParamGroup<AdamOptions>& group);

 protected:
  Adam(std::vector<ParamGroup<AdamOptions>> groups, bool decoupled_weight_decay);
  std::vector<std::string> buffer_names(size_t) const override { return {"exp_avg", "exp_avg_sq"}; }
  std::map<std::string, double> options_state(size_t group) const override;
  void load_options(size_t group, const std::map<std::string, double>& options) override;
  void update_cpu(size_t group, float* param, const float* grad, int64_t begin, int64_t end, int64_t step, ParamState& state) override;
#ifdef AMPGRAD_WITH_CUDA
  void update_cuda(size_t group, const std::vector<FusedParam>& params, const float* found_inf) override;
#endif

 private:
  AdamHyperparams hyperparams(size_t group) const;  // a group's options and live lr
  std::vector<AdamOptions> options_;                // one per group
  bool decoupled_;
};

class AdamW : public Adam {
 public:
  explicit AdamW(const std::vector<ParamGroup<AdamWOptions>>& groups) : Adam(as_adam(groups), true) {}
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {}) : AdamW({{std::move(params), options}}) {}
  void add_param_group(const ParamGroup<AdamWOptions>& group) { Adam::add_param_group(as_adam({group})[0]); }

 private:
  static std::vector<ParamGroup<AdamOptions>> as_adam(const std::vector<ParamGroup<AdamWOptions>>& groups);
};

}  // namespace ampgrad::optim
