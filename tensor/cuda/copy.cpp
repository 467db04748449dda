// copy.cpp — copy_ whenever a side is on the GPU: host <-> device, device <-> device (also between
// two GPUs, peer to peer), with dtype casts, strides and broadcasting of src into dst. Bytes cross
// the bus as they are (one contiguous block of src's dtype); any cast or scatter then runs where
// the destination lives: the device kernel of copy.cu, or the CPU's copy_ for a host destination.
#include "tensor/cuda/loops.h"
#include "tensor/cuda/runtime.h"

namespace ampgrad::cuda {

// dst can take src's bytes verbatim: same dtype, same shape, both dense.
static bool bytes_match(const Tensor& dst, const Tensor& src) {
  return dst.dtype() == src.dtype() && dst.shape() == src.shape() && dst.is_contiguous() && src.is_contiguous();
}

static size_t nbytes(const Tensor& t) { return t.numel() * t.element_size(); }

void copy_(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;  // shapes checked in tensor/kernels.cpp

  if (dst.device().is_cuda() && src.device().is_cuda() && dst.device() != src.device()) {  // GPU -> another GPU
    // Each device has its own stream; two events order them both ways, and the host never waits:
    // the copy starts after src's queued work (its bytes final), and src's later work (an in-place
    // write, or its block, or the temporary's, handed out again by the cache) after the copy's read.
    DeviceGuard on_src(src.device().index);
    const Tensor from = contiguous(src);
    Event src_ready(src.device().index), copied(dst.device().index);
    src_ready.record(stream());
    {
      DeviceGuard on_dst(dst.device().index);
      Tensor landed = bytes_match(dst, from) ? dst : empty_on(dst, from.shape(), from.dtype());
      src_ready.wait_in(stream());
      AMPGRAD_CUDA_CHECK(cudaMemcpyPeerAsync(landed.raw_data(), dst.device().index, from.raw_data(), src.device().index, nbytes(from), stream()));
      copied.record(stream());
      if (!landed.is_same(dst)) cuda::copy_(dst, landed);
    }
    copied.wait_in(stream());  // src's stream
    return;
  }
  if (dst.device().is_cuda() && src.device().is_cuda()) {
    if (bytes_match(dst, src)) {
      if (dst.raw_data() == src.raw_data()) return;  // x.copy_(x): memcpy's ranges may not overlap
      AMPGRAD_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), nbytes(src), cudaMemcpyDeviceToDevice, stream()));
    } else
      launch_copy(dst.dtype(), src.dtype(), make_loop<2>("copy_", dst.shape(), {&dst, &src}));
    return;
  }

  if (src.device().is_cpu()) {  // host -> device
    Tensor host = src;
    if (!src.is_contiguous()) {
      host = empty(src.shape(), src.dtype());
      cpu::copy_(host, src);
    }
    Tensor dev = bytes_match(dst, host) ? dst : empty_on(dst, src.shape(), src.dtype());
    // No sync of ours: from pageable memory (all CPU storage is) the call returns once the driver
    // has staged the bytes, so `host` may be freed right after. (To stage them the driver may
    // wait for the stream's earlier work: the one possible implicit sync of this copy.)
    AMPGRAD_CUDA_CHECK(cudaMemcpyAsync(dev.raw_data(), host.raw_data(), nbytes(host), cudaMemcpyHostToDevice, stream()));
    if (!dev.is_same(dst)) cuda::copy_(dst, dev);
    return;
  }

  // device -> host
  Tensor dev = contiguous(src);
  Tensor host = bytes_match(dst, dev) ? dst : empty(src.shape(), src.dtype());
  AMPGRAD_CUDA_CHECK(cudaMemcpyAsync(host.raw_data(), dev.raw_data(), nbytes(dev), cudaMemcpyDeviceToHost, stream()));
  // Sync: the host reads these bytes next (the caller, or the CPU copy below), so they must have landed.
  AMPGRAD_CUDA_CHECK(cudaStreamSynchronize(stream()));
  if (!host.is_same(dst)) cpu::copy_(dst, host);
}

}  // namespace ampgrad::cuda
