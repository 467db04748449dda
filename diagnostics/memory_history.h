// memory_history.h — what was alive at a step's peak, and what made it: the question PyTorch's
// memory snapshot answers (torch.cuda.memory._record_memory_history, _snapshot). memory_stats
// says how high a step went; a MemoryHistory says which blocks were there when it did.
//
//   { ampgrad::MemoryHistory history(Device::cpu());
//     train_step();
//     history.print(std::cout); }   // the peak, and what was alive then, grouped by maker
//
// While it lives it hears (tensor/observer.h) the device's allocator announce every block it
// hands out and takes back, with sizes as memory_stats counts them, so peak_bytes() is how far
// memory_stats' peak rose (reset as the history begins, with one thread allocating). A block is
// named for what made it, the outermost scope alive on the thread that allocated it (it hears
// them announced: a backward node's Span, a kernel's call; or asks MadeBy):
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
#include "tensor/observer.h"

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

class MemoryHistory final : public Observer {
 public:
  explicit MemoryHistory(Device device = Device::cpu());
  ~MemoryHistory() override;
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
  // What it hears: never throws (a free comes from Storage's destructor): an event that cannot be
  // kept is counted, and print says so.
  void on_alloc(Device device, const void* block, int64_t bytes) override;
  void on_free(Device device, const void* block, int64_t bytes) override;
  void on_op_output(const Tensor& out, const char* op, const std::vector<Tensor>& inputs) override;  // a primitive's block takes the op's name
  void on_kernel_begin(const char* kernel, Device device) override;  // the scopes that name blocks, per thread
  void on_kernel_end(const char* kernel, Device device) override;
  void on_span_begin(const char* name, SpanKind kind) override;
  void on_span_end(const char* name, SpanKind kind) override;

  Device device_;
  std::chrono::steady_clock::time_point start_;
  std::vector<Event> events_;
  std::unordered_map<const void*, size_t> allocated_at_;  // a live block made while recording -> its event
  int64_t now_ = 0, peak_ = 0, lost_at_start_ = 0;
  size_t peak_event_ = 0;  // events_[0, peak_event_) reach the peak
  uint64_t id_ = 0;        // this history's number, which its per-thread scopes carry
};

}  // namespace ampgrad
