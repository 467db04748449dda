// softmax.cu — numerically stable softmax / log-softmax over the last dim: one block per row
// of length C (a single warp for short rows). The row max is subtracted before exp(), and sums
// run in the math type (float32 for half and float32 rows, as on the CPU). Then softmax
// cross-entropy's gradient, scalar_math.h's cross_entropy_grad per element (its roundings
// pinned, so it should give the CPU's bits but where CUDA's exp differs from the C library's).
#include <cmath>

#include "tensor/cuda/loops.cuh"
#include "tensor/scalar_math.h"

namespace ampgrad::cuda {

// std::max's rule, as the CPU uses it: a NaN element never becomes the max (its exp() is NaN
// anyway, which makes the whole row NaN on both backends).
struct Max {
  template <class A> __device__ A operator()(A a, A b) const { return a < b ? b : a; }
};

template <class T>
__global__ void __launch_bounds__(kMaxRowThreads) softmax_kernel(const T* x, T* out, int64_t rows, int64_t C, bool log) {
  using A = opmath_t<T>;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * C;
    T* out_row = out + r * C;
    A mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) mx = Max{}(mx, load(row[j]));
    mx = block_reduce(mx, Max{});
    if (mx == A(-INFINITY)) mx = 0;  // an all -inf row: keep exp(-inf - 0) = 0, not NaN
    A s = 0;
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) s += std::exp(load(row[j]) - mx);
    s = block_reduce(s, Plus{});
    if (log) {
      const A lse = mx + std::log(s);
      for (int64_t j = threadIdx.x; j < C; j += blockDim.x) out_row[j] = cast<T>(load(row[j]) - lse);
    } else {
      for (int64_t j = threadIdx.x; j < C; j += blockDim.x) out_row[j] = cast<T>(std::exp(load(row[j]) - mx) / s);
    }
  }
}

void launch_softmax_rows(DType dtype, const void* x, void* out, int64_t rows, int64_t C, bool log) {
  if (rows == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmax_kernel<T><<<grid_for(rows, 1), threads_for_row(C), 0, stream()>>>((const T*)x, (T*)out, rows, C, log);
    AMPGRAD_CUDA_CHECK(cudaGetLastError());
  });
}

// A block per row, as softmax's: the row's target, coefficients and scale read once.
template <class T>
__global__ void __launch_bounds__(kMaxRowThreads)
    cross_entropy_backward_kernel(const opmath_t<T>* logp, const int64_t* index, const bool* kept, const opmath_t<T>* coef,
                                  const opmath_t<T>* hit, const opmath_t<T>* spread, int64_t spread_step, const opmath_t<T>* scale,
                                  int64_t scale_step, T* out, int64_t N, int64_t C) {
  using W = opmath_t<T>;
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const bool keep = kept[n];
    const int64_t target = index[n];
    const W a = coef[n], h = hit[n], s = scale[n * scale_step];
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      out[n * C + c] = keep ? cast<T>(math::cross_entropy_grad(logp[n * C + c], c == target, a, h, spread ? spread + c * spread_step : nullptr, s))
                            : cast<T>(W(0));
  }
}

void launch_cross_entropy_backward(DType dtype, const void* logp, const int64_t* index, const bool* kept, const void* coef, const void* hit,
                                   const void* spread, int64_t spread_step, const void* scale, int64_t scale_step, void* out, int64_t N,
                                   int64_t C) {
  if (N * C == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using W = opmath_t<T>;
    cross_entropy_backward_kernel<T><<<grid_for(N, 1), threads_for_row(C), 0, stream()>>>(
        (const W*)logp, index, kept, (const W*)coef, (const W*)hit, (const W*)spread, spread_step, (const W*)scale, scale_step, (T*)out, N, C);
    AMPGRAD_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace ampgrad::cuda
