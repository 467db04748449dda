// profile.h — where a training step's time goes, kernel by kernel. While a Profile is alive,
// every primitive call on this thread (each one tensor/kernels.cpp dispatches: matmul, copy_ —
// every autocast cast is one —, add, sum, softmax, im2col, ...) is counted and timed, those
// inside backward() apart from the rest (the forward pass, zero_grad, the GradScaler's scale);
// the remainder of the wall time is what the kernels leave out (autograd's bookkeeping, the
// optimizer's and GradScaler's own loops, batching).
//
//   { ampgrad::Profile prof;  train_step();  prof.print(std::cout); }
//
// Profiles are scoped: made and destroyed on one thread, an inner one in an outer one's
// lifetime, which records again once the inner one is gone.
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
#include "tensor/memory_history.h"

namespace ampgrad {

struct ProfileRow {
  std::string kernel;
  bool backward;  // called inside backward(); else "other"
  int64_t calls;
  double ms;      // wall time, summed over the calls
};

class Profile {
 public:
  explicit Profile(bool sync_cuda = false);
  ~Profile();
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  std::vector<ProfileRow> rows() const;  // the largest total first
  double wall_ms() const;                // since construction
  // rows() as a table with each row's share of the wall time, then the time outside the kernels
  void print(std::ostream& os) const;

 private:
  friend class KernelScope;
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
  bool sync_cuda_, saw_cuda_ = false;
  std::map<std::pair<std::string, bool>, std::pair<int64_t, double>> totals_;  // (kernel, backward) -> calls, ms
  Profile* prev_;
};

// For the dispatcher, around one primitive call: times it while a Profile is on, only the
// outermost of nested calls (a kernel's own fill_ belongs to its time; a call that throws is not
// recorded), and names what it allocates for a MemoryHistory (tensor/memory_history.h). Costs
// a few thread-local tests when neither is on.
class KernelScope {
 public:
  KernelScope(const char* kernel, Device device);
  ~KernelScope();
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;

 private:
  void wait_for_device() const;
  AllocationName named_;
  Profile* profile_ = nullptr;  // set on the outermost scope only
  bool counted_ = false;        // in the nesting depth
  int exceptions_ = 0;          // std::uncaught_exceptions() at the start
  const char* kernel_;
  Device device_;
  Profile::Clock::time_point start_;
};

// For the engine: kernels called while one is alive count as backward.
class InBackward {
 public:
  InBackward();
  ~InBackward();
  InBackward(const InBackward&) = delete;
  InBackward& operator=(const InBackward&) = delete;

 private:
  bool prev_;
};

}  // namespace ampgrad
