// trace.cpp — the TraceWriter's span stack and its JSON. Spans are kept in memory (a training
// step makes a few thousand) and written once; no streaming, no per-thread tracks.
#include "diagnostics/trace.h"

#include <algorithm>
#include <string_view>

#include "data/atomic_file.h"
#include "tensor/tensor.h"

#ifdef AMPGRAD_WITH_CUDA
#include <nvtx3/nvToolsExt.h>  // header-only: no library to link
#endif

namespace ampgrad {

TraceWriter::TraceWriter(std::string path)
    : path_(std::move(path)), thread_(std::this_thread::get_id()), start_(std::chrono::steady_clock::now()) {
  add_observer(this);
}
TraceWriter::~TraceWriter() {
  if (!stopped_) remove_observer(this);
}

double TraceWriter::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_).count();
}

void TraceWriter::open(const char* name, const char* category, nlohmann::json args) {
  open_.push_back({name, category, now_us(), 0.0, std::move(args)});
#ifdef AMPGRAD_WITH_CUDA
  nvtxRangePushA(name);
#endif
}

void TraceWriter::close() {
  if (open_.empty()) return;
  Event e = std::move(open_.back());
  open_.pop_back();
  e.dur = now_us() - e.ts;
  done_.push_back(std::move(e));
#ifdef AMPGRAD_WITH_CUDA
  nvtxRangePop();
#endif
}

void TraceWriter::begin_phase(const char* name) {
  if (!listening() || phases_++ > 0) return;
  if (forward_open_) close();
  forward_open_ = false;
  open(name, "phase");
}
void TraceWriter::end_phase() {
  if (!listening() || phases_ == 0 || --phases_ > 0) return;
  close();
}

void TraceWriter::on_kernel_begin(const char* kernel, Device device) {
  if (!listening()) return;
  if (phases_ == 0 && !forward_open_) {
    open("forward", "phase");
    forward_open_ = true;
  }
  if (open_.empty() || open_.back().category != std::string_view("kernel")) kernel_blocks_.clear();  // an outermost one
  open(kernel, "kernel", {{"device", device.str()}});
}

void TraceWriter::on_kernel_end(const char* kernel, Device device) {
  if (!listening()) return;
  close();
  const bool outermost = open_.empty() || std::string_view(open_.back().category) != "kernel";
  if (outermost) unlabelled_kernel_ = long(done_.size()) - 1;
}

void TraceWriter::on_alloc(Device device, const void* block, int64_t bytes) {
  if (listening() && !open_.empty() && open_.back().category == std::string_view("kernel")) kernel_blocks_.push_back(block);
}

// record() announces an op's output after the op's kernels ran: the last one is the op's if it
// allocated the output (not so for a view, or an op that returned its input).
void TraceWriter::on_op_output(const Tensor& out, const char* op, const std::vector<Tensor>&) {
  if (!listening() || unlabelled_kernel_ < 0 || !out.defined() || out.impl().is_view) return;
  if (std::find(kernel_blocks_.begin(), kernel_blocks_.end(), out.impl().storage->data) == kernel_blocks_.end()) return;
  nlohmann::json& args = done_[unlabelled_kernel_].args;
  args["op"] = op;
  args["dtype"] = dtype_name(out.dtype());
  args["shape"] = out.shape();
  unlabelled_kernel_ = -1;
}

void TraceWriter::on_span_begin(const char* name, SpanKind kind) {
  if (kind != SpanKind::node) begin_phase(name);  // "backward" is a phase of the timeline
  else if (listening()) open(name, "node");
}
void TraceWriter::on_span_end(const char* name, SpanKind kind) {
  if (kind != SpanKind::node) end_phase();
  else if (listening()) close();
}

void TraceWriter::write() {
  if (!stopped_) remove_observer(this);
  stopped_ = true;
  while (!open_.empty()) close();  // the forward phase still open, or spans a throw left open
  nlohmann::json events = nlohmann::json::array();
  // exercise 3.2: trace_events — the spans by start (an enclosing one first), each a complete event (ph X) with its ts and dur in µs
  std::stable_sort(done_.begin(), done_.end(), [](const Event& a, const Event& b) { return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur; });
  for (const Event& e : done_) {
    nlohmann::json j = {{"name", e.name}, {"cat", e.category}, {"ph", "X"}, {"ts", e.ts}, {"dur", e.dur}, {"pid", 1}, {"tid", 1}};
    if (!e.args.is_null()) j["args"] = e.args;
    events.push_back(std::move(j));
  }
  // end exercise 3.2
  const std::string text = nlohmann::json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}.dump();
  data::AtomicFile file(path_);
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace ampgrad
