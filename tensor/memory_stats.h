// memory_stats.h — what a device's allocator holds, in the terms of torch.cuda.memory_stats:
// the bytes live tensors hold, the bytes taken from the system (those plus the cached free
// blocks), the peak since the last reset, and how often the cache missed and called the system
// allocator (malloc on the CPU, cudaMalloc on a GPU). Sizes are as the allocator rounded them.
//
//   reset_peak_memory_stats(Device::cpu());
//   Tensor loss = model(x);  loss.backward();                  // one training step
//   memory_stats(Device::cpu()).peak_allocated_bytes;          // weights, activations, grads
//
// Nothing but the struct and two declarations: the CUDA runtime header, which nvcc compiles,
// includes it.
#pragma once
#include <cstdint>

namespace ampgrad {

struct Device;  // tensor/device.h

struct MemoryStats {
  int64_t allocated_bytes = 0;       // held by live tensors
  int64_t reserved_bytes = 0;        // taken from the system: allocated + cached
  int64_t peak_allocated_bytes = 0;  // the most allocated_bytes has been since the last reset
  int64_t num_system_allocs = 0, num_system_frees = 0;  // malloc / cudaMalloc, free / cudaFree
};

MemoryStats memory_stats(Device device);
void reset_peak_memory_stats(Device device);  // the peak starts again from what is allocated now

}  // namespace ampgrad
