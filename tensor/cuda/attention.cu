// attention.cu — scaled dot-product attention's softmax over rows of scores, the causal mask
// applied inside it (query i reads keys 0..i, the rest of its row written as zeros), and its
// backward: one block per row, as softmax.cu's. The GEMMs around it are cuBLAS's (matmul.cpp).
// Letters: L queries, S keys; a row is one query's S scores, in A (float32, float64 for float64).
#include <cmath>

#include "tensor/cuda/loops.cuh"

namespace ampgrad::cuda {
namespace {
struct RowMax {  // std::max's rule, as the CPU's: a NaN never becomes the max (its exp() is NaN anyway)
  template <class A> __device__ A operator()(A a, A b) const { return a < b ? b : a; }
};
// The keys row r's query sees: 0..i where causal (top-left aligned, PyTorch's tril(ones(L, S))), else all S.
__device__ inline int64_t seen(int64_t r, int64_t L, int64_t S, bool causal) { return causal && r % L + 1 < S ? r % L + 1 : S; }
}  // namespace

template <class T>
__global__ void __launch_bounds__(kMaxRowThreads)
    attention_softmax_kernel(const opmath_t<T>* s, T* p, int64_t rows, int64_t L, int64_t S, opmath_t<T> scale, bool causal) {
  using A = opmath_t<T>;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const A* x = s + r * S;
    const int64_t n = seen(r, L, S, causal);
    A mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) mx = RowMax{}(mx, scale * x[j]);
    mx = block_reduce(mx, RowMax{});
    if (mx == A(-INFINITY)) mx = 0;  // an all -inf row: exp(-inf - 0) = 0, and the row 0/0 = NaN, as the CPU's
    A sum = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += std::exp(scale * x[j] - mx);
    sum = block_reduce(sum, Plus{});
    for (int64_t j = threadIdx.x; j < S; j += blockDim.x) p[r * S + j] = cast<T>(j < n ? std::exp(scale * x[j] - mx) / sum : A(0));
  }
}

template <class T>
__global__ void __launch_bounds__(kMaxRowThreads)
    attention_softmax_backward_kernel(const T* p, const opmath_t<T>* dp, T* ds, int64_t rows, int64_t L, int64_t S, opmath_t<T> scale, bool causal) {
  using A = opmath_t<T>;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t n = seen(r, L, S, causal), o = r * S;
    A dot = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dot += load(p[o + j]) * dp[o + j];
    dot = block_reduce(dot, Plus{});
    for (int64_t j = threadIdx.x; j < S; j += blockDim.x) ds[o + j] = cast<T>(j < n ? scale * load(p[o + j]) * (dp[o + j] - dot) : A(0));
  }
}

void launch_attention_softmax(DType dtype, const void* s, void* p, int64_t B, int64_t L, int64_t S, double scale, bool causal) {
  if (B * L * S == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    attention_softmax_kernel<T><<<grid_for(B * L, 1), threads_for_row(S), 0, stream()>>>((const A*)s, (T*)p, B * L, L, S, A(scale), causal);
    AMPGRAD_CUDA_CHECK(cudaGetLastError());
  });
}

void launch_attention_softmax_backward(DType dtype, const void* p, const void* dp, void* ds, int64_t B, int64_t L, int64_t S, double scale,
                                       bool causal) {
  if (B * L * S == 0) return;
  dispatch_floating(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    attention_softmax_backward_kernel<T><<<grid_for(B * L, 1), threads_for_row(S), 0, stream()>>>((const T*)p, (const A*)dp, (T*)ds, B * L, L,
                                                                                                   S, A(scale), causal);
    AMPGRAD_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace ampgrad::cuda
