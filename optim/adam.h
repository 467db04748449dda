// adam.h — Adam and AdamW, exactly torch.optim.Adam / AdamW (amsgrad left out). They differ in
// one line: Adam adds weight decay to the gradient, AdamW shrinks the weight itself, apart
// from the adaptive scaling. The rule: adam_update in update.h.
//
//   optim::AdamW opt(model->parameters(), {.lr = 3e-4});     // weight_decay 0.01 by default
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
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {}) : Adam(std::move(params), options, false) {}
  const AdamOptions& options() const { return options_; }  // options_.lr is the initial rate; lr() the live one

 protected:
  Adam(std::vector<Tensor> params, const AdamOptions& options, bool decoupled_weight_decay);
  std::vector<std::string> buffer_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  std::map<std::string, double> options_state() const override;
  void load_options(const std::map<std::string, double>& options) override;
  void update_cpu(float* param, const float* grad, int64_t n, int64_t step, ParamState& state) override;
#ifdef AMPGRAD_WITH_CUDA
  void update_cuda(const std::vector<FusedParam>& params, const float* found_inf) override;
#endif

 private:
  AdamHyperparams hyperparams() const;  // the options and the live lr
  AdamOptions options_;
  bool decoupled_;
};

class AdamW : public Adam {
 public:
  explicit AdamW(std::vector<Tensor> params, AdamWOptions o = {})
      : Adam(std::move(params), AdamOptions{o.lr, o.betas, o.eps, o.weight_decay}, true) {}
};

}  // namespace ampgrad::optim
