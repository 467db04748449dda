// allocator.cpp — the caching allocator behind cuda::allocate / deallocate (runtime.h).
// cudaMalloc and cudaFree are slow and cudaFree waits for the whole device, so freed blocks are
// kept in per-device free lists keyed by their rounded size, and a training step's steady state
// reuses them without calling CUDA at all. Leaves out what PyTorch's allocator adds: splitting
// and merging blocks, per-stream pools and events (one stream, runtime.h), memory fractions.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "tensor/cuda/runtime.h"
#include "tensor/device.h"
#include "tensor/error.h"
#include "tensor/observer.h"

namespace ampgrad::cuda {

// Small blocks round to 512 B; from 1 MiB up, to an eighth of the size's power of two (1 MiB
// stays 1 MiB, 3 MiB + 1 becomes 3.25 MiB), so tensors of nearby sizes (a batch of a different
// length, say) share a free list and at most 1/8 is wasted, as PyTorch's allocator does with
// roundup_power2_divisions = 8. (A flat 2 MiB granule, before, gave a 1 MiB tensor 2 MiB; above
// 16 MiB the steps are coarser than it was, and no block is split, so a 65 MiB tensor takes 72.)
// A size no device could hold is kept as it is, for cudaMalloc to refuse.
size_t rounded_block_size(size_t nbytes) {
  constexpr size_t kSmallLimit = size_t(1) << 20, kSmallGranule = 512, kDivisions = 8;
  if (nbytes > SIZE_MAX / 2) return nbytes;
  if (nbytes < kSmallLimit) return (nbytes + kSmallGranule - 1) / kSmallGranule * kSmallGranule;
  size_t power = kSmallLimit;
  while (power <= nbytes / 2) power *= 2;
  const size_t step = power / kDivisions;
  return (nbytes + step - 1) / step * step;
}

namespace {

struct DeviceCache {
  std::multimap<size_t, void*> free_blocks;     // rounded size -> a cached block of exactly that size
  std::unordered_map<void*, size_t> live_size;  // every block a tensor holds -> its rounded size
  MemoryStats stats;
};

// One lock for all devices: an allocation is a map lookup, so contention is not worth more.
std::mutex cache_mutex;
// Leaked on purpose: tensors in static storage may be freed after this map's destructor would
// have run, and at exit the driver may already be gone, so nothing is returned to it then.
std::map<int, DeviceCache>& caches() {
  static auto* all = new std::map<int, DeviceCache>;
  return *all;
}

std::string mib(int64_t bytes) {
  std::ostringstream os;
  os.precision(1);
  os << std::fixed << double(bytes) / (1 << 20) << " MiB";
  return os.str();
}

// Returns one block to the driver. cudaFree waits for the device first, so a block whose last
// kernel is still running is not pulled from under it. Lock held.
cudaError_t cuda_free(void* ptr, size_t size, DeviceCache& cache) {
  cache.stats.reserved_bytes -= int64_t(size);
  ++cache.stats.num_system_frees;
  return cudaFree(ptr);
}

// Returns every cached block of `device` to the driver, each leaving the list before its
// cudaFree: after a failing one, no block is left listed to be freed twice. Lock held.
void release_cached(int device, DeviceCache& cache) {
  DeviceGuard guard(device);
  while (!cache.free_blocks.empty()) {
    const auto [size, ptr] = *cache.free_blocks.begin();
    cache.free_blocks.erase(cache.free_blocks.begin());
    AMPGRAD_CUDA_CHECK(cuda_free(ptr, size, cache));
  }
}

// A new block from the driver. On out-of-memory the cache is emptied and the call retried once:
// cached blocks of other sizes may be exactly what stands in the way. Lock held.
void* cuda_malloc(int device, size_t size, DeviceCache& cache) {
  DeviceGuard guard(device);
  void* ptr = nullptr;
  cudaError_t status = cudaMalloc(&ptr, size);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // handled here: keep it from being reported by the next launch check
    release_cached(device, cache);
    status = cudaMalloc(&ptr, size);
  }
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    const MemoryStats& s = cache.stats;
    AMPGRAD_CHECK(false, "CUDA out of memory on cuda:" << device << ": tried to allocate " << mib(int64_t(size)) << " (" << size
                                                       << " bytes, rounded); " << mib(s.allocated_bytes) << " allocated by tensors, "
                                                       << mib(s.reserved_bytes) << " reserved, peak " << mib(s.peak_allocated_bytes));
  }
  check(status, "cudaMalloc", __FILE__, __LINE__);
  cache.stats.reserved_bytes += int64_t(size);
  ++cache.stats.num_system_allocs;
  return ptr;
}

}  // namespace

