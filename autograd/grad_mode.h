// grad_mode.h — the thread-local switch that decides whether ops record a graph.
//   { NoGradGuard g; w.add_(grad, -lr); }   // an update the graph must not see
#pragma once

namespace ampgrad {

bool is_grad_enabled();
void set_grad_enabled(bool enabled);

// RAII: turns recording off (NoGradGuard) or on (EnableGradGuard) and restores it on exit.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : prev_(is_grad_enabled()) { set_grad_enabled(enabled); }
  ~GradModeGuard() { set_grad_enabled(prev_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool prev_;
};
struct NoGradGuard : GradModeGuard { NoGradGuard() : GradModeGuard(false) {} };
struct EnableGradGuard : GradModeGuard { EnableGradGuard() : GradModeGuard(true) {} };

}  // namespace ampgrad
