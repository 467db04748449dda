// skip_explainer.cpp — the watch's counters (0-d tensors where the loss lives), its host reads,
// the replay that finds where a skipped step went non-finite, and the wording of what it says.
#include "diagnostics/skip_explainer.h"

#include <cmath>
#include <ostream>
#include <sstream>

#include "autograd/ops.h"

namespace ampgrad::amp {

std::vector<BadGradient> nonfinite_gradients(const NamedParameters& parameters, const std::string& prefix) {
  std::vector<BadGradient> bad;
  for (const auto& [name, p] : parameters)
    if (const NonFiniteCount c = count_nonfinite(p.grad()); c.total() > 0)
      bad.push_back({prefix.empty() ? name : prefix + "." + name, c, p.numel()});
  return bad;
}

SkipWatch::SkipWatch(SkipWatchOptions options, NamedParameters parameters, std::vector<Tensor> buffers, std::ostream& log)
    : options_(std::move(options)), parameters_(std::move(parameters)), buffers_(std::move(buffers)), log_(log) {
  AMPGRAD_CHECK(options_.max_skipped_steps >= 0, "SkipWatch: max_skipped_steps must be >= 0, got " << options_.max_skipped_steps);
  if (options_.detect_anomaly) armed_.emplace(parameters_, options_.prefix);
  // made now, where the weights live, so that a run's memory figures are the same with the watch or without
  const Device device = parameters_.empty() ? Device::cpu() : parameters_[0].second.device();
  streak_ = zeros({}, TensorOptions().device(device));
  first_bad_loss_ = zeros({}, TensorOptions().device(device));
  bad_ranks_ = zeros({}, TensorOptions().device(device));
}

void SkipWatch::begin_step(const Tensor& batch, Replay replay) {
  batch_ = batch;
  replay_ = std::move(replay);
  rng_ = default_generator().get_state();
  if (armed_) {
    armed_->clear();
    armed_->check_input(batch, "the input batch");
  }
}

// Read now on the CPU (free), or every N steps on a GPU (a sync); a debugging mode reads each step.
bool SkipWatch::read_now(const Tensor& t) const {
  const int64_t every = options_.explain_skips || options_.detect_anomaly ? 1 : std::max<int64_t>(1, options_.max_skipped_steps);
  return !t.device().is_cuda() || steps_seen_ % every == 0;
}

void SkipWatch::check_loss(int epoch, int64_t step, const Tensor& loss, const GradScaler& scaler) {
  epoch_ = epoch, step_ = step;
  ++steps_seen_;
  if (scaler.is_enabled()) return;  // a non-finite loss is the scaler's to skip
  NoGradGuard no_grad;
  // the first step whose loss is inf or NaN (x - x is NaN exactly for those) here, or on any rank; on the device
  const Tensor l = loss.detach().to(kFloat32), zero = zeros({}, TensorOptions().device(l.device()));
  Tensor bad = ne(l - l, zero).to(kFloat32);
  if (options_.sum_over_ranks) bad = options_.sum_over_ranks(bad);
  const Tensor first_now = eq(first_bad_loss_, zero).to(kFloat32) * gt(bad, zero).to(kFloat32);
  first_bad_loss_ = first_bad_loss_ + first_now * double(step);
  bad_ranks_ = bad_ranks_ + first_now * bad;
  if (!read_now(l)) return;
  if (const int64_t first = int64_t(first_bad_loss_.item<float>()); first > 0) {
    const float value = loss.item<float>();
    std::ostringstream os;
    os << "stopped at " << where() << ": the loss is " << (std::isnan(value) ? "nan" : std::to_string(value));
    if (options_.sum_over_ranks) os << " here, and not finite on " << int64_t(bad_ranks_.item<float>()) << " of the ranks";
    if (first != step) os << " (first not finite at step " << first << ": on a GPU the watch reads every --max-skipped-steps steps)";
    os << ", with no GradScaler to skip the step\n" << explain(1.0);
    throw Stop(os.str());
  }
}

void SkipWatch::end_step(const GradScaler& scaler, const StepResult& stepped) {
  // Held no longer than the step: the batch is the trainer's to free (its memory figures count on it).
  struct Release {
    SkipWatch& w;
    ~Release() { w.batch_ = Tensor(), w.replay_ = nullptr; }
  } release{*this};
  const Tensor& found = stepped.found_inf();
  if (!found.defined()) return;
  NoGradGuard no_grad;
  streak_ = found * (streak_ + 1.0);  // 0 after a step taken
  if (!read_now(found)) return;
  const int64_t streak = int64_t(streak_.item<float>());
  if (streak == 0) return;
  const double scale = scaler.get_scale();
  const double used = scale / scaler.options().backoff_factor;  // the skipped step ran at the scale before update() backed it off
  if (!warned_scale_ && scale < 1) {
    warned_scale_ = true;
    const std::string why = explain(used);
    log_ << "warning: the loss scale fell below 1 (" << scale << ") at " << where()
         << ": float16's range does not fit this model's values (pytorch#99640).\n" << why << "\n";
  }
  if (options_.max_skipped_steps > 0 && streak >= options_.max_skipped_steps) {
    std::ostringstream os;
    os << "stopped at " << where() << ": " << streak << " optimizer steps in a row were skipped (--max-skipped-steps "
       << options_.max_skipped_steps << "), each for inf/NaN in its gradients; the loss scale is now " << scale << "\n" << explain(used);
    throw Stop(os.str());
  }
  if (options_.explain_skips && streak == 1) log_ << "step skipped at " << where() << " (scale " << used << "):\n" << explain(used) << "\n";
}

std::string SkipWatch::where() const {
  return (epoch_ > 0 ? "epoch " + std::to_string(epoch_) + ", step " : "step ") + std::to_string(step_);
}

std::string SkipWatch::explain(double scale) {
  std::ostringstream os;
  const bool recorded = armed_ && armed_->report();  // --detect-anomaly watched the step itself
  if (!recorded && replay_) {
    // Replay the step: same weights (a skipped step changed none), batch, random draws and scale.
    // What the replay moves (the generator, batch norm's statistics) is put back after it, also
    // when it throws: a run that explains its skips trains on.
    struct Restore {
      Generator::State after;
      std::vector<Tensor>& buffers;
      std::vector<Tensor> stats;
      ~Restore() {
        default_generator().set_state(after);
        for (size_t i = 0; i < stats.size(); ++i) buffers[i].copy_(stats[i]);  // those cloned before a throw
      }
    } restore{default_generator().get_state(), buffers_, {}};
    for (const Tensor& b : buffers_) restore.stats.push_back(b.clone());
    for (auto& [name, p] : parameters_) p.set_grad(Tensor());
    default_generator().set_state(rng_);
    NonFiniteLocator locator(parameters_, options_.prefix);
    locator.check_input(batch_, "the input batch");
    {
      EnableGradGuard with_grad;
      (replay_() * scale).backward();
    }
    located_ = locator.report();
  } else if (recorded) {
    located_ = armed_->report();
  }
  const std::vector<BadGradient> bad = nonfinite_gradients(parameters_, options_.prefix);
  if (!recorded && replay_) for (auto& [name, p] : parameters_) p.set_grad(Tensor());  // the replay's, not the step's
  os << "gradients holding inf/NaN (" << (recorded ? "this step" : "the step replayed") << ", loss scale " << scale << "):";
  if (bad.empty()) os << " none";
  const size_t shown = 8;  // a GPT's every tensor would be a screen
  for (size_t i = 0; i < bad.size() && i < shown; ++i)
    os << "\n  " << bad[i].name << ": " << bad[i].count.total() << " of " << bad[i].numel << " (" << bad[i].count.inf << " inf, "
       << bad[i].count.nan << " NaN)";
  if (bad.size() > shown) os << "\n  ... and " << bad.size() - shown << " more parameters";
  os << "\n" << (located_ ? located_->str() : "first inf/NaN: none found (the replay stayed finite)") << suggestion(scale);
  return os.str();
}

// What to change, given where the first inf/NaN appeared and the loss scale it appeared at.
std::string SkipWatch::suggestion(double scale) const {
  if (!located_ || located_->op.empty()) return "";
  if (located_->dtype == kFloat16 && located_->backward && scale > 1)
    return "\na scaled gradient overflowed float16: the GradScaler halves the scale and steps again (usual while it finds its level)";
  if (located_->dtype == kFloat16 && located_->policy == CastPolicy::lower_precision)
    return "\nfloat16 cannot hold this model's values at " + located_->policy_op + ": try --amp bf16 (float32's range), or run " +
           located_->policy_op + " in float32 (its row in tensor/ops.def: lower_precision -> fp32)";
  return "";
}

}  // namespace ampgrad::amp
