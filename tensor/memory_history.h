// memory_history.h — what was alive at a step's peak, and what made it: the question PyTorch's
// memory snapshot answers (torch.cuda.memory._record_memory_history, _snapshot). memory_stats
// says how high a step went; a MemoryHistory says which blocks were there when it did.
//
//   { ampgrad::MemoryHistory history(Device::cpu());
//     train_step();
//     history.print(std::cout); }   // the peak, and what was alive then, grouped by maker
//
// While it lives, the device's allocator reports every block it hands out and takes back, with
// sizes as memory_stats counts them, so peak_bytes() is how far memory_stats' peak rose (reset
// as the history begins, with one thread allocating). A block is named for what made it, the
// outermost of these:
//   - in backward, "<op> backward": all that a node's backward allocates, the gradient it returns
//     included ("checkpoint backward" holds the rerun region's activations); where gradients
//     meet, "gradient sum", and a copy made to become a leaf's .grad, "AccumulateGrad";
//   - under autocast, "autocast weight cache" or "autocast cast": the 16-bit copies it makes;
//   - "optimizer state": what an optimizer's first step creates;
//   - in the forward, the op whose output the block became ("relu", "linear"), named when the op
//     records its backward; until then, or for a temporary, the primitive that allocated it
//     ("matmul", "im2col"), or "(outside kernels)".
// A name is the block's for good: a later op that passes the block on does not rename it, and a
// block named after the peak is shown at the peak by that name. One history records at a time,
// in one process; allocations on every thread count, each named by its own thread's scopes. It
// keeps every event (tens of bytes each; a training step makes thousands): record a stretch of
// steps, not a run.
#pragma once
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensor/device.h"

namespace ampgrad {

class Tensor;

struct MemoryGroup {
  std::string made_by;  // "relu", "linear backward", "autocast weight cache", ...
  int64_t blocks = 0;
  int64_t bytes = 0;
};

struct MemoryPoint {
  double ms;      // since the history began
  int64_t bytes;  // allocated above what was allocated when it began
};

class MemoryHistory {
 public:
  explicit MemoryHistory(Device device = Device::cpu());
  ~MemoryHistory();
  MemoryHistory(const MemoryHistory&) = delete;
  MemoryHistory& operator=(const MemoryHistory&) = delete;

  int64_t peak_bytes() const;  // the most allocated above the start (0 if it never rose)
  // The blocks made while recording and alive at the peak, grouped by maker, largest first. Less
  // freed_before_peak() (blocks made before recording and freed by then) they sum to peak_bytes().
  std::vector<MemoryGroup> live_at_peak() const;
  int64_t freed_before_peak() const;
  std::vector<MemoryGroup> live_now() const;  // the same for the blocks alive now
  std::vector<MemoryPoint> timeline() const;  // after each allocation and free, in order
  // The peak, the maker of the block that reached it, and live_at_peak's largest rows.
  void print(std::ostream& os, size_t rows = 10) const;

  // For the allocators (tensor/cpu/allocator.cpp, tensor/cuda/allocator.cpp): one call per
  // block handed out or taken back, bytes as counted in memory_stats. Cost an atomic load while
  // no history records; never throw (freed runs in Storage's destructor): an event that cannot
  // be kept is counted, and print says so.
  static void allocated(Device device, const void* block, int64_t bytes) noexcept;
  static void freed(Device device, const void* block, int64_t bytes) noexcept;

 private:
  struct Event {
    const void* block;
    int64_t bytes;        // > 0 allocated, < 0 freed
    const char* name;     // with suffix, what made an allocated block (static strings)
    const char* suffix;
    bool weak;            // named by a primitive: the op that records the block as its output renames it
    double ms;
  };
  struct Replay;
  Replay replay(size_t events) const;  // the state after events_[0, events)
  static std::vector<MemoryGroup> grouped(const Replay& r);
  void add(const void* block, int64_t bytes, const char* name, const char* suffix, bool weak);
  friend void name_output(const Tensor& out, const char* op) noexcept;

  Device device_;
  std::chrono::steady_clock::time_point start_;
  std::vector<Event> events_;
  std::unordered_map<const void*, size_t> allocated_at_;  // a live block made while recording -> its event
  int64_t now_ = 0, peak_ = 0, lost_at_start_ = 0;
  size_t peak_event_ = 0;  // events_[0, peak_event_) reach the peak
};

// Names what this thread allocates while it lives, for a MemoryHistory; the outermost name holds.
// The engine names each node's backward, autocast its casts, the dispatcher each primitive (a
// weak name: the op that records the block as its output renames it). The strings must outlive
// the history: string literals, or a node's name.
class AllocationName {
 public:
  explicit AllocationName(const char* name, const char* suffix = "", bool weak = false);
  ~AllocationName();
  AllocationName(const AllocationName&) = delete;
  AllocationName& operator=(const AllocationName&) = delete;

 private:
  bool set_ = false;
};

// For record(): out's block, if a primitive made it in the forward, takes the op's name.
void name_output(const Tensor& out, const char* op) noexcept;

}  // namespace ampgrad
