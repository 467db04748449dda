// lr_scheduler.cpp — the per-group bookkeeping of a schedule and the closed forms of StepLR,
// CosineAnnealingLR and LambdaLR.
#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>

#include "tensor/checked_int.h"

namespace ampgrad::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g) base_lrs_.push_back(optimizer.lr(g));
}

void LRScheduler::step() {
  ++last_epoch_;
  apply();
}

void LRScheduler::apply() {
  for (size_t g = 0; g < base_lrs_.size(); ++g) optimizer_.set_lr(g, lr_at(base_lrs_[g], last_epoch_));
}

std::vector<double> LRScheduler::get_last_lr() const {
  std::vector<double> out;
  for (size_t g = 0; g < base_lrs_.size(); ++g) out.push_back(optimizer_.lr(g));
  return out;
}

std::map<std::string, double> LRScheduler::state_dict() const {
  std::map<std::string, double> out{{"last_epoch", double(last_epoch_)}};
  for (size_t g = 0; g < base_lrs_.size(); ++g) out["base_lrs." + std::to_string(g)] = base_lrs_[g];
  return out;
}

void LRScheduler::load_state_dict(const std::map<std::string, double>& state) {
  std::vector<std::string> keys{"last_epoch"};
  for (size_t g = 0; g < base_lrs_.size(); ++g) keys.push_back("base_lrs." + std::to_string(g));
  for (const std::string& key : keys) AMPGRAD_CHECK(state.count(key), "LRScheduler::load_state_dict: missing key '" << key << "'");
  for (const auto& [key, value] : state)
    AMPGRAD_CHECK(std::count(keys.begin(), keys.end(), key), "LRScheduler::load_state_dict: unexpected key '" << key << "' (the optimizer has "
                                                                 << base_lrs_.size() << " parameter groups)");
  last_epoch_ = checked_int64(state.at("last_epoch"), "LRScheduler::load_state_dict: 'last_epoch'", 0);
  for (size_t g = 0; g < base_lrs_.size(); ++g) base_lrs_[g] = state.at(keys[g + 1]);
  apply();  // whatever the optimizer held, loaded before or after: the rates of that epoch
}

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma) : LRScheduler(opt), step_size_(step_size), gamma_(gamma) {
  AMPGRAD_CHECK(step_size >= 1, "StepLR: step_size must be >= 1, got " << step_size);
}
double StepLR::lr_at(double base_lr, int64_t epoch) const { return base_lr * std::pow(gamma_, double(epoch / step_size_)); }

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min) : LRScheduler(opt), T_max_(T_max), eta_min_(eta_min) {
  AMPGRAD_CHECK(T_max >= 1, "CosineAnnealingLR: T_max must be >= 1, got " << T_max);
}
double CosineAnnealingLR::lr_at(double base_lr, int64_t epoch) const {
  return eta_min_ + (base_lr - eta_min_) * (1 + std::cos(M_PI * double(epoch) / double(T_max_))) / 2;
}

LambdaLR::LambdaLR(Optimizer& opt, std::function<double(int64_t)> factor) : LRScheduler(opt), factor_(std::move(factor)) {
  AMPGRAD_CHECK(factor_, "LambdaLR: the factor function is empty");
  apply();  // epoch 0's rate, as PyTorch's constructor sets it
}

}  // namespace ampgrad::optim
