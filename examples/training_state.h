// training_state.h — what the MNIST and GPT trainers save so that a run resumes exactly: the
// model's state_dict ("model.*" tensors), the optimizer's parameter groups and state
// ("optimizer.*" tensors and metadata), the GradScaler's state ("scaler.*"), the learning-rate
// schedule's if there is one ("scheduler.*") and the trainer's own metadata (progress, settings,
// generator states), in one safetensors file written atomically (data/safetensors.h).
//
//   save_training_state(path, model, opt, scaler, &schedule, {{"step", "500"}});
//   TrainingState ck(path);           // reads and checks the file, loads nothing yet
//   ck.warn_if_changed(settings, log);     // the run's settings against the saved state's
//   ck.restore(model, opt, scaler, &schedule, log);
//   const int64_t step = ck.integer("step", 1);
//
// What restore refuses, naming the file and the key: a tensor under no known prefix, a model
// tensor of another dtype than the model's (PyTorch would cast it), a floating tensor holding inf
// or NaN (refused, not loaded with a warning: training on would save it again into every later
// saved state), an optimizer option outside the bounds its flag allows, and a loss scale that is 0
// or inf in float32.
#pragma once
#include <map>
#include <ostream>
#include <string>

#include "amp/grad_scaler.h"
#include "data/safetensors.h"
#include "nn/module.h"
#include "optim/lr_scheduler.h"
#include "tensor/random.h"

namespace ampgrad::examples {

// schedule may be null (a run without one).
void save_training_state(const std::string& path, const nn::Module& model, const optim::Optimizer& opt, const amp::GradScaler& scaler,
                              const optim::LRScheduler* schedule, std::map<std::string, std::string> meta);

class TrainingState {
 public:
  explicit TrainingState(std::string path);
  bool has(const std::string& key) const { return file_.metadata.count(key) > 0; }
  const std::string& meta(const std::string& key) const;  // an Error naming the file if absent
  double number(const std::string& key) const;            // meta(key) as a number, or an Error
  // meta(key) as a whole number in [lo, hi], or an Error naming the file, the key and the value
  int64_t integer(const std::string& key, int64_t lo, int64_t hi = INT64_MAX) const;
  Generator::State generator(const std::string& key) const;  // a generator's state, or an Error naming the file and key

  // Names in the log each of `settings` (key → this run's value) that the saved state holds with
  // another value: settings that make the continued run differ from an uninterrupted one.
  void warn_if_changed(const std::map<std::string, std::string>& settings, std::ostream& log) const;

  // Strict loads of the model, the optimizer and the schedule (if not null): as in PyTorch the
  // saved state's options and rates replace the ones this run was made with, and the log names
  // each that changed (the base rates, with a schedule, which sets the live ones from them).
  // The scaler's state loads if both the saved state and this run have a scaler; otherwise the
  // log says what happens to it (a run saved without one, resumed under fp16, starts a fresh one;
  // a saved state's scaler resumed without --amp fp16 is left unused).
  void restore(nn::Module& model, optim::Optimizer& opt, amp::GradScaler& scaler, optim::LRScheduler* schedule, std::ostream& log) const;

 private:
  std::map<std::string, double> numbers_under(const std::string& prefix) const;  // the metadata "<prefix>key", prefix dropped
  std::string path_;
  data::SafeTensors file_;
};

// A double as the shortest text that reads back to the same double: 0.05 as "0.05", as typed,
// not "0.050000000000000003" (and 0.1 + 0.2 as "0.30000000000000004", still exact).
std::string exact(double value);

}  // namespace ampgrad::examples
