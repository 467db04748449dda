// failure_watch.h — what the MNIST and GPT trainers do when a step goes non-finite: their three
// flags (--explain-skips, --detect-anomaly, --max-skipped-steps), the amp::SkipWatch they make of
// them, and the warning before a saved state is written with weights that are not finite. The
// watching itself is diagnostics/skip_explainer.h's; the flags are failure_watch_flags.h's.
//
//   examples::FailureWatch watch;                                   // a TrainConfig member
//   amp::SkipWatch skips = examples::skip_watch(c.watch, *model, c.ddp, log);  // train()
#pragma once
#include <ostream>
#include <string>

#include "data_parallel.h"
#include "diagnostics/skip_explainer.h"
#include "nn/module.h"

namespace ampgrad::examples {

struct FailureWatch {
  bool explain_skips = false;       // --explain-skips: say why at the first skipped step of every run of them
  bool detect_anomaly = false;      // --detect-anomaly: check every op's output on every step
  int64_t max_skipped_steps = 100;  // --max-skipped-steps: stop after this many skipped steps in a row (0: never)
};

// ddp: every rank stops at the step a loss went non-finite on any of them (SkipWatchOptions)
inline amp::SkipWatch skip_watch(const FailureWatch& w, const nn::Module& model, bool ddp, std::ostream& log) {
  std::vector<Tensor> buffers;  // batch norm's running statistics, which a replay would move
  for (auto& [name, b] : model.named_buffers()) buffers.push_back(b);
  return amp::SkipWatch({.max_skipped_steps = w.max_skipped_steps, .explain_skips = w.explain_skips,
                         .detect_anomaly = w.detect_anomaly, .prefix = "model",
                         .sum_over_ranks = ddp ? data_parallel::sum_over_ranks : nullptr},
                        model.named_parameters(), std::move(buffers), log);
}

// A saved state is never written with inf/NaN weights without saying so: each such tensor is named.
inline void warn_if_nonfinite(const nn::Module& model, const std::string& path, std::ostream& log) {
  for (auto& [name, t] : model.state_dict())
    if (const amp::NonFiniteCount c = amp::count_nonfinite(t); c.total() > 0)
      log << "warning: writing " << path << " with model." << name << " not finite (" << c.inf << " inf, " << c.nan << " NaN of "
          << t.numel() << ")\n";
}

}  // namespace ampgrad::examples
