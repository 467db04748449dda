// memory_history.h — what was alive at a step's peak, and what made it: the question PyTorch's
// memory snapshot answers (torch.cuda.memory._record_memory_history, _snapshot). memory_stats
// says how high a step went; a MemoryHistory says which blocks were there when it did.
//
//   { ampgrad::MemoryHistory history(Device::cpu());
//     train_step();
//     history.print(std::cout); }   // the peak, and what was alive then, grouped by maker
//
// While it lives, the device's allocator reports every block it hands out and takes back, with
// sizes as memory_stats counts them, so peak_bytes() is the rise of memory_stats' peak. A block
// is named for what made it, the outermost of these:
//   - in backward, "<op> backward": all that a node's backward allocates, the gradient it returns
//     included ("checkpoint backward" holds the rerun region's activations);
//   - under autocast, "autocast weight cache" or "autocast cast": the 16-bit copies it makes;
//   - in the forward, the op whose output the block became ("relu", "linear"), named when the op
//     records its backward; until then, or for a temporary, the primitive that allocated it
//     ("matmul", "im2col"), or "(outside kernels)".
// One records at a time, in one process; allocations on every thread count, each named by its
// own thread's scopes. It keeps every event, so record a step or a few, not an epoch.
#pragma once
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>
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
  // block handed out or taken back, bytes as counted in memory_stats. Costs an atomic load
  // while no history records.
  static void allocated(Device device, const void* block, int64_t bytes);
  static void freed(Device device, const void* block, int64_t bytes);

 private:
  enum class Kind : uint8_t { allocated, freed, named };
  struct Event {
    Kind kind;
    const void* block;
    int64_t bytes;
    const char* name;    // with suffix, what made the block (or, for `named`, what it became)
    const char* suffix;
    bool weak;           // named by a primitive: an op that records the block renames it
    double ms;
  };
  struct Replay;
  Replay replay(size_t events) const;  // the state after events_[0, events)
  static std::vector<MemoryGroup> grouped(const Replay& r);
  void add(Kind kind, const void* block, int64_t bytes, const char* name, const char* suffix, bool weak);
  friend void name_output(const Tensor& out, const char* op);

  Device device_;
  std::chrono::steady_clock::time_point start_;
  std::vector<Event> events_;
  int64_t now_ = 0, peak_ = 0;
  size_t peak_event_ = 0;  // events_[0, peak_event_) reach the peak
};

// Names what this thread allocates while it lives, for a MemoryHistory; the outermost name holds.
// The engine names each node's backward, autocast its casts, the dispatcher each primitive (a
// weak name: the op that records the block as its output renames it).
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
void name_output(const Tensor& out, const char* op);

}  // namespace ampgrad
