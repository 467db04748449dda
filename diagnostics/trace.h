// trace.h — a timeline of training, as Chrome trace-event JSON that Perfetto (ui.perfetto.dev)
// and chrome://tracing open: one span per kernel call and per backward node, each under its
// phase (forward, backward, optimizer, GradScaler). Not a profiler's table (profile.h sums).
//
//   { ampgrad::TraceWriter trace("run.json");  train_step();  trace.write(); }
//
// It listens (tensor/observer.h) on the thread that made it. The phases: backward is each
// backward() pass, optimizer and GradScaler their Spans, and forward every kernel outside
// those (the forward pass, zero_grad, data moved to the device). A kernel span's args are the
// device and, when it made an op's output, that op's name and the output's dtype and shape.
// Built with CUDA, every span is also an NVTX range, so Nsight Systems shows the same names.
// On a GPU a kernel span is its launch: the device runs it later (profile.h's sync_cuda).
#pragma once
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensor/observer.h"

namespace ampgrad {

class TraceWriter final : public Observer {
 public:
  explicit TraceWriter(std::string path);
  ~TraceWriter() override;  // stops listening; writes nothing
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Stops listening and writes the file atomically (data/atomic_file.h): {"traceEvents": [...]}
  // ordered by start time, a span before the spans it holds.
  void write();

 private:
  void on_kernel_begin(const char* kernel, Device device) override;
  void on_kernel_end(const char* kernel, Device device) override;
  void on_alloc(Device device, const void* block, int64_t bytes) override;
  void on_op_output(const Tensor& out, const char* op, const std::vector<Tensor>& inputs) override;
  void on_span_begin(const char* name, SpanKind kind) override;
  void on_span_end(const char* name, SpanKind kind) override;

  // A phase nested in another (a checkpoint's rerun inside backward) is part of the outer one.
  void begin_phase(const char* name);
  void end_phase();
  void open(const char* name, const char* category, nlohmann::json args = {});
  void close();  // the innermost open span
  bool listening() const { return !stopped_ && std::this_thread::get_id() == thread_; }
  double now_us() const;

  struct Event {
    std::string name;
    const char* category;
    double ts, dur;  // µs since construction
    nlohmann::json args;
  };
  std::string path_;
  std::thread::id thread_;
  std::chrono::steady_clock::time_point start_;
  bool stopped_ = false;
  int phases_ = 0;              // nested phases open
  bool forward_open_ = false;   // the implicit forward phase is the outermost open span
  std::vector<Event> open_;     // outermost first; dur not yet known
  std::vector<Event> done_;
  long unlabelled_kernel_ = -1;  // in done_: the last outermost kernel, until an op claims it
  std::vector<const void*> kernel_blocks_;  // what it allocated: an op claims it by its output
};

}  // namespace ampgrad
