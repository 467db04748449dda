// layer_norm.cu — layer norm over rows of D, one block per row (a single warp for short rows),
// as softmax.cu: the row's mean, then its variance about the mean, each a block reduction in the
// math type (float32 for half rows, as on the CPU); the backward's two row means likewise.
// Kernels first, then their launchers.
#include <cmath>

#include "tensor/cuda/loops.cuh"

namespace ampgrad::cuda {

template <class T>
__global__ void __launch_bounds__(kMaxRowThreads)
    layer_norm_kernel(const T* x, const opmath_t<T>* w, const opmath_t<T>* b, T* y, opmath_t<T>* mean, opmath_t<T>* rstd,
                      int64_t R, int64_t D, opmath_t<T> eps) {
  using A = opmath_t<T>;
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const T* row = x + r * D;
    A s = 0;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) s += load(row[j]);
    const A m = block_reduce(s, Plus{}) / A(D);
    A v = 0;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) v += (load(row[j]) - m) * (load(row[j]) - m);
    const A rs = A(1) / std::sqrt(block_reduce(v, Plus{}) / A(D) + eps);  // the biased variance
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
      A out = (load(row[j]) - m) * rs;
      if (w) out = out * w[j];
      if (b) out = out + b[j];
      y[r * D + j] = cast<T>(out);
    }
    if (threadIdx.x == 0) {
      mean[r] = m;
      rstd[r] = rs;
    }
  }
}

// dx = rstd · (ĝ − mean(ĝ) − x̂ · mean(ĝ x̂)), x̂ = (x − mean)·rstd, ĝ = g·weight
template <class T>
__global__ void __launch_bounds__(kMaxRowThreads)
    layer_norm_backward_kernel(const T* g, const T* x, const opmath_t<T>* mean, const opmath_t<T>* rstd, const opmath_t<T>* w,
                               T* dx, int64_t R, int64_t D) {
  using A = opmath_t<T>;
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const T *gr = g + r * D, *xr = x + r * D;
    const A m = mean[r], rs = rstd[r];
    auto x_hat = [&](int64_t j) { return (load(xr[j]) - m) * rs; };
    auto g_hat = [&](int64_t j) { return w ? load(gr[j]) * w[j] : load(gr[j]); };
    A sg = 0, sgx = 0;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
      sg += g_hat(j);
      sgx += g_hat(j) * x_hat(j);
    }
    const A mean_g = block_reduce(sg, Plus{}) / A(D);
    const A mean_gx = block_reduce(sgx, Plus{}) / A(D);
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) dx[r * D + j] = cast<T>(rs * (g_hat(j) - mean_g - x_hat(j) * mean_gx));
  }
}

void launch_layer_norm(DType dtype, const void* x, const void* w, const void* b, void* y, void* mean, void* rstd, int64_t R, int64_t D,
                       double eps) {
  if (R == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    layer_norm_kernel<T><<<grid_for(R, 1), threads_for_row(D), 0, stream()>>>((const T*)x, (const A*)w, (const A*)b, (T*)y, (A*)mean,
                                                                              (A*)rstd, R, D, A(eps));
    AMPGRAD_CUDA_CHECK(cudaGetLastError());
  });
}

void launch_layer_norm_backward(DType dtype, const void* g, const void* x, const void* mean, const void* rstd, const void* w, void* dx,
                                int64_t R, int64_t D) {
  if (R == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    layer_norm_backward_kernel<T><<<grid_for(R, 1), threads_for_row(D), 0, stream()>>>((const T*)g, (const T*)x, (const A*)mean,
                                                                                       (const A*)rstd, (const A*)w, (T*)dx, R, D);
    AMPGRAD_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace ampgrad::cuda
