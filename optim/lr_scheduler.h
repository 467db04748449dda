// lr_scheduler.h — learning-rate schedules over epochs, PyTorch's closed forms: the rate for
// epoch e is a function of e and the optimizer's initial rate, set on each step().
//   StepLR:            lr_e = base · gamma^⌊e / step_size⌋
//   CosineAnnealingLR: lr_e = eta_min + (base − eta_min) · (1 + cos(π e / T_max)) / 2
//
//   optim::StepLR sched(opt, /*step_size=*/10, /*gamma=*/0.5);
//   for (int epoch = 0; epoch < 30; ++epoch) { train_one_epoch(); sched.step(); }
//
// To resume, save state_dict() beside the optimizer's and load both into fresh objects: the
// base rate and the epoch count come back (a fresh scheduler alone would take the optimizer's
// current rate as its base).
#pragma once
#include <map>
#include <string>

#include "optim/optimizer.h"

namespace ampgrad::optim {

class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer) : optimizer_(optimizer), base_lr_(optimizer.lr()) {}
  virtual ~LRScheduler() = default;
  void step() { optimizer_.set_lr(lr_at(++last_epoch_)); }  // call once per epoch, after training it
  double get_last_lr() const { return optimizer_.lr(); }
  int64_t last_epoch() const { return last_epoch_; }
  std::map<std::string, double> state_dict() const { return {{"base_lr", base_lr_}, {"last_epoch", double(last_epoch_)}}; }
  void load_state_dict(const std::map<std::string, double>& state);

 protected:
  virtual double lr_at(int64_t epoch) const = 0;
  Optimizer& optimizer_;
  double base_lr_;

 private:
  int64_t last_epoch_ = 0;
};

class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);

 protected:
  double lr_at(int64_t epoch) const override;

 private:
  int64_t T_max_;
  double eta_min_;
};

}  // namespace ampgrad::optim
