// memory_stats.cpp — the device-generic entry points, handing over to each backend's allocator.
#include "tensor/memory_stats.h"

#include "tensor/cpu/allocator.h"
#include "tensor/device.h"
#include "tensor/error.h"
#ifdef AMPGRAD_WITH_CUDA
#include "tensor/cuda/runtime.h"
#endif

namespace ampgrad {

MemoryStats memory_stats(Device device) {
#ifdef AMPGRAD_WITH_CUDA
  if (device.is_cuda()) return cuda::memory_stats(device.index);
#endif
  AMPGRAD_CHECK(device.is_cpu(), "memory_stats: " << device.str() << " without the CUDA backend");
  return cpu::memory_stats();
}

void reset_peak_memory_stats(Device device) {
#ifdef AMPGRAD_WITH_CUDA
  if (device.is_cuda()) return cuda::reset_peak_memory_stats(device.index);
#endif
  AMPGRAD_CHECK(device.is_cpu(), "reset_peak_memory_stats: " << device.str() << " without the CUDA backend");
  cpu::reset_peak_memory_stats();
}

}  // namespace ampgrad
