// grad_scaler.cpp — the GradScaler state machine. Per optimizer and iteration:
//   ready --unscale_--> unscaled --step--> stepped --update--> ready   (step also unscales)
// Every misuse of that order is an error with PyTorch's message.
#include "amp/grad_scaler.h"

#include <cmath>

#include "amp/amp_kernels.h"
#include "autograd/ops.h"
#include "tensor/checked_int.h"
#include "tensor/kernels.h"
#include "tensor/observer.h"

namespace ampgrad::amp {

// A scale of inf, 0 or NaN would make every step overflow (or never), silently skipping them all.
static void check_scale(const char* where, double scale) {
  AMPGRAD_CHECK(scale > 0 && std::isfinite(scale), where << ": the scale must be positive and finite, got " << scale);
}

static void check_options(const char* where, const GradScalerOptions& o) {
  check_scale(where, o.init_scale);
  AMPGRAD_CHECK(o.growth_factor > 1 && std::isfinite(o.growth_factor) && o.backoff_factor > 0 && o.backoff_factor < 1 && o.growth_interval > 0,
                where << ": need finite growth_factor > 1, 0 < backoff_factor < 1, growth_interval > 0; got " << o.growth_factor
                      << ", " << o.backoff_factor << ", " << o.growth_interval);
}

GradScaler::GradScaler(GradScalerOptions o) : options_(o) { check_options("GradScaler", o); }

void GradScaler::lazy_init(Device device) {
  if (scale_.defined()) return;
  scale_ = full({}, options_.init_scale, TensorOptions(kFloat32).device(device));
  growth_tracker_ = full({}, double(init_growth_tracker_), TensorOptions(kInt64).device(device));
}

Tensor GradScaler::scale(const Tensor& outputs) {
  if (!options_.enabled) return outputs;
  Span phase("GradScaler", SpanKind::phase);  // to a timeline, as unscale_ and update
  lazy_init(outputs.device());
  return outputs * scale_;
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  PerOptimizer& st = per_optimizer_[&optimizer];
  AMPGRAD_CHECK(st.stage != Stage::unscaled, "unscale_() has already been called on this optimizer since the last update().");
  AMPGRAD_CHECK(st.stage != Stage::stepped, "unscale_() is being called after step().");
  AMPGRAD_CHECK(scale_.defined(), "unscale_(): no scale yet; call scaler.scale(loss) before backward.");
  Span phase("GradScaler", SpanKind::phase);
  NoGradGuard no_grad;
  // inv = float32(1 / float64(S)): exact for the powers of two S usually is
  Tensor inv_scale = full({}, 1.0, TensorOptions(kFloat64).device(scale_.device())) / scale_.to(kFloat64);
  std::vector<Tensor> grads;
  for (size_t i = 0; i < optimizer.params().size(); ++i) {
    Tensor g = optimizer.params()[i].grad();
    if (!g.defined()) continue;
    AMPGRAD_CHECK(g.dtype() == kFloat32, "unscale_(): parameter " << i << " has a " << dtype_name(g.dtype())
                                                                  << " gradient; AMP keeps master weights and their gradients in float32");
    AMPGRAD_CHECK(unscaled_.insert(g.raw_data()).second,
                  "unscale_(): parameter " << i << "'s gradient was already unscaled by another optimizer since the last update().");
    grads.push_back(g);
  }
  st.stage = Stage::unscaled;
  if (grads.empty()) return;  // no inf check recorded, as in PyTorch: step() refuses, update() ignores it
  st.found_inf = zeros({}, TensorOptions(kFloat32).device(scale_.device()));
  non_finite_check_and_unscale_(grads, st.found_inf, inv_scale.to(kFloat32));
}

StepResult::operator bool() const { return !found_inf_.defined() || found_inf_.item<float>() == 0.f; }

StepResult GradScaler::step(optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return StepResult(Tensor());
  }
  PerOptimizer& st = per_optimizer_[&optimizer];
  AMPGRAD_CHECK(st.stage != Stage::stepped, "step() has already been called since the last update().");
  if (st.stage == Stage::ready) unscale_(optimizer);
  AMPGRAD_CHECK(st.found_inf.defined(), "No inf checks were recorded for this optimizer.");
  // The skip. On the CPU the flag is read here and an inf/NaN gradient means no step at all; on a
  // GPU the fused optimizer kernel reads it where it lives and does nothing (no host sync).
  if (st.found_inf.device().is_cpu()) {
    if (*st.found_inf.data_ptr<float>() == 0.f) optimizer.step();
  } else {
    optimizer.step_if_finite(st.found_inf);
  }
  st.stage = Stage::stepped;
  return StepResult(st.found_inf);
}

