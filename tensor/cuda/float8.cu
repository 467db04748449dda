// float8.cu — to_float8's two passes on the GPU (tensor/cpu/float8.cpp's twins): the largest
// magnitude, a grid-stride loop and a block reduction ending in one atomicMax a block, and the
// scaled, saturating cast, which reads the scale where abs_max left it. The per-element rules
// are tensor/float8.h's.
#include "tensor/cuda/loops.cuh"

namespace ampgrad::cuda {
namespace {

struct MaxBits {
  __device__ uint32_t operator()(uint32_t a, uint32_t b) const { return a > b ? a : b; }
};

// *out (zeroed first) becomes the largest abs_bits over x: an integer max, so the blocks' atomics
// may land in any order.
template <class T> __global__ void __launch_bounds__(kThreads) abs_max_kernel(const T* x, int64_t n, unsigned int* out) {
  uint32_t m = 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    m = MaxBits{}(m, abs_bits(static_cast<float>(load(x[i]))));
  m = block_reduce(m, MaxBits{});
  if (threadIdx.x == 0) atomicMax(out, m);
}

template <class T, class F8> __global__ void __launch_bounds__(kThreads) scale_to_float8_kernel(const T* x, const float* scale, F8* out, int64_t n) {
  const float s = *scale;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = ampgrad::scale_to_float8<F8>(static_cast<float>(load(x[i])), s);
}
}  // namespace

void launch_abs_max(DType dtype, const void* x, int64_t n, float* out) {
  AMPGRAD_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(float), stream()));  // +0.0: the max of no elements
  if (n == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool> && !std::is_same_v<T, int64_t>) {
      abs_max_kernel<T><<<grid_for(n), kThreads, 0, stream()>>>((const T*)x, n, reinterpret_cast<unsigned int*>(out));
      AMPGRAD_CUDA_CHECK(cudaGetLastError());
    }
  });
}

void launch_scale_to_float8(DType dtype, DType float8_dtype, const void* x, const float* scale, void* out, int64_t n) {
  if (n == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool> && !std::is_same_v<T, int64_t>) {
      auto run = [&](auto* o) {
        scale_to_float8_kernel<<<grid_for(n), kThreads, 0, stream()>>>((const T*)x, scale, o, n);
        AMPGRAD_CUDA_CHECK(cudaGetLastError());
      };
      if (float8_dtype == DType::Float8_e4m3fn) run((float8_e4m3fn*)out);
      else run((float8_e5m2*)out);
    }
  });
}

}  // namespace ampgrad::cuda
