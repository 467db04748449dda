// failure_watch_flags.h — the trainers' flags for failure_watch.h, checked as flags.h checks numbers:
//   examples::add_failure_watch_flags(app, c.watch);   // --explain-skips, --detect-anomaly, --max-skipped-steps N
#pragma once
#include <CLI/CLI.hpp>

#include "failure_watch.h"
#include "flags.h"

namespace ampgrad::examples {

inline void add_failure_watch_flags(CLI::App& app, FailureWatch& w) {
  app.add_flag("--explain-skips", w.explain_skips,
               "when the GradScaler skips a step, replay its batch and print which gradients held inf/NaN and where the first appeared");
  app.add_flag("--detect-anomaly", w.detect_anomaly,
               "check every op's output, forward and backward, on every step, and report the first inf/NaN (slow: for debugging)");
  app.add_option("--max-skipped-steps", w.max_skipped_steps, "stop, explaining why, after this many skipped steps in a row (0: never)")
      ->check(whole_number(0, 1'000'000))->capture_default_str();
}

}  // namespace ampgrad::examples
