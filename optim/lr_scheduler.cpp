// lr_scheduler.cpp — the closed forms of StepLR and CosineAnnealingLR.
#include "optim/lr_scheduler.h"

#include <cmath>

namespace ampgrad::optim {

void LRScheduler::load_state_dict(const std::map<std::string, double>& state) {
  for (const char* key : {"base_lr", "last_epoch"})
    AMPGRAD_CHECK(state.count(key), "LRScheduler::load_state_dict: missing key '" << key << "'");
  AMPGRAD_CHECK(state.at("last_epoch") >= 0, "LRScheduler::load_state_dict: last_epoch must be >= 0, got " << state.at("last_epoch"));
  base_lr_ = state.at("base_lr");
  last_epoch_ = int64_t(state.at("last_epoch"));
}

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma) : LRScheduler(opt), step_size_(step_size), gamma_(gamma) {
  AMPGRAD_CHECK(step_size >= 1, "StepLR: step_size must be >= 1, got " << step_size);
}
double StepLR::lr_at(int64_t epoch) const { return base_lr_ * std::pow(gamma_, double(epoch / step_size_)); }

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min) : LRScheduler(opt), T_max_(T_max), eta_min_(eta_min) {
  AMPGRAD_CHECK(T_max >= 1, "CosineAnnealingLR: T_max must be >= 1, got " << T_max);
}
double CosineAnnealingLR::lr_at(int64_t epoch) const {
  return eta_min_ + (base_lr_ - eta_min_) * (1 + std::cos(M_PI * double(epoch) / double(T_max_))) / 2;
}

}  // namespace ampgrad::optim
