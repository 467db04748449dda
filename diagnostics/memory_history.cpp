// memory_history.cpp — the event log behind a MemoryHistory, each allocation stamped with its
// maker (observer.h's MadeBy). Questions replay the log, so recording costs one append per block
// and nothing is decided until asked.
#include "diagnostics/memory_history.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iomanip>
#include <map>
#include <mutex>
#include <ostream>
#include <sstream>

#include "tensor/error.h"
#include "tensor/tensor.h"

namespace ampgrad {
namespace {
// The lock every event and every question takes: allocators announce from any thread.
std::mutex& history_mutex() {
  static std::mutex* mu = new std::mutex;  // never destroyed: static tensors free at exit
  return *mu;
}
std::atomic<bool> recording{false};     // one history at a time
std::atomic<int64_t> lost_events{0};  // events a history could not keep (out of memory)

double mib(int64_t bytes) { return double(bytes) / (1 << 20); }

// The scopes this thread is in, as announced to the history recording now (a history that began
// inside one never hears it begin, and counts no lower than zero): the outermost backward node
// and kernel, and how deep in backward passes.
struct Scopes {
  uint64_t history = 0;  // which history heard them: one that ends inside a scope leaves no trace
  const char* node = nullptr;
  const char* kernel = nullptr;
  int nodes = 0, kernels = 0, passes = 0;
};
thread_local Scopes scopes;
std::atomic<uint64_t> histories{0};
Scopes& scopes_of(uint64_t history) {
  if (scopes.history != history) scopes = {history};
  return scopes;
}
void enter(const char*& outermost, int& depth, const char* name) {
  if (depth++ == 0) outermost = name;
}
void leave(const char*& outermost, int& depth) {
  if (depth > 0 && --depth == 0) outermost = nullptr;
}

// What made a block allocated now: the outermost of a backward node ("<op> backward"; a leaf's,
// PyTorch's "AccumulateGrad" as it is), a MadeBy scope, a sum of gradients (in backward, outside
// any node), a primitive (weak: the op that records the block as its output renames it).
struct Maker {
  const char* name;
  const char* suffix;
  bool weak;
};
Maker maker_now(const Scopes& s) {
  if (s.node) return {s.node, std::strcmp(s.node, "AccumulateGrad") == 0 ? "" : " backward", false};
  if (const char* scope = MadeBy::now()) return {scope, "", false};
  if (s.passes > 0) return {"gradient sum", "", false};
  return {s.kernel ? s.kernel : "(outside kernels)", "", true};
}
}  // namespace

MemoryHistory::MemoryHistory(Device device) : device_(device), start_(std::chrono::steady_clock::now()) {
  AMPGRAD_CHECK(!recording.exchange(true), "MemoryHistory: another one is recording (one at a time)");
  id_ = ++histories;
  lost_at_start_ = lost_events.load();
  add_observer(this);
}

MemoryHistory::~MemoryHistory() {
  remove_observer(this);
  recording = false;
}

void MemoryHistory::add(const void* block, int64_t bytes, const char* name, const char* suffix, bool weak) {
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  if (bytes > 0) allocated_at_[block] = events_.size();  // may throw: before anything changes
  else allocated_at_.erase(block);
  try {
    events_.push_back({block, bytes, name, suffix, weak, ms});
  } catch (...) {
    if (bytes > 0) allocated_at_.erase(block);
    throw;
  }
  now_ += bytes;
  if (now_ > peak_) {
    peak_ = now_;
    peak_event_ = events_.size();
  }
}

void MemoryHistory::on_alloc(Device device, const void* block, int64_t bytes) {
  if (device != device_) return;
  const Maker m = maker_now(scopes_of(id_));
  try {
    std::lock_guard lock(history_mutex());
    add(block, bytes, m.name, m.suffix, m.weak);
  } catch (...) {
    ++lost_events;
  }
}

void MemoryHistory::on_free(Device device, const void* block, int64_t bytes) {
  if (device != device_) return;
  try {
    std::lock_guard lock(history_mutex());
    add(block, -bytes, nullptr, nullptr, false);
  } catch (...) {
    ++lost_events;
  }
}

// The name is written into the block's allocation event, so every question, the peak's
// included, sees the block as the op's.
void MemoryHistory::on_op_output(const Tensor& out, const char* op, const std::vector<Tensor>&) {
  // A view's block is its base's, named already (a view of a weight is not the weight's maker).
  const Scopes& s = scopes_of(id_);
  if (s.node || MadeBy::now() || !out.defined() || out.impl().is_view || out.device() != device_) return;
  try {
    std::lock_guard lock(history_mutex());
    auto it = allocated_at_.find(out.impl().storage->data);
    if (it == allocated_at_.end()) return;
    Event& e = events_[it->second];
    if (e.weak) e = {e.block, e.bytes, op, "", false, e.ms};  // the first op to record it
  } catch (...) {
    ++lost_events;
  }
}

void MemoryHistory::on_kernel_begin(const char* kernel, Device) { Scopes& s = scopes_of(id_); enter(s.kernel, s.kernels, kernel); }
void MemoryHistory::on_kernel_end(const char*, Device) { Scopes& s = scopes_of(id_); leave(s.kernel, s.kernels); }
void MemoryHistory::on_span_begin(const char* name, SpanKind kind) {
  Scopes& s = scopes_of(id_);
  if (kind == SpanKind::node) enter(s.node, s.nodes, name);
  if (kind == SpanKind::backward) s.passes++;
}
void MemoryHistory::on_span_end(const char*, SpanKind kind) {
  Scopes& s = scopes_of(id_);
  if (kind == SpanKind::node) leave(s.node, s.nodes);
  if (kind == SpanKind::backward && s.passes > 0) s.passes--;
}

// The blocks made while recording and alive after some events, by address.
struct MemoryHistory::Replay {
  std::unordered_map<const void*, const Event*> live;  // their allocation events
  int64_t freed_before = 0;                             // bytes of blocks made before recording and freed since
};

MemoryHistory::Replay MemoryHistory::replay(size_t events) const {
  // exercise 4.1: replay_to_peak — which blocks made while recording are alive after events_[0, events), and the bytes freed of older ones
  Replay r;
  for (size_t i = 0; i < events; ++i) {
    const Event& e = events_[i];
    if (e.bytes > 0) {
      r.live[e.block] = &e;
    } else if (auto it = r.live.find(e.block); it != r.live.end()) {
      r.live.erase(it);
    } else {
      r.freed_before -= e.bytes;
    }
  }
  return r;
  // end exercise 4.1
}

std::vector<MemoryGroup> MemoryHistory::grouped(const Replay& r) {
  std::map<std::string, MemoryGroup> by_maker;
  for (const auto& [block, e] : r.live) {
    const std::string made_by = std::string(e->name) + e->suffix;
    MemoryGroup& g = by_maker[made_by];
    g.made_by = made_by;
    ++g.blocks;
    g.bytes += e->bytes;
  }
  std::vector<MemoryGroup> out;
  for (auto& [made_by, g] : by_maker) out.push_back(std::move(g));
  std::stable_sort(out.begin(), out.end(), [](const MemoryGroup& a, const MemoryGroup& b) { return a.bytes > b.bytes; });
  return out;
}

int64_t MemoryHistory::peak_bytes() const {
  std::lock_guard lock(history_mutex());
  return peak_;
}

int64_t MemoryHistory::freed_before_peak() const {
  std::lock_guard lock(history_mutex());
  return replay(peak_event_).freed_before;
}

std::vector<MemoryGroup> MemoryHistory::live_at_peak() const {
  std::lock_guard lock(history_mutex());
  return grouped(replay(peak_event_));
}

std::vector<MemoryGroup> MemoryHistory::live_now() const {
  std::lock_guard lock(history_mutex());
  return grouped(replay(events_.size()));
}

std::vector<MemoryPoint> MemoryHistory::timeline() const {
  std::lock_guard lock(history_mutex());
  std::vector<MemoryPoint> out;
  int64_t now = 0;
  for (const Event& e : events_) out.push_back({e.ms, now += e.bytes});
  return out;
}

void MemoryHistory::print(std::ostream& out, size_t rows) const {
  std::ostringstream os;  // its formatting, not the caller's stream's
  os << std::fixed << std::setprecision(2);
  std::lock_guard lock(history_mutex());  // one snapshot: the header and the table agree
  const Replay at_peak = replay(peak_event_);
  const std::vector<MemoryGroup> groups = grouped(at_peak);
  os << "memory on " << device_.str() << ": peak " << mib(peak_) << " MiB above the start";
  if (peak_event_ > 0) {
    const Event& e = events_[peak_event_ - 1];  // an allocation: only they raise the peak
    os << ", " << std::setprecision(1) << e.ms << " ms in, reached by a block of " << std::setprecision(2) << mib(e.bytes) << " MiB from "
       << e.name << e.suffix;
  }
  os << "\n"
     << "alive then, by what made them:\n"
     << std::left << std::setw(32) << "  made by" << std::right << std::setw(8) << "blocks" << std::setw(12) << "MiB" << "\n";
  const auto line = [&](const std::string& what, int64_t blocks, int64_t bytes) {
    os << "  " << std::left << std::setw(30) << what << std::right << std::setw(8) << blocks << std::setw(12) << mib(bytes) << "\n";
  };
  MemoryGroup rest{"(" + std::to_string(groups.size() > rows ? groups.size() - rows : 0) + " more)"};
  for (size_t i = 0; i < groups.size(); ++i) {
    if (i < rows) {
      line(groups[i].made_by, groups[i].blocks, groups[i].bytes);
    } else {
      rest.blocks += groups[i].blocks;
      rest.bytes += groups[i].bytes;
    }
  }
  if (rest.blocks) line(rest.made_by, rest.blocks, rest.bytes);
  if (at_peak.freed_before)
    os << "  minus " << mib(at_peak.freed_before) << " MiB of blocks made before the history began and freed by the peak\n";
  if (const int64_t lost = lost_events.load() - lost_at_start_)
    os << "  (" << lost << " allocator events could not be recorded, out of memory: the figures miss them)\n";
  out << os.str();
}

}  // namespace ampgrad
