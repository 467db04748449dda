// softmax.cu — numerically stable softmax / log-softmax over the last dim: one block per row
// of length C (a single warp for short rows). The row max is subtracted before exp(), and sums
// run in the math type (float32 for half and float32 rows, as on the CPU). Then softmax
// cross-entropy's gradient, a thread per element (nvcc may fuse its multiply-adds, so its last
// bits may differ from the CPU's).
#include <cmath>

#include "tensor/cuda/loops.cuh"

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

template <class T>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_backward_kernel(const opmath_t<T>* logp, const int64_t* index, const bool* kept, const opmath_t<T>* coef,
                                  const opmath_t<T>* hit, const opmath_t<T>* spread, int64_t spread_step, const opmath_t<T>* scale,
                                  int64_t scale_step, T* out, int64_t N, int64_t C) {
  using W = opmath_t<T>;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N * C; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t n = i / C, c = i % C;
    if (!kept[n]) {
      out[i] = cast<T>(W(0));
      continue;
    }
    W goal = W(c == index[n] ? 1 : 0) * hit[n];      // one_hot · hit
    if (spread) goal = goal + spread[c * spread_step];  // + what smoothing spreads
    out[i] = cast<T>((std::exp(logp[i]) * coef[n] - goal) * scale[n * scale_step]);
  }
}

void launch_cross_entropy_backward(DType dtype, const void* logp, const int64_t* index, const bool* kept, const void* coef, const void* hit,
                                   const void* spread, int64_t spread_step, const void* scale, int64_t scale_step, void* out, int64_t N,
                                   int64_t C) {
  if (N * C == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using W = opmath_t<T>;
    cross_entropy_backward_kernel<T><<<grid_for(N * C), kThreads, 0, stream()>>>(
        (const W*)logp, index, kept, (const W*)coef, (const W*)hit, (const W*)spread, spread_step, (const W*)scale, scale_step, (T*)out, N, C);
    AMPGRAD_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace ampgrad::cuda
