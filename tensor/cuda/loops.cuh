// loops.cuh — the CUDA backend's two loop shapes: a grid-stride loop over the elements of a
// Loop<N> (every elementwise kernel, the twin of tensor/cpu/loops.h's for_each_run), and a block
// reduction (sums, max, softmax). Where an element sits is indexing.h's business. Kernels first,
// then launchers.
//
//   map_into<float, __half>(loop, Identity{});   // loop = make_loop<2>(...) on the C++ side
#pragma once
#include <algorithm>
#include <cstdint>

#include "tensor/cuda/dispatch.cuh"
#include "tensor/cuda/indexing.h"

namespace ampgrad::cuda {

inline constexpr int kThreads = 256;            // block size of the elementwise kernels
inline constexpr int kMaxRowThreads = 512;      // most threads a block-per-row kernel gives a row
inline constexpr int64_t kMaxBlocks = 1 << 16;  // beyond this a grid-stride loop takes over

// Blocks for a grid-stride loop over n items, `per_block` items per block per step.
inline unsigned grid_for(int64_t n, int64_t per_block = kThreads) {
  return (unsigned)std::min((n + per_block - 1) / per_block, kMaxBlocks);
}

// f(data, offsets) for every element; f does the typed loads and the store. loop is a
// __grid_constant__: its shape and strides are indexed by a runtime dim, which would otherwise
// make every thread copy the whole parameter into local memory first.
template <int N, class F> __global__ void __launch_bounds__(kThreads) elementwise_kernel(const __grid_constant__ Loop<N> loop, F f) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < loop.numel; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[N];
    loop_offsets(loop, i, off);
    f(loop.data, off);
  }
}

// out = op(x) and out = op(a, b): inputs load into In's opmath type, the result stores as Out.
template <class Out, class In, class Op> struct Map {
  Op op;
  __device__ void operator()(void* const* p, const int64_t* o) const {
    static_cast<Out*>(p[0])[o[0]] = cast<Out>(op(load(static_cast<const In*>(p[1])[o[1]])));
  }
};
template <class Out, class In, class Op> struct Zip {
  Op op;
  __device__ void operator()(void* const* p, const int64_t* o) const {
    const In* a = static_cast<const In*>(p[1]);
    const In* b = static_cast<const In*>(p[2]);
    static_cast<Out*>(p[0])[o[0]] = cast<Out>(op(load(a[o[1]]), load(b[o[2]])));
  }
};

// A shuffle tree within each warp, then every thread folds the (at most 32) warp results in
// order, so all threads return the block's result. Needs blockDim.x a multiple of 32 (at most
// 1024) and blockDim.y == 1, and every thread of the block must call it: it synchronises.
template <class T> __device__ inline T shfl_down(T v, int delta) { return __shfl_down_sync(0xffffffffu, v, delta); }
template <class T, class Combine> __device__ T block_reduce(T v, Combine combine) {
  __shared__ T warp_results[32];
  for (int delta = 16; delta > 0; delta /= 2) v = combine(v, shfl_down(v, delta));
  if (threadIdx.x % 32 == 0) warp_results[threadIdx.x / 32] = v;
  __syncthreads();
  v = warp_results[0];
  for (int w = 1; w < (int)blockDim.x / 32; ++w) v = combine(v, warp_results[w]);
  __syncthreads();  // so a second block_reduce in the same kernel may reuse warp_results
  return v;
}
struct Plus {
  template <class A> __device__ A operator()(A a, A b) const { return a + b; }
};

// Block size for one block per row of length R: a single warp for short rows.
inline int threads_for_row(int64_t R) { return (int)std::clamp<int64_t>((R + 31) / 32 * 32, 32, kMaxRowThreads); }

template <int N, class F> void launch_elementwise(const Loop<N>& loop, F f) {
  if (loop.numel == 0) return;
  elementwise_kernel<<<grid_for(loop.numel), kThreads, 0, stream()>>>(loop, f);
  AMPGRAD_CUDA_CHECK(cudaGetLastError());
}
template <class Out, class In, class Op> void map_into(const Loop<2>& loop, Op op) { launch_elementwise(loop, Map<Out, In, Op>{op}); }
template <class Out, class In, class Op> void zip_into(const Loop<3>& loop, Op op) { launch_elementwise(loop, Zip<Out, In, Op>{op}); }

}  // namespace ampgrad::cuda
