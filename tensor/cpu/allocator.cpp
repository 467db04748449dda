// allocator.cpp — per-size free lists behind a mutex. A block's size is rounded to 64 bytes;
// the cache holds at most kMaxCached bytes and frees beyond that.
#include "tensor/cpu/allocator.h"

#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tensor/error.h"

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
}  // namespace

void* allocate(size_t nbytes) {
  const size_t n = rounded(nbytes);
  if (n >= kMinCached) {
    Cache& c = cache();
    std::lock_guard lock(c.mu);
    auto it = c.free.find(n);
    if (it != c.free.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.bytes -= n;
      return p;
    }
  }
  void* p = std::aligned_alloc(64, n);
  AMPGRAD_CHECK(p, "out of memory allocating " << nbytes << " bytes on the CPU");
  return p;
}

void deallocate(void* ptr, size_t nbytes) {
  const size_t n = rounded(nbytes);
  if (n >= kMinCached) {
    Cache& c = cache();
    std::lock_guard lock(c.mu);
    if (c.bytes + n <= kMaxCached) {
      c.free[n].push_back(ptr);
      c.bytes += n;
      return;
    }
  }
  std::free(ptr);
}

size_t cached_bytes() {
  std::lock_guard lock(cache().mu);
  return cache().bytes;
}

void empty_cache() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  for (auto& [n, blocks] : c.free)
    for (void* p : blocks) std::free(p);
  c.free.clear();
  c.bytes = 0;
}

}  // namespace ampgrad::cpu
