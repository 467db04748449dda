// lr_scheduler.h — learning-rate schedules, PyTorch's closed forms: on each step() every
// parameter group's rate becomes a function of the epoch e and that group's initial rate.
//   StepLR:            lr_e = base · gamma^⌊e / step_size⌋
//   CosineAnnealingLR: lr_e = eta_min + (base − eta_min) · (1 + cos(π e / T_max)) / 2
//   LambdaLR:          lr_e = base · factor(e), any schedule (a warmup, say); set for e = 0 at once
//
//   optim::StepLR sched(opt, /*step_size=*/10, /*gamma=*/0.5);
//   for (int epoch = 0; epoch < 30; ++epoch) { train_one_epoch(); sched.step(); }
//
// An "epoch" is whatever step() counts: the GPT example steps its scheduler every optimizer step.
// To resume, save state_dict() beside the optimizer's and load both into fresh objects, in
// either order: the base rates and the epoch count come back, and with them the epoch's rates (a
// fresh scheduler alone would take the optimizer's current rates as its bases).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace ampgrad::optim {

class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  void step();  // once per epoch, after training it
  std::vector<double> get_last_lr() const;  // one per parameter group
  int64_t last_epoch() const { return last_epoch_; }
  std::map<std::string, double> state_dict() const;  // "base_lrs.<group>" and "last_epoch"
  void load_state_dict(const std::map<std::string, double>& state);

 protected:
  virtual double lr_at(double base_lr, int64_t epoch) const = 0;
  void apply();  // sets every group's rate for last_epoch

 private:
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = 0;
};

class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  int64_t T_max_;
  double eta_min_;
};

// As torch.optim.lr_scheduler.LambdaLR with one function for every group. Its state is the
// bases and the epoch, not the function: a resumed run passes the same one again.
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t epoch)> factor);

 protected:
  double lr_at(double base_lr, int64_t epoch) const override { return base_lr * factor_(epoch); }

 private:
  std::function<double(int64_t)> factor_;
};

}  // namespace ampgrad::optim
