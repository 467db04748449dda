// kernels.cpp — device dispatch: each primitive of tensor/primitives.inc is checked here once for
// every backend (check_<name>), then runs on the device its tensors share, announced to the
// observer under its name: the dispatch itself is generated, at the end. The only place that
// knows which backends exist.
#include <algorithm>
#include <vector>

#include "tensor/backends.h"
#include "tensor/cpu/loops.h"  // broadcast_shapes: geometry, shared by every backend
#include "tensor/observer.h"
#ifdef AMPGRAD_WITH_CUDA
#include "tensor/cuda/runtime.h"  // DeviceGuard
#endif

namespace ampgrad::kernels {

// Each primitive's checks, run before any backend sees the call: check_gemm(a, b, out_dtype), ...
// (tensor/kernel_checks.cpp).
#define PRIMITIVE(Result, name, params, args) void check_##name params;
#include "tensor/primitives.inc"

// The device all (defined) tensors share; an error naming the op otherwise. A storage-only
// tensor (dtype.h) is refused here too, naming the op, unless the primitive converts into or
// out of one (storage_ok: copy_ and fill_).
static Device common_device(const char* op, const std::vector<const Tensor*>& ts, bool storage_ok = false) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    AMPGRAD_CHECK(storage_ok || !is_storage_only(t->dtype()), op << ": not defined for dtype " << dtype_name(t->dtype()) << " ("
                                                                  << storage_only_note(t->dtype()) << "; convert with .to(kFloat32) first)");
    if (!first) first = t;
    AMPGRAD_CHECK(t->device() == first->device(), op << ": expected all tensors on one device, got "
                                                     << first->device().str() << " and " << t->device().str());
  }
  AMPGRAD_CHECK(first, op << ": no tensor given");
#ifndef AMPGRAD_WITH_CUDA
  AMPGRAD_CHECK(first->device().is_cpu(), op << ": tensor is on " << first->device().str()
                                             << " but ampgrad was built without the CUDA backend");
#endif
  return first->device();
}

// Runs a primitive on device d: cpu_call, or cuda_call where d is a GPU, announced under the
// kernel's name (tensor/observer.h). A CUDA call runs with its tensors' GPU current: kernels
// launch, scratch memory is taken and a listener waits where the tensors live (cuda:1 with
// cuda:0 current would be an illegal address). Built without CUDA, cuda_call is never run, so
// the cuda:: primitives it names are declared (backends.h) but need no definition.
template <class CpuCall, class CudaCall>
static auto on_device(const char* kernel, Device d, CpuCall cpu_call, [[maybe_unused]] CudaCall cuda_call) {
#ifdef AMPGRAD_WITH_CUDA
  if (d.is_cuda()) {
    cuda::DeviceGuard guard(d.index);
    KernelCall call(kernel, d);
    return cuda_call();
  }
#endif
  KernelCall call(kernel, d);
  return cpu_call();
}
// The device of the tensors among a primitive's arguments.
template <class... Args> static Device device_of(const char* op, const Args&... args) {
  std::vector<const Tensor*> ts;
  const auto add = [&](const auto& a) { if constexpr (std::is_same_v<std::decay_t<decltype(a)>, Tensor>) ts.push_back(&a); };
  (add(args), ...);
  return common_device(op, ts);
}
// The name a call is announced under and its errors carry: an elementwise primitive's op (exp,
// add), else the primitive's own.
template <class... Args> static const char* kernel_name(const char* primitive, const Args&...) { return primitive; }
template <class... Args> static const char* kernel_name(const char*, Unary k, const Args&...) { return unary_name(k); }
template <class... Args> static const char* kernel_name(const char*, Binary k, const Args&...) { return binary_name(k); }

void fill_(const Tensor& dst, double v) {
  check_fill_(dst, v);
  on_device("fill_", common_device("fill_", {&dst}, /*storage_ok=*/true), [&] { return cpu::fill_(dst, v); }, [&] { return cuda::fill_(dst, v); });
}

// Copies are the one primitive that may cross devices: the CUDA backend handles any copy
// with a CUDA side (including host <-> device), the CPU backend the rest.
void copy_(const Tensor& dst, const Tensor& src) {
  check_copy_(dst, src);
#ifdef AMPGRAD_WITH_CUDA
  if (dst.device().is_cuda() || src.device().is_cuda()) {
    const Device gpu = dst.device().is_cuda() ? dst.device() : src.device();
    cuda::DeviceGuard guard(gpu.index);
    KernelCall call("copy_", gpu);
    return cuda::copy_(dst, src);
  }
#endif
  common_device("copy_", {&dst, &src}, /*storage_ok=*/true);
  KernelCall call("copy_", dst.device());
  cpu::copy_(dst, src);
}

// ---- the dispatch of every PRIMITIVE line, generated: its checks, then its backend on the device
// its tensors share, announced to listeners as the call of kernel_name
#define PRIMITIVE(Result, name, params, args)                                                                  \
  Result name params {                                                                                         \
    check_##name args;                                                                                         \
    const char* kernel = kernel_name(#name, AMPGRAD_ARGS args);                                                \
    return on_device(kernel, device_of(kernel, AMPGRAD_ARGS args), [&] { return cpu::name args; }, [&] { return cuda::name args; }); \
  }
#define PRIMITIVE_BY_HAND(Result, name, params, args)  // copy_ and fill_, above
#include "tensor/primitives.inc"

}  // namespace ampgrad::kernels
