// allocator.cpp — size-class free lists behind a mutex. A large block's size is rounded up to one
// of eight classes per power of two (at most 1/8 wasted, as the CUDA allocator rounds), so shapes
// that vary a little still reuse blocks. The cache holds at most what the program has ever had
// allocated at once (at least 64 MiB), evicting the least recently freed blocks first: memory a
// program no longer uses goes back to the system instead of staying cached for ever. The
// statistics are atomics, so a small block, which never takes the lock, still counts.
#include "tensor/cpu/allocator.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <unistd.h>

#include "tensor/error.h"
#include "tensor/observer.h"

namespace ampgrad::cpu {

namespace {
constexpr size_t kMinCached = 64 << 10;  // below this, malloc is cheaper than bookkeeping
constexpr size_t kMinCap = 64 << 20;      // the cache may always hold this much

struct Block {
  size_t size;
  void* ptr;
};
struct Cache {
  std::mutex mu;
  std::list<Block> recent;  // the most recently freed first
  std::unordered_map<size_t, std::vector<std::list<Block>::iterator>> by_size;
  size_t bytes = 0;
};
Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: tensors freed during static destruction still find it
  return *c;
}

struct Counters {
  std::atomic<int64_t> allocated{0}, reserved{0}, peak{0}, system_allocs{0}, system_frees{0};
  std::atomic<int64_t> most_ever{0};  // the peak that reset_peak_memory_stats never resets: the cache's cap
};
Counters counters;  // constant-initialised: ready before any static tensor is made

void raise_to(std::atomic<int64_t>& high, int64_t now) {
  int64_t seen = high.load(std::memory_order_relaxed);
  while (now > seen && !high.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {}
}
void count_allocated(int64_t n) {
  const int64_t now = counters.allocated.fetch_add(n, std::memory_order_relaxed) + n;
  raise_to(counters.peak, now);
  raise_to(counters.most_ever, now);
}
void* system_alloc(size_t n) {
  // More than the machine holds is refused by arithmetic: overcommit may grant it and fail later.
  static const size_t physical = size_t(sysconf(_SC_PHYS_PAGES)) * size_t(sysconf(_SC_PAGE_SIZE));
  AMPGRAD_CHECK(n <= physical, "out of memory allocating " << n << " bytes on the CPU: the machine has " << physical);
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
// Takes the block out of the cache (the lock held).
void* take(Cache& c, std::vector<std::list<Block>::iterator>& same_size, size_t index) {
  const auto it = same_size[index];
  void* p = it->ptr;
  c.bytes -= it->size;
  same_size.erase(same_size.begin() + std::ptrdiff_t(index));
  c.recent.erase(it);
  return p;
}
}  // namespace

size_t rounded_block_size(size_t n) {
  if (n < kMinCached) return n < 64 ? 64 : (n + 63) / 64 * 64;
  const size_t step = std::bit_floor(n) / 8;
  return (n + step - 1) / step * step;
}

void* allocate(size_t nbytes) {
  const size_t n = rounded_block_size(nbytes);
  void* p = nullptr;
  if (n >= kMinCached) {
    Cache& c = cache();
    std::lock_guard lock(c.mu);
    auto it = c.by_size.find(n);
    if (it != c.by_size.end() && !it->second.empty()) p = take(c, it->second, it->second.size() - 1);
  }
  if (!p) p = system_alloc(n);
  count_allocated(int64_t(n));
  announce([&](Observer& o) { o.on_alloc(Device::cpu(), p, int64_t(n)); });
  return p;
}

void deallocate(void* ptr, size_t nbytes) {
  const size_t n = rounded_block_size(nbytes);
  counters.allocated -= int64_t(n);
  announce([&](Observer& o) { o.on_free(Device::cpu(), ptr, int64_t(n)); });
  if (n < kMinCached) return system_free(ptr, n);
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  c.recent.push_front({n, ptr});
  c.by_size[n].push_back(c.recent.begin());
  c.bytes += n;
  while (c.bytes > cache_cap()) {  // the least recently freed go back to the system
    std::vector<std::list<Block>::iterator>& same_size = c.by_size[c.recent.back().size];
    const size_t oldest = size_t(std::find(same_size.begin(), same_size.end(), std::prev(c.recent.end())) - same_size.begin());
    const size_t size = c.recent.back().size;
    system_free(take(c, same_size, oldest), size);
  }
}

size_t cache_cap() { return std::max<size_t>(kMinCap, size_t(counters.most_ever.load(std::memory_order_relaxed))); }

size_t cached_bytes() {
  std::lock_guard lock(cache().mu);
  return cache().bytes;
}

void empty_cache() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  for (const Block& b : c.recent) system_free(b.ptr, b.size);
  c.recent.clear();
  c.by_size.clear();
  c.bytes = 0;
}

MemoryStats memory_stats() {
  return {counters.allocated.load(), counters.reserved.load(), counters.peak.load(), counters.system_allocs.load(),
          counters.system_frees.load()};
}

void reset_peak_memory_stats() { counters.peak = counters.allocated.load(); }

}  // namespace ampgrad::cpu
