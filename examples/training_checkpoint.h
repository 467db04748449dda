// training_checkpoint.h — what the MNIST and GPT trainers save so that a run resumes exactly: the
// model's state_dict ("model.*" tensors), the optimizer's parameter groups and state
// ("optimizer.*" tensors and metadata), the GradScaler's state ("scaler.*" metadata) and the
// trainer's own metadata (progress, settings, generator states), in one safetensors file
// written atomically (data/checkpoint.h).
//
//   save_training_checkpoint(path, model, opt, scaler, {{"step", "500"}});
//   TrainingCheckpoint ck(path);      // reads and checks the file, loads nothing yet
//   int step = std::stoi(ck.meta("step"));
//   ck.restore(model, opt, scaler, log);
#pragma once
#include <map>
#include <ostream>
#include <string>

#include "amp/grad_scaler.h"
#include "data/checkpoint.h"
#include "nn/module.h"
#include "optim/optimizer.h"

namespace ampgrad::examples {

void save_training_checkpoint(const std::string& path, const nn::Module& model, const optim::Optimizer& opt, const amp::GradScaler& scaler,
                              std::map<std::string, std::string> meta);

class TrainingCheckpoint {
 public:
  explicit TrainingCheckpoint(std::string path);
  const std::string& path() const { return path_; }
  bool has(const std::string& key) const { return file_.metadata.count(key) > 0; }
  const std::string& meta(const std::string& key) const;  // an Error naming the file if absent
  double number(const std::string& key) const;            // meta(key) as a number, or an Error

  // Strict loads of the model and optimizer (the checkpoint's lr and options replace the
  // constructor's, as in PyTorch, and the log names each one that changed) and of the scaler's
  // state if both the checkpoint and this run have a scaler (a run saved without one, resumed
  // under fp16, starts a fresh one).
  void restore(nn::Module& model, optim::Optimizer& opt, amp::GradScaler& scaler, std::ostream& log) const;

 private:
  std::string path_;
  data::SafeTensors file_;
};

// A double as text that reads back to the same double.
std::string exact(double value);

}  // namespace ampgrad::examples
