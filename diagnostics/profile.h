// profile.h — where a training step's time goes, kernel by kernel. While a Profile is alive,
// every primitive call on this thread (each one tensor/kernels.cpp dispatches: matmul, copy_ —
// every autocast cast is one —, add, sum, softmax, im2col, ...) is counted and timed, those
// inside backward() apart from the rest (the forward pass, zero_grad, the GradScaler's scale);
// the remainder of the wall time is what the kernels leave out (autograd's bookkeeping, the
// optimizer's and GradScaler's own loops, batching).
//
//   { ampgrad::Profile prof;  train_step();  prof.print(std::cout); }
//
// It hears the calls and the backward passes as a listener (tensor/observer.h). Profiles are
// scoped: made and destroyed on one thread, an inner one in an outer one's lifetime, which
// records again once the inner one is gone.
// A GPU runs kernels asynchronously: a call's time is then its launch, unless the Profile is made
// with sync_cuda, which waits for the device before and after each call (slower, but each row
// is its kernel, and work queued by others falls outside the rows).
#pragma once
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensor/device.h"
#include "tensor/observer.h"

namespace ampgrad {

struct ProfileRow {
  std::string kernel;
  bool backward;  // called inside backward(); else "other"
  int64_t calls;
  double ms;      // wall time, summed over the calls
};

class Profile final : public Observer {
 public:
  explicit Profile(bool sync_cuda = false);
  ~Profile() override;
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  std::vector<ProfileRow> rows() const;  // the largest total first
  double wall_ms() const;                // since construction
  // rows() as a table with each row's share of the wall time, then the time outside the kernels
  void print(std::ostream& os) const;

 private:
  // Only the outermost of nested calls is timed (a kernel's own fill_ belongs to its time), and
  // a call that throws is not recorded.
  void on_kernel_begin(const char* kernel, Device device) override;
  void on_kernel_end(const char* kernel, Device device) override;
  void on_span_begin(const char* name, SpanKind kind) override;  // counts backward passes
  void on_span_end(const char* name, SpanKind kind) override;
  bool listening() const;  // this thread's innermost Profile is this one
  void wait_for_device(Device device) const;

  using Clock = std::chrono::steady_clock;
  Clock::time_point start_, call_start_;
  bool sync_cuda_, saw_cuda_ = false;
  int depth_ = 0;       // nested kernel calls running
  int exceptions_ = 0;  // std::uncaught_exceptions() as the outermost began
  int backward_ = 0;    // nested backward passes running
  std::map<std::pair<std::string, bool>, std::pair<int64_t, double>> totals_;  // (kernel, backward) -> calls, ms
  Profile* prev_;
};

}  // namespace ampgrad
