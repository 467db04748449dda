// grad_mode.h — the thread-local switches of a forward: whether ops record a graph, and whether
// the forward is a rerun (recomputing a graph), when ops skip their side effects.
//   { NoGradGuard g; w.add_(grad, -lr); }   // an update the graph must not see
#pragma once
#include <utility>

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

// RAII: marks a forward that runs a second time to rebuild its graph, as activation
// checkpointing's recompute in backward does. An op with an effect beyond its output (batch
// norm's running statistics) skips it then: the first run made it, and twice would count the
// batch twice (PyTorch's checkpoint does).
class ForwardRerunGuard {
 public:
  ForwardRerunGuard() : prev_(std::exchange(active(), true)) {}
  ~ForwardRerunGuard() { active() = prev_; }
  ForwardRerunGuard(const ForwardRerunGuard&) = delete;
  ForwardRerunGuard& operator=(const ForwardRerunGuard&) = delete;
  static bool& active() { thread_local bool on = false; return on; }

 private:
  bool prev_;
};
inline bool is_forward_rerun() { return ForwardRerunGuard::active(); }

}  // namespace ampgrad
