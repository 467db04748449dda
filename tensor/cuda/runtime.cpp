// runtime.cpp — the CUDA backend's runtime services (runtime.h): error checks, the stream,
// device discovery, the current device (a guard, or set for good), events and the TF32 switch.
// Leaves out memory (the caching allocator, allocator.cpp) and cuBLAS (cublas.cpp).
#include "tensor/cuda/runtime.h"

#include <atomic>
#include <string>
#include <utility>

#include "tensor/device.h"
#include "tensor/error.h"

namespace ampgrad::cuda {

void check(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  // The runtime also keeps a failed call's status as "the last error"; clear it, or the next
  // launch check (cudaGetLastError) would report this failure again as its own. Sticky errors
  // (a kernel's illegal address) survive this and fail every later call, as they should.
  (void)cudaGetLastError();
  AMPGRAD_CHECK(false, "CUDA error: " << call << " failed at " << file << ":" << line << ": " << cudaGetErrorString(status)
                                      << " (" << cudaGetErrorName(status) << ")");
}

// The legacy stream, named explicitly rather than as 0, so every file means the same queue
// whether or not it was compiled with --default-stream per-thread.
cudaStream_t stream() { return cudaStreamLegacy; }

DeviceGuard::DeviceGuard(int device) : device_(device) {
  AMPGRAD_CUDA_CHECK(cudaGetDevice(&previous_));
  if (device_ != previous_) AMPGRAD_CUDA_CHECK(cudaSetDevice(device_));
}
DeviceGuard::~DeviceGuard() {
  // Cannot fail (previous_ was current a moment ago), and a destructor must not throw.
  if (device_ != previous_) (void)cudaSetDevice(previous_);
}

void set_device(int device) { AMPGRAD_CUDA_CHECK(cudaSetDevice(device)); }

Event::Event(int device) {
  DeviceGuard on(device);  // an event belongs to the device current at its creation
  AMPGRAD_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
}
Event::~Event() { (void)cudaEventDestroy(event_); }  // a destructor must not throw
void Event::record(cudaStream_t s) { AMPGRAD_CUDA_CHECK(cudaEventRecord(event_, s)); }
void Event::wait_in(cudaStream_t s) const { AMPGRAD_CUDA_CHECK(cudaStreamWaitEvent(s, event_, 0)); }
bool Event::query() const {
  const cudaError_t state = cudaEventQuery(event_);
  if (state == cudaErrorNotReady) {
    (void)cudaGetLastError();  // not an error: cleared, or the next launch check would report it
    return false;
  }
  AMPGRAD_CUDA_CHECK(state);
  return true;
}

// Asked once: the answer cannot change within a process. Without a driver or a GPU (a build
// machine) the query fails rather than answering 0; that failure means "no devices", not an
// error, and its name is kept: a driver too old for this CUDA runtime fails the same way.
static const std::pair<int, std::string>& device_query() {
  static const std::pair<int, std::string> answer = [] {
    int n = 0;
    const cudaError_t status = cudaGetDeviceCount(&n);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      return std::pair<int, std::string>{0, std::string("no CUDA device: cudaGetDeviceCount: ") + cudaGetErrorName(status) + " (" +
                                                cudaGetErrorString(status) + ")"};
    }
    return std::pair<int, std::string>{n, n == 0 ? "no CUDA device on this machine" : ""};
  }();
  return answer;
}
int device_count() { return device_query().first; }
bool is_available() { return device_count() > 0; }
std::string unavailable_reason() { return device_query().second; }
std::string device_name(int device) {
  AMPGRAD_CHECK(device >= 0 && device < device_count(), "cuda::device_name(" << device << "): this machine has " << device_count() << " CUDA device(s)"
                                                            << (is_available() ? "" : ": " + unavailable_reason()));
  cudaDeviceProp prop;
  AMPGRAD_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

// A process-wide switch, as torch.backends.cuda.matmul.allow_tf32 is; atomic so any thread may flip it.
static std::atomic<bool> allow_tf32{false};
void set_matmul_allow_tf32(bool allow) { allow_tf32.store(allow); }
bool matmul_allow_tf32() { return allow_tf32.load(); }

}  // namespace ampgrad::cuda