bool memory_caching_enabled() { return std::getenv("AMPGRAD_NO_CUDA_MEMORY_CACHING") == nullptr; }

// Reuse is safe without events because all work is ordered on one stream (stream()): a block
// freed here while a queued kernel still reads it goes to a tensor whose kernels are queued
// after that one, so they cannot overtake it.
void* allocate(size_t nbytes, int device) {
  if (nbytes == 0) return nullptr;  // an empty tensor owns no memory
  AMPGRAD_CHECK(device >= 0 && device < device_count(), "cannot allocate on cuda:" << device << ": this machine has " << device_count()
                                                                                   << " CUDA device(s) (is_available(): " << std::boolalpha
                                                                                   << is_available() << ")");
  const size_t size = memory_caching_enabled() ? rounded_block_size(nbytes) : nbytes;
  std::lock_guard lock(cache_mutex);
  DeviceCache& cache = caches()[device];
  void* ptr = nullptr;
  if (auto it = cache.free_blocks.find(size); it != cache.free_blocks.end()) {
    ptr = it->second;
    cache.free_blocks.erase(it);
  } else {
    ptr = cuda_malloc(device, size, cache);
  }
  cache.live_size.emplace(ptr, size);
  MemoryStats& s = cache.stats;
  s.allocated_bytes += int64_t(size);
  s.peak_allocated_bytes = std::max(s.peak_allocated_bytes, s.allocated_bytes);
  announce([&](Observer& o) { o.on_alloc(Device::cuda(device), ptr, int64_t(size)); });
  return ptr;
}

// Called from Storage's destructor, so an unknown pointer (a bug, not a user error) ends the
// process with this message rather than unwinding.
void deallocate(void* ptr, int device) {
  if (!ptr) return;
  std::lock_guard lock(cache_mutex);
  DeviceCache& cache = caches()[device];
  auto it = cache.live_size.find(ptr);
  AMPGRAD_CHECK(it != cache.live_size.end(), "cuda::deallocate: " << ptr << " is not a live block of cuda:" << device);
  const size_t size = it->second;
  cache.stats.allocated_bytes -= int64_t(size);
  cache.live_size.erase(it);
  announce([&](Observer& o) { o.on_free(Device::cuda(device), ptr, int64_t(size)); });
  if (memory_caching_enabled() && size == rounded_block_size(size)) {  // a block made uncached is not kept
    cache.free_blocks.emplace(size, ptr);
    return;
  }
  // Called from destructors: a failure (the sticky error of an earlier bad kernel) is reported,
  // not thrown, so the process can go on to say what went wrong.
  DeviceGuard guard(device);
  if (cudaError_t status = cuda_free(ptr, size, cache); status != cudaSuccess)
    std::fprintf(stderr, "ampgrad: cudaFree of a released block failed: %s\n", cudaGetErrorString(status));
}

MemoryStats memory_stats(int device) {
  std::lock_guard lock(cache_mutex);
  auto it = caches().find(device);
  return it == caches().end() ? MemoryStats{} : it->second.stats;
}

void reset_peak_memory_stats(int device) {
  std::lock_guard lock(cache_mutex);
  MemoryStats& s = caches()[device].stats;
  s.peak_allocated_bytes = s.allocated_bytes;
}

void empty_cache() {
  std::lock_guard lock(cache_mutex);
  for (auto& [device, cache] : caches()) release_cached(device, cache);
}

}  // namespace ampgrad::cuda
