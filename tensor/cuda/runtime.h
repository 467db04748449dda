// runtime.h — the CUDA backend's runtime services, shared by its C++ (.cpp, g++) and kernel
// (.cu, nvcc) files: error checking, the stream every launch uses, the current device, events
// that order two devices' streams, and device memory from the caching allocator. No Eigen, no
// Tensor: nvcc compiles this.
//
//   AMPGRAD_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, cuda::stream()));
//   my_kernel<<<blocks, threads, 0, cuda::stream()>>>(...);
//   AMPGRAD_CUDA_CHECK(cudaGetLastError());   // every launch is checked
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "tensor/memory_stats.h"

namespace ampgrad::cuda {

// Raises ampgrad::Error naming the call, file and line and CUDA's message.
void check(cudaError_t status, const char* call, const char* file, int line);
#define AMPGRAD_CUDA_CHECK(call) ::ampgrad::cuda::check((call), #call, __FILE__, __LINE__)

// The stream every kernel, copy and cuBLAS call is ordered on: the legacy default stream, one
// queue per device shared by all host threads. That single order is what lets the caching
// allocator hand a freed block to the next tensor at once, with no event to wait on.
cudaStream_t stream();

// Makes `device` current for its scope: cudaMalloc, cuBLAS handles and launches act on the
// current device. Restores the previous one on exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0, device_ = 0;
};

// Makes `device` current for the calling thread from here on (torch.cuda.set_device), for a
// process that drives one GPU, a data-parallel rank: every guard then restores it, not device 0,
// whose context (since CUDA 12 opened by making it current) would cost each rank GPU 0's memory.
void set_device(int device);

// A point in one device's stream that streams of any device can wait for; released when it goes
// out of scope, also when an error passes (the driver frees it once the marked work is done).
//
//   Event ready(d);  ready.record(stream());        // with d current: d's work queued so far
//   ready.wait_in(stream());                         // with another device current: its later work waits
class Event {
 public:
  explicit Event(int device);  // timing off: only an order
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(cudaStream_t s);          // s is a stream of the event's device
  void wait_in(cudaStream_t s) const;   // work queued on s from now on runs after the recorded point
  bool query() const;                   // the recorded work has completed

 private:
  cudaEvent_t event_ = nullptr;
};

// Device memory through the caching allocator (allocator.cpp): sizes are rounded up and freed
// blocks are kept in per-size free lists, so a training step's steady state calls cudaMalloc
// never. Storage (tensor/tensor.cpp) allocates and frees CUDA bytes through these two.
void* allocate(size_t nbytes, int device);
void deallocate(void* ptr, int device);
size_t rounded_block_size(size_t nbytes);  // what allocate takes for nbytes while caching
// False while AMPGRAD_NO_CUDA_MEMORY_CACHING is set, to any value (as PyTorch's
// PYTORCH_NO_CUDA_MEMORY_CACHING): then every block is cudaMalloc'd at its exact size and
// cudaFree'd when released, so compute-sanitizer sees an access past a tensor's end or after its
// release. Read at every call, so it can be switched at run time (blocks cached before stay).
bool memory_caching_enabled();

// A launcher's scratch buffer of n T's, back to the cache when the launcher leaves, by return or
// by a failed launch check. Giving it back before its kernels have run is safe: only later work
// on the same stream can receive it, and that runs after them.
template <class T> struct Scratch {
  T* ptr;
  int device;
  Scratch(int64_t n, int device) : ptr(static_cast<T*>(allocate(size_t(n) * sizeof(T), device))), device(device) {}
  ~Scratch() { deallocate(ptr, device); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

MemoryStats memory_stats(int device = 0);
void reset_peak_memory_stats(int device = 0);
void empty_cache();  // returns every cached free block to the driver

// torch.backends.cuda.matmul.allow_tf32: float32 GEMMs may use TF32 tensor cores. Off by default.
void set_matmul_allow_tf32(bool allow);
bool matmul_allow_tf32();

}  // namespace ampgrad::cuda
