// grad_scaler.h — loss scaling, PyTorch's torch.amp.GradScaler in C++ with the same names.
// Float16 gradients smaller than 2^-24 flush to zero; multiplying the loss by a large scale S
// before backward lifts them into range, and dividing the float32 gradients by S before the
// optimizer step undoes it. If S was too large some gradient overflows: the step is skipped
// and S halves. After growth_interval clean steps S doubles. This half of amp/ sits beside
// the optimizer; the other half (autocast.h) sits below autograd.
//
//   amp::GradScaler scaler;                    // init_scale 65536, growth 2, backoff 0.5
//   scaler.scale(loss).backward();             // grads are S times too large
//   scaler.unscale_(opt);                      // optional: e.g. before clip_grad_norm_
//   scaler.step(opt);                          // unscales (if not yet), skips on inf/NaN
//   scaler.update();                           // S *= 0.5 on overflow, or *= 2 when due
//
// On a GPU the whole sequence runs without the host waiting for the device: the scale, the
// inf/NaN flag and the skip decision stay there (amp_kernels.h, Optimizer::step_if_finite).
// The host syncs that remain are the ones asked for: reading a StepResult as a bool,
// get_scale(), get_growth_tracker(), state_dict(), and record_history (one read per update()).
// (cross_entropy and nll_loss check labels on the host only for CPU tensors; on a GPU the
// gather kernel checks them on the device.)
// Around the scaler a training step may add its own: loss.item(), clip_grad_norm_ with
// error_if_nonfinite, and a batch copied from pageable host memory (tensor/cuda/copy.cpp).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "optim/optimizer.h"
#include "tensor/tensor.h"

namespace ampgrad::amp {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
  bool record_history = false;  // keep (iteration, scale, found_inf) per update(): a host read each
};

struct ScaleRecord {
  int64_t iteration;  // update() calls so far, counting this one
  double scale;       // the scale used for this iteration's backward
  bool found_inf;     // so the step was skipped
};

// What step() did. On a GPU the decision is made on the device, so the host learns it only by
// waiting for the step: converting to bool does that read, and only then. Leave the result
// unread (`scaler.step(opt);`) and the step stays sync-free. The conversion is implicit so
// that `bool stepped = scaler.step(opt);`, the CPU-era form, still reads naturally.
class StepResult {
 public:
  explicit StepResult(Tensor found_inf) : found_inf_(std::move(found_inf)) {}
  operator bool() const;  // whether optimizer.step() ran (always, when the scaler is disabled)
  // 0-d float32 where the scale lives, 1 if the step was skipped; undefined when disabled.
  // Sum it on the device to count skipped steps without a sync.
  const Tensor& found_inf() const { return found_inf_; }

 private:
  Tensor found_inf_;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  Tensor scale(const Tensor& outputs);  // outputs * S (S created lazily on outputs' device)
  void unscale_(optim::Optimizer& optimizer);
  StepResult step(optim::Optimizer& optimizer);  // optimizer.step_if_finite(found_inf)
  void update(std::optional<double> new_scale = {});

  // The 0-d float32 inf/NaN flag unscale_ recorded for this optimizer (undefined before unscale_):
  // a handle, so a collective may write into it before step() reads it (distributed/rank_consistency.h).
  Tensor found_inf(const optim::Optimizer& optimizer) const;
  double get_scale() const;  // a host read of S (1.0 when disabled)
  int64_t get_growth_tracker() const;
  bool is_enabled() const { return options_.enabled; }
  const GradScalerOptions& options() const { return options_; }
  const std::vector<ScaleRecord>& history() const { return history_; }

  std::map<std::string, double> state_dict() const;  // scale, growth_factor, backoff_factor, growth_interval, _growth_tracker
  void load_state_dict(const std::map<std::string, double>& state);

 private:
  enum class Stage { ready, unscaled, stepped };
  struct PerOptimizer {
    Stage stage = Stage::ready;
    Tensor found_inf;  // 0-d float32, set by unscale_
  };
  void lazy_init(Device device);

  GradScalerOptions options_;
  Tensor scale_;           // 0-d float32 where the loss lives
  Tensor growth_tracker_;  // 0-d int64 beside it
  int64_t init_growth_tracker_ = 0;  // what lazy_init starts growth_tracker_ from (load_state_dict sets it)
  std::unordered_map<const optim::Optimizer*, PerOptimizer> per_optimizer_;
  std::unordered_set<const void*> unscaled_;  // this iteration's unscaled gradients, by address: two optimizers may share one
  std::vector<ScaleRecord> history_;
};

}  // namespace ampgrad::amp
