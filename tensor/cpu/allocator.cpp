// allocator.cpp — per-size free lists behind a mutex. A block's size is rounded to 64 bytes;
// the cache holds at most kMaxCached bytes and frees beyond that. The statistics are atomics,
// so a small block, which never takes the lock, still counts.
#include "tensor/cpu/allocator.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tensor/error.h"
#include "tensor/observer.h"

namespace ampgrad::cpu {

namespace {
constexpr size_t kMinCached = 64 << 10;  // below this, malloc is cheaper than bookkeeping
constexpr size_t kMaxCached = size_t(2) << 30;

struct Cache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free;  // rounded size -> blocks
  size_t bytes = 0;
};
Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: tensors freed during static destruction still find it
  return *c;
}
size_t rounded(size_t n) { return n < 64 ? 64 : (n + 63) / 64 * 64; }

struct Counters {
  std::atomic<int64_t> allocated{0}, reserved{0}, peak{0}, system_allocs{0}, system_frees{0};
};
Counters counters;  // constant-initialised: ready before any static tensor is made

void count_allocated(int64_t n) {
  const int64_t now = counters.allocated.fetch_add(n, std::memory_order_relaxed) + n;
  int64_t peak = counters.peak.load(std::memory_order_relaxed);
  while (now > peak && !counters.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {}
}
void* system_alloc(size_t n) {
  void* p = std::aligned_alloc(64, n);
  AMPGRAD_CHECK(p, "out of memory allocating " << n << " bytes on the CPU");
  counters.reserved += int64_t(n);
  ++counters.system_allocs;
  return p;
}
void system_free(void* p, size_t n) {
  std::free(p);
  counters.reserved -= int64_t(n);
  ++counters.system_frees;
}
}  // namespace

void* allocate(size_t nbytes) {
  const size_t n = rounded(nbytes);
  void* p = nullptr;
  if (n >= kMinCached) {
    Cache& c = cache();
    std::lock_guard lock(c.mu);
    auto it = c.free.find(n);
    if (it != c.free.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      c.bytes -= n;
    }
  }
  if (!p) p = system_alloc(n);
  count_allocated(int64_t(n));
  announce([&](Observer& o) { o.on_alloc(Device::cpu(), p, int64_t(n)); });
  return p;
}

void deallocate(void* ptr, size_t nbytes) {
  const size_t n = rounded(nbytes);
  counters.allocated -= int64_t(n);
  announce([&](Observer& o) { o.on_free(Device::cpu(), ptr, int64_t(n)); });
  if (n >= kMinCached) {
    Cache& c = cache();
    std::lock_guard lock(c.mu);
    if (c.bytes + n <= kMaxCached) {
      c.free[n].push_back(ptr);
      c.bytes += n;
      return;
    }
  }
  system_free(ptr, n);
}

size_t cached_bytes() {
  std::lock_guard lock(cache().mu);
  return cache().bytes;
}

void empty_cache() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  for (auto& [n, blocks] : c.free)
    for (void* p : blocks) system_free(p, n);
  c.free.clear();
  c.bytes = 0;
}

MemoryStats memory_stats() {
  return {counters.allocated.load(), counters.reserved.load(), counters.peak.load(), counters.system_allocs.load(),
          counters.system_frees.load()};
}

void reset_peak_memory_stats() { counters.peak = counters.allocated.load(); }

}  // namespace ampgrad::cpu
