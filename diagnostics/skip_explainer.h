// skip_explainer.h — when a training step goes non-finite, say why, and when to give up: which
// parameters' gradients held inf/NaN, where the first one appeared (a NonFiniteLocator, armed on a
// replay of the step's batch or on every step), a warning once the loss scale falls below 1, and a
// stop after N skipped steps in a row, or at a non-finite loss when no GradScaler guards the step.
// The GradScaler itself is untouched (PyTorch's semantics); a loop that wants none of this omits it.
//
//   amp::SkipWatch watch({.max_skipped_steps = 100}, model->named_parameters(), buffers, log);
//   for (each batch) {
//     watch.begin_step(x, [&] { amp::autocast ac(...); return loss_of(model(x), y); });  // how to replay it
//     ... scaler.scale(loss).backward();
//     watch.check_loss(epoch, step, loss, scaler);   // no scaler: a NaN loss throws SkipWatch::Stop, explained
//     scaler.step(opt); scaler.update();
//     watch.end_step(scaler, stepped);               // too many skips: throws SkipWatch::Stop, explained
//     opt.zero_grad();
//   }
//
// Host reads: on the CPU every step (they are free there). On a GPU the counters stay on the device
// (a few 0-d ops per step) and are read every max_skipped_steps steps, one sync per N steps, so a
// stop there comes up to N steps late and names the step it counted from; explain_skips and
// detect_anomaly read every step (a sync each), being for debugging.
#pragma once
#include <functional>
#include <iosfwd>
#include <string>

#include "amp/grad_scaler.h"
#include "diagnostics/nonfinite_locator.h"
#include "tensor/random.h"

namespace ampgrad::amp {

struct SkipWatchOptions {
  int64_t max_skipped_steps = 100;  // stop after this many skipped steps in a row (0: never)
  bool explain_skips = false;       // explain the first skipped step of every run of them, by a replay, and train on
  bool detect_anomaly = false;      // the locator armed on every step (no replay needed; a host read per op)
  std::string prefix = "model";     // parameters are named as a saved state's keys: "model.3.weight"
  // Under data parallelism, a 0-d count summed over every rank (on a copy), so that a loss gone
  // non-finite on one rank stops them all at the same step: a rank that stopped alone would leave
  // the others waiting in their next collective. Unset: this process alone.
  std::function<Tensor(const Tensor&)> sum_over_ranks{};
};

// Per parameter, how many gradient elements are inf or NaN (a host read of each gradient).
struct BadGradient {
  std::string name;
  NonFiniteCount count;
  int64_t numel;
};
std::vector<BadGradient> nonfinite_gradients(const NamedParameters& parameters, const std::string& prefix = "");

class SkipWatch {
 public:
  struct Stop : Error {  // the run cannot go on: the message is the whole explanation
    using Error::Error;
  };
  using Replay = std::function<Tensor()>;  // the step's forward again on the same batch: its (unscaled) loss

  SkipWatch(SkipWatchOptions options, NamedParameters parameters, std::vector<Tensor> buffers, std::ostream& log);
  // batch: the step's input, checked first by a replay; replay: how to run the step again
  void begin_step(const Tensor& batch, Replay replay);
  // Before the optimizer's step: with no scaler enabled, a non-finite loss stops here, while the
  // weights are still those that made it; loss is the step's (the sum of its micro-batches'
  // losses, so that any one of them counts). epoch and step count from 1; epoch 0: no epochs.
  void check_loss(int epoch, int64_t step, const Tensor& loss, const GradScaler& scaler);
  // After scaler.step() and update(), before zero_grad: counts skipped steps, warns, stops.
  void end_step(const GradScaler& scaler, const StepResult& stepped);

  // The explanation of the step begun last: its replay at `scale`, or --detect-anomaly's record.
  std::string explain(double scale);

 private:
  bool read_now(const Tensor& t) const;
  std::string suggestion(double scale) const;
  std::string where() const;  // "epoch 2, step 17", or "step 17" when epoch is 0

  SkipWatchOptions options_;
  NamedParameters parameters_;
  std::vector<Tensor> buffers_;  // batch-norm statistics: a replay puts them back as they were
  std::ostream& log_;
  Tensor batch_;
  Replay replay_;
  Generator::State rng_;               // the generator before the step: the replay draws what the step drew
  std::optional<NonFiniteLocator> armed_;  // --detect-anomaly
  std::optional<NonFiniteReport> located_;  // the last report an explanation found
  int epoch_ = 0;
  int64_t step_ = 0, steps_seen_ = 0;
  // On the device, no host read: skipped steps in a row, and the first step whose loss was not finite.
  Tensor streak_, first_bad_loss_, bad_ranks_;  // bad_ranks_: how many ranks' losses were not finite then
  bool warned_scale_ = false;
};

}  // namespace ampgrad::amp