void GradScaler::update(std::optional<double> new_scale) {
  if (!options_.enabled) return;
  AMPGRAD_CHECK(scale_.defined(), "update(): no scale yet; call scaler.scale(loss) first.");
  Span phase("GradScaler", SpanKind::phase);
  const double used = options_.record_history ? get_scale() : 0.0;
  // found: the inf/NaN flags of this iteration's steps, summed (the history records them with a new_scale too)
  Tensor found = zeros({}, TensorOptions(kFloat32).device(scale_.device()));
  bool any = false;
  for (auto& [opt, st] : per_optimizer_)
    if (st.found_inf.defined()) {
      kernels::add_(found, st.found_inf, 1.0);
      any = true;
    }
  if (new_scale) {
    check_scale("update(new_scale)", *new_scale);
    scale_.fill_(*new_scale);
  } else {
    AMPGRAD_CHECK(any, "No inf checks were recorded prior to update.");
    update_scale_(scale_, growth_tracker_, found, options_.growth_factor, options_.backoff_factor, options_.growth_interval);
  }
  if (options_.record_history)
    history_.push_back({(int64_t)history_.size() + 1, used, found.item<float>() != 0.f});
  per_optimizer_.clear();
  unscaled_.clear();
}

Tensor GradScaler::found_inf(const optim::Optimizer& optimizer) const {
  auto it = per_optimizer_.find(&optimizer);
  return it == per_optimizer_.end() ? Tensor() : it->second.found_inf;
}

double GradScaler::get_scale() const {
  if (!options_.enabled) return 1.0;
  return scale_.defined() ? scale_.item<double>() : options_.init_scale;
}
int64_t GradScaler::get_growth_tracker() const {
  return growth_tracker_.defined() ? growth_tracker_.item<int64_t>() : init_growth_tracker_;
}

std::map<std::string, double> GradScaler::state_dict() const {
  if (!options_.enabled) return {};
  return {{"scale", get_scale()},
          {"growth_factor", options_.growth_factor},
          {"backoff_factor", options_.backoff_factor},
          {"growth_interval", (double)options_.growth_interval},
          {"_growth_tracker", (double)get_growth_tracker()}};
}

// As in PyTorch, a disabled scaler ignores the call, and an empty state (what a disabled one saves)
// is refused by an enabled one.
void GradScaler::load_state_dict(const std::map<std::string, double>& s) {
  if (!options_.enabled) return;
  AMPGRAD_CHECK(!s.empty(), "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler.");
  for (const char* key : {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"})
    AMPGRAD_CHECK(s.count(key), "GradScaler::load_state_dict: missing key '" << key << "'");
  GradScalerOptions o = options_;
  o.init_scale = s.at("scale");
  o.growth_factor = s.at("growth_factor");
  o.backoff_factor = s.at("backoff_factor");
  o.growth_interval = checked_int64(s.at("growth_interval"), "GradScaler::load_state_dict: 'growth_interval'", 1);
  check_options("GradScaler::load_state_dict", o);
  init_growth_tracker_ = checked_int64(s.at("_growth_tracker"), "GradScaler::load_state_dict: '_growth_tracker'", 0, o.growth_interval - 1);
  options_ = o;
  // As in PyTorch: refill existing tensors, else let lazy_init create them where the first
  // scaled loss lives (a saved state is loaded before the scaler knows the device).
  if (scale_.defined()) {
    scale_.fill_(options_.init_scale);
    growth_tracker_.fill_(double(init_growth_tracker_));
  }
}

}  // namespace ampgrad::amp
