// memory_history.cpp — the event log behind a MemoryHistory, and the thread-local name its
// events are stamped with. The log is replayed to answer questions, so recording costs one
// append per block and nothing is decided until asked.
#include "tensor/memory_history.h"

#include <algorithm>
#include <atomic>
#include <iomanip>
#include <map>
#include <mutex>
#include <ostream>
#include <sstream>
#include <unordered_map>

#include "tensor/error.h"
#include "tensor/tensor.h"

namespace ampgrad {
namespace {
// The recording history, and the lock every event and every question takes: allocators call in
// from any thread, and a history must not go while one is inside it.
std::atomic<MemoryHistory*> recording{nullptr};
std::mutex& history_mutex() {
  static std::mutex* mu = new std::mutex;  // never destroyed: static tensors free into it at exit
  return *mu;
}

struct Name {
  const char* name = nullptr;  // null: nothing names this thread's allocations now
  const char* suffix = "";
  bool weak = false;
};
thread_local Name current;

double mib(int64_t bytes) { return double(bytes) / (1 << 20); }
}  // namespace

MemoryHistory::MemoryHistory(Device device) : device_(device), start_(std::chrono::steady_clock::now()) {
  std::lock_guard lock(history_mutex());
  MemoryHistory* none = nullptr;
  AMPGRAD_CHECK(recording.compare_exchange_strong(none, this), "MemoryHistory: another one is recording (one at a time)");
}

MemoryHistory::~MemoryHistory() {
  std::lock_guard lock(history_mutex());
  recording = nullptr;
}

void MemoryHistory::add(Kind kind, const void* block, int64_t bytes, const char* name, const char* suffix, bool weak) {
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  events_.push_back({kind, block, bytes, name, suffix, weak, ms});
  if (kind == Kind::named) return;
  now_ += kind == Kind::allocated ? bytes : -bytes;
  if (now_ > peak_) {
    peak_ = now_;
    peak_event_ = events_.size();
  }
}

void MemoryHistory::allocated(Device device, const void* block, int64_t bytes) {
  if (!recording.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(history_mutex());
  MemoryHistory* h = recording.load();
  if (!h || h->device_ != device) return;
  const Name n = current.name ? current : Name{"(outside kernels)", "", true};
  h->add(Kind::allocated, block, bytes, n.name, n.suffix, n.weak);
}

void MemoryHistory::freed(Device device, const void* block, int64_t bytes) {
  if (!recording.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(history_mutex());
  MemoryHistory* h = recording.load();
  if (h && h->device_ == device) h->add(Kind::freed, block, bytes, nullptr, nullptr, false);
}

void name_output(const Tensor& out, const char* op) {
  // A view's block is its base's, named already (a view of a weight is not the weight's maker).
  if (!recording.load(std::memory_order_relaxed) || current.name || !out.defined() || out.impl().is_view) return;
  const Storage& s = *out.impl().storage;
  std::lock_guard lock(history_mutex());
  MemoryHistory* h = recording.load();
  if (h && h->device_ == s.device && s.data) h->add(MemoryHistory::Kind::named, s.data, 0, op, "", false);
}

// The blocks made while recording and alive after some events, by address.
struct MemoryHistory::Replay {
  struct Block {
    int64_t bytes;
    const char *name, *suffix;
    bool weak;
  };
  std::unordered_map<const void*, Block> live;
  int64_t freed_before = 0;  // bytes of blocks made before recording and freed since
};

MemoryHistory::Replay MemoryHistory::replay(size_t events) const {
  Replay r;
  for (size_t i = 0; i < events; ++i) {
    const Event& e = events_[i];
    auto it = r.live.find(e.block);
    switch (e.kind) {
      case Kind::allocated: r.live[e.block] = {e.bytes, e.name, e.suffix, e.weak}; break;
      case Kind::freed:
        if (it == r.live.end()) r.freed_before += e.bytes;
        else r.live.erase(it);
        break;
      case Kind::named:  // the first op to record a primitive's block names it
        if (it != r.live.end() && it->second.weak) it->second = {it->second.bytes, e.name, e.suffix, false};
        break;
    }
  }
  return r;
}

int64_t MemoryHistory::peak_bytes() const {
  std::lock_guard lock(history_mutex());
  return peak_;
}

int64_t MemoryHistory::freed_before_peak() const {
  std::lock_guard lock(history_mutex());
  return replay(peak_event_).freed_before;
}

std::vector<MemoryGroup> MemoryHistory::grouped(const Replay& r) {
  std::map<std::string, MemoryGroup> by_maker;
  for (const auto& [block, b] : r.live) {
    const std::string made_by = std::string(b.name) + b.suffix;
    MemoryGroup& g = by_maker[made_by];
    g.made_by = made_by;
    ++g.blocks;
    g.bytes += b.bytes;
  }
  std::vector<MemoryGroup> out;
  for (auto& [made_by, g] : by_maker) out.push_back(std::move(g));
  std::stable_sort(out.begin(), out.end(), [](const MemoryGroup& a, const MemoryGroup& b) { return a.bytes > b.bytes; });
  return out;
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
  for (const Event& e : events_) {
    if (e.kind == Kind::named) continue;
    now += e.kind == Kind::allocated ? e.bytes : -e.bytes;
    out.push_back({e.ms, now});
  }
  return out;
}

void MemoryHistory::print(std::ostream& out, size_t rows) const {
  const std::vector<MemoryGroup> groups = live_at_peak();
  const int64_t freed_before = freed_before_peak();
  std::ostringstream os;  // its formatting, not the caller's stream's
  os << std::fixed << std::setprecision(2);
  {
    std::lock_guard lock(history_mutex());
    os << "memory on " << device_.str() << ": peak " << mib(peak_) << " MiB above the start";
    if (peak_event_ > 0) {
      const Event& e = events_[peak_event_ - 1];
      os << ", " << std::setprecision(1) << e.ms << " ms in, reached by a block of " << std::setprecision(2) << mib(e.bytes)
         << " MiB from " << e.name << e.suffix;
    }
    os << "\n";
  }
  os << "alive then, by what made them:\n" << std::left << std::setw(32) << "  made by" << std::right << std::setw(8) << "blocks"
     << std::setw(12) << "MiB" << "\n";
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
  if (freed_before) os << "  minus " << mib(freed_before) << " MiB of blocks made before the history began and freed by the peak\n";
  out << os.str();
}

AllocationName::AllocationName(const char* name, const char* suffix, bool weak) {
  if (current.name) return;  // the outermost name holds
  current = {name, suffix, weak};
  set_ = true;
}

AllocationName::~AllocationName() {
  if (set_) current = {};
}

}  // namespace ampgrad
