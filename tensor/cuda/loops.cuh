// loops.cuh — the CUDA backend's two loop shapes: a grid-stride loop over the elements of a
// Loop<N> (every elementwise kernel, the twin of tensor/cpu/loops.h's for_each_run), and a block
// reduction (sums, max, softmax). Where an element sits is indexing.h's business. Kernels first,
// then launchers.
//
// The elementwise loop moves runs of V neighbours where the operands allow (moves_in_runs): each
// operand is then one vector load or store of up to 16 bytes a run, not V narrow ones, which is
// what lets a 16-bit cast or add reach the memory's bandwidth. Each functor says how it moves V
// elements (apply<V>) and the widest V it takes (kVector: 16 bytes of its widest operand).
//
//   map_into<float, __half>(loop, Identity{});   // loop = make_loop<2>(...) on the C++ side
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>

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

// V elements of T, aligned to their size, so one instruction loads or stores them all.
template <class T, int V> struct alignas(sizeof(T) * V) Vec {
  T v[V];
};
template <class T, int V> __device__ inline Vec<T, V> load_vec(const void* p, int64_t o) {
  return *reinterpret_cast<const Vec<T, V>*>(static_cast<const T*>(p) + o);
}
template <class T, int V> __device__ inline void store_vec(void* p, int64_t o, const Vec<T, V>& v) {
  *reinterpret_cast<Vec<T, V>*>(static_cast<T*>(p) + o) = v;
}
// The widest run a functor moves: 16 bytes of its widest operand.
template <class... T> constexpr int vector_width() {
  size_t widest = 1;
  for (size_t bytes : {sizeof(T)...}) widest = bytes > widest ? bytes : widest;
  return int(16 / widest);
}

// f.apply<V>(data, offsets) for every run of V elements, offsets those of the run's first; then,
// for a contiguous loop, the last numel % V elements one at a time. V = 1 is the plain loop over
// elements, for any geometry. loop is a __grid_constant__: its shape and strides are indexed by
// a runtime dim, which would otherwise make every thread copy the whole parameter into local
// memory first.
template <int N, int V, class F> __global__ void __launch_bounds__(kThreads) elementwise_kernel(const __grid_constant__ Loop<N> loop, F f) {
  const int64_t runs = loop.numel / V, first = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t r = first; r < runs; r += step) {
    int64_t off[N];
    loop_offsets(loop, r * V, off);
    f.template apply<V>(loop.data, off);
  }
  if constexpr (V > 1) {
    for (int64_t i = runs * V + first; i < loop.numel; i += step) {
      int64_t off[N];
      loop_offsets(loop, i, off);
      f.template apply<1>(loop.data, off);
    }
  }
}

// out = op(x) and out = op(a, b): inputs load into In's opmath type, the result stores as Out.
template <class Out, class In, class Op> struct Map {
  Op op;
  static constexpr int kVector = vector_width<Out, In>();
  template <int V> __device__ void apply(void* const* p, const int64_t* o) const {
    const Vec<In, V> x = load_vec<In, V>(p[1], o[1]);
    Vec<Out, V> y;
#pragma unroll
    for (int j = 0; j < V; ++j) y.v[j] = cast<Out>(op(load(x.v[j])));
    store_vec(p[0], o[0], y);
  }
};
template <class Out, class In, class Op> struct Zip {
  Op op;
  static constexpr int kVector = vector_width<Out, In>();
  template <int V> __device__ void apply(void* const* p, const int64_t* o) const {
    const Vec<In, V> a = load_vec<In, V>(p[1], o[1]), b = load_vec<In, V>(p[2], o[2]);
    Vec<Out, V> y;
#pragma unroll
    for (int j = 0; j < V; ++j) y.v[j] = cast<Out>(op(load(a.v[j]), load(b.v[j])));
    store_vec(p[0], o[0], y);
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
  constexpr int V = F::kVector;
  if (moves_in_runs(loop, V)) elementwise_kernel<N, V><<<grid_for((loop.numel + V - 1) / V), kThreads, 0, stream()>>>(loop, f);
  else elementwise_kernel<N, 1><<<grid_for(loop.numel), kThreads, 0, stream()>>>(loop, f);
  AMPGRAD_CUDA_CHECK(cudaGetLastError());
}
template <class Out, class In, class Op> void map_into(const Loop<2>& loop, Op op) { launch_elementwise(loop, Map<Out, In, Op>{op}); }
template <class Out, class In, class Op> void zip_into(const Loop<3>& loop, Op op) { launch_elementwise(loop, Zip<Out, In, Op>{op}); }

}  // namespace ampgrad::cuda
