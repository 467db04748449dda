// reduce.cu — CUDA reductions (sum, max/min with indices), gather/scatter along one dim, and
// index_select/index_add of whole slices.
// Rows are reduced one block per row (a single warp for short rows) with a shuffle tree; long
// rows are cut into chunks summed in parallel, then the chunks' partial sums are summed.
// Shape letters: R the reduced length, rows (or cols) the kept elements.
#include <cstdio>

#include "tensor/cuda/loops.cuh"

namespace ampgrad::cuda {

// Accumulators as on the CPU (tensor/cpu/reduce.cpp): double for float32 and float64 sums —
// memory-bound either way, so it costs nothing and keeps CUDA's sums next to the CPU's — float
// for half types, int64 for int64 and bool. Sums of floating x keep x's dtype, others are int64.
template <class T> struct acc { using type = double; };
template <> struct acc<__half> { using type = float; };
template <> struct acc<__nv_bfloat16> { using type = float; };
template <> struct acc<int64_t> { using type = int64_t; };
template <> struct acc<bool> { using type = int64_t; };
template <class T> using acc_t = typename acc<T>::type;
template <class T> using sum_out_t = std::conditional_t<std::is_floating_point_v<opmath_t<T>>, T, int64_t>;

inline constexpr int64_t kRowChunk = 16384;    // elements of a row one block sums in one pass
inline constexpr int64_t kColumnChunk = 1024;  // rows of x one block sums per column tile

// ---- kernels ----

// out[t] = sum of chunk c of row r, for t = r * nchunks + c (nchunks = 1: whole rows).
template <class In, class Acc, class Out>
__global__ void __launch_bounds__(kMaxRowThreads) sum_rows_kernel(const In* x, Out* out, int64_t rows, int64_t R, int64_t nchunks) {
  const int64_t chunk = (R + nchunks - 1) / nchunks;
  for (int64_t t = blockIdx.x; t < rows * nchunks; t += gridDim.x) {
    const In* row = x + (t / nchunks) * R;
    const int64_t begin = (t % nchunks) * chunk, end = min(R, begin + chunk);
    Acc acc = 0;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) acc += Acc(load(row[i]));
    acc = block_reduce(acc, Plus{});
    if (threadIdx.x == 0) out[t] = cast<Out>(acc);
  }
}

// out[c, j] = sum over rows [c * chunk, (c+1) * chunk) of x[i, j], x (R, cols), c = blockIdx.y.
// A block is 32 columns x 32 threads down them: reads are coalesced along j, and the 32 partial
// sums of a column meet in a shared-memory tree.
template <class In, class Acc, class Out>
__global__ void __launch_bounds__(1024) sum_columns_kernel(const In* x, Out* out, int64_t R, int64_t cols, int64_t chunk) {
  __shared__ Acc partial[32][32];
  const int64_t begin = blockIdx.y * chunk, end = min(R, begin + chunk);
  for (int64_t tile = blockIdx.x; tile * 32 < cols; tile += gridDim.x) {
    const int64_t j = tile * 32 + threadIdx.x;
    Acc acc = 0;
    if (j < cols)
      for (int64_t i = begin + threadIdx.y; i < end; i += 32) acc += Acc(load(x[i * cols + j]));
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    for (int s = 16; s > 0; s /= 2) {
      if (threadIdx.y < s) partial[threadIdx.y][threadIdx.x] += partial[threadIdx.y + s][threadIdx.x];
      __syncthreads();
    }
    if (threadIdx.y == 0 && j < cols) out[blockIdx.y * cols + j] = cast<Out>(partial[0][threadIdx.x]);
    __syncthreads();  // partial is rewritten by the next tile
  }
}

// The best element so far and its index (-1: none yet).
template <class A> struct Best {
  A value;
  int64_t index;
};
template <class A> __device__ Best<A> shfl_down(Best<A> v, int delta) { return {shfl_down(v.value, delta), shfl_down(v.index, delta)}; }
// Order-free, so any tree gives the CPU's answer: a NaN beats everything (the first NaN wins),
// then the larger (or smaller) value, then the smaller index.
template <class A> struct Better {
  bool is_min;
  __device__ Best<A> operator()(Best<A> a, Best<A> b) const {
    if (a.index < 0 || b.index < 0) return a.index < 0 ? b : a;
    const bool a_nan = a.value != a.value, b_nan = b.value != b.value;
    if (a_nan != b_nan) return a_nan ? a : b;
    if (a_nan || a.value == b.value) return a.index < b.index ? a : b;
    return (is_min ? b.value < a.value : b.value > a.value) ? b : a;
  }
};

template <class T>
__global__ void __launch_bounds__(kMaxRowThreads) max_rows_kernel(const T* x, T* values, int64_t* indices, int64_t rows, int64_t R, bool is_min) {
  using A = opmath_t<T>;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * R;
    Best<A> best{A(0), -1};
    for (int64_t i = threadIdx.x; i < R; i += blockDim.x) best = Better<A>{is_min}(best, Best<A>{load(row[i]), i});
    best = block_reduce(best, Better<A>{is_min});
    if (threadIdx.x == 0) {
      values[r] = row[best.index];  // the stored element itself, bits unchanged
      indices[r] = best.index;
    }
  }
}

// Position in the contiguous full tensor named by element k of the index (holding i).
// Out-of-range indices cannot raise an error from a kernel: like PyTorch's device-side assert,
// they print the CPU backend's message and abort the kernel, which fails the next CUDA call.
__device__ int64_t checked_position(const char* op, const IndexGeometry& g, int64_t k, int64_t i) {
  if (i < 0 || i >= g.dim_size) {
    printf("%s: index %lld is out of bounds for dim %d of size %lld\n", op, (long long)i, g.dim, (long long)g.dim_size);
    __trap();
  }
  return fits_32bit(g.numel) ? indexed_position(g, uint32_t(k), i) : indexed_position(g, k, i);
}

// g is a __grid_constant__ for the reason elementwise_kernel's loop is (loops.cuh).
template <class T> __global__ void gather_kernel(const T* x, const int64_t* index, T* out, const __grid_constant__ IndexGeometry g) {
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < g.numel; k += (int64_t)gridDim.x * blockDim.x)
    out[k] = x[checked_position("gather", g, k, index[k])];
}

// Adding into out with atomics: several index entries may name one position. float and double
// have native atomicAdd, __half and __nv_bfloat16 too (sm_70 / sm_80 and up); int64 adds as
// unsigned 64-bit, which wraps identically in two's complement.
template <class T> __device__ void atomic_add(T* p, T v) { atomicAdd(p, v); }
__device__ void atomic_add(int64_t* p, int64_t v) { atomicAdd((unsigned long long*)p, (unsigned long long)v); }

template <class T> __global__ void scatter_add_kernel(const T* src, const int64_t* index, T* out, const __grid_constant__ IndexGeometry g) {
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < g.numel; k += (int64_t)gridDim.x * blockDim.x)
    atomic_add(&out[checked_position("scatter_add", g, k, index[k])], src[k]);
}

// Where element k of the selected tensor lives in the full one (indexing.h), with its slice's
// index value checked as checked_position does.
__device__ int64_t checked_slice_position(const char* op, const SliceGeometry& g, const int64_t* index, int64_t k) {
  const bool narrow = fits_32bit(g.outer * g.n * g.inner);
  const int64_t s = index[narrow ? slice_of(g, uint32_t(k)) : slice_of(g, k)];
  if (s < 0 || s >= g.size) {
    printf("%s: index %lld is out of bounds for dim %d of size %lld\n", op, (long long)s, g.dim, (long long)g.size);
    __trap();
  }
  return narrow ? slice_position(g, uint32_t(k), s) : slice_position(g, k, s);
}

template <class T> __global__ void index_select_kernel(const T* x, const int64_t* index, T* out, const SliceGeometry g) {
  const int64_t numel = g.outer * g.n * g.inner;
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < numel; k += (int64_t)gridDim.x * blockDim.x)
    out[k] = x[checked_slice_position("index_select", g, index, k)];
}

template <class T> __global__ void index_add_kernel(const T* src, const int64_t* index, T* out, const SliceGeometry g) {
  const int64_t numel = g.outer * g.n * g.inner;
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < numel; k += (int64_t)gridDim.x * blockDim.x)
    atomic_add(&out[checked_slice_position("index_add", g, index, k)], src[k]);
}

// ---- launchers ----

template <class In, class Acc, class Out> static void sum_rows(const In* x, Out* out, int64_t rows, int64_t R, int64_t nchunks) {
  sum_rows_kernel<In, Acc, Out><<<grid_for(rows * nchunks, 1), threads_for_row(R / nchunks), 0, stream()>>>(x, out, rows, R, nchunks);
  AMPGRAD_CUDA_CHECK(cudaGetLastError());
}

void launch_sum_rows(DType dtype, const void* x, void* out, int64_t rows, int64_t R, int device) {
  if (rows == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = acc_t<T>;
    using O = sum_out_t<T>;
    const int64_t nchunks = std::max<int64_t>(1, (R + kRowChunk - 1) / kRowChunk);
    if (nchunks == 1) return sum_rows<T, Acc, O>((const T*)x, (O*)out, rows, R, 1);
    // Long rows: every chunk's sum in parallel, then each row's chunk sums, still in Acc
    Scratch<Acc> partial(rows * nchunks, device);
    sum_rows<T, Acc, Acc>((const T*)x, partial.ptr, rows, R, nchunks);
    sum_rows<Acc, Acc, O>(partial.ptr, (O*)out, rows, nchunks, 1);
  });
}

template <class In, class Acc, class Out> static void sum_columns(const In* x, Out* out, int64_t R, int64_t cols, int64_t nchunks) {
  const dim3 grid(grid_for(cols, 32), (unsigned)nchunks), block(32, 32);
  sum_columns_kernel<In, Acc, Out><<<grid, block, 0, stream()>>>(x, out, R, cols, (R + nchunks - 1) / nchunks);
  AMPGRAD_CUDA_CHECK(cudaGetLastError());
}

void launch_sum_columns(DType dtype, const void* x, void* out, int64_t R, int64_t cols, int device) {
  if (cols == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = acc_t<T>;
    using O = sum_out_t<T>;
    // grid.y is at most 65535: past that many chunks, the chunks grow instead
    const int64_t nchunks = std::clamp<int64_t>((R + kColumnChunk - 1) / kColumnChunk, 1, 65535);
    if (nchunks == 1) return sum_columns<T, Acc, O>((const T*)x, (O*)out, R, cols, 1);
    // Many rows: (nchunks, cols) partial sums in parallel, then a column sum of those
    Scratch<Acc> partial(nchunks * cols, device);
    sum_columns<T, Acc, Acc>((const T*)x, partial.ptr, R, cols, nchunks);
    sum_columns<Acc, Acc, O>(partial.ptr, (O*)out, nchunks, cols, 1);
  });
}

void launch_max_rows(DType dtype, const void* x, void* values, int64_t* indices, int64_t rows, int64_t R, bool is_min) {
  if (rows == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    max_rows_kernel<T><<<grid_for(rows, 1), threads_for_row(R), 0, stream()>>>((const T*)x, (T*)values, indices, rows, R, is_min);
    AMPGRAD_CUDA_CHECK(cudaGetLastError());
  });
}

void launch_gather(DType dtype, const void* x, const int64_t* index, void* out, const IndexGeometry& g) {
  if (g.numel == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    gather_kernel<T><<<grid_for(g.numel), kThreads, 0, stream()>>>((const T*)x, index, (T*)out, g);
    AMPGRAD_CUDA_CHECK(cudaGetLastError());
  });
}

// bool never gets here: tensor/kernels.cpp refuses it for every backend
void launch_scatter_add(DType dtype, const void* src, const int64_t* index, void* out, const IndexGeometry& g) {
  if (g.numel == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {
      scatter_add_kernel<T><<<grid_for(g.numel), kThreads, 0, stream()>>>((const T*)src, index, (T*)out, g);
      AMPGRAD_CUDA_CHECK(cudaGetLastError());
    }
  });
}

void launch_index_select(DType dtype, const void* x, const int64_t* index, void* out, const SliceGeometry& g) {
  const int64_t numel = g.outer * g.n * g.inner;
  if (numel == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    index_select_kernel<T><<<grid_for(numel), kThreads, 0, stream()>>>((const T*)x, index, (T*)out, g);
    AMPGRAD_CUDA_CHECK(cudaGetLastError());
  });
}

// bool never gets here: tensor/kernels.cpp refuses it for every backend
void launch_index_add(DType dtype, const void* src, const int64_t* index, void* out, const SliceGeometry& g) {
  const int64_t numel = g.outer * g.n * g.inner;
  if (numel == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {
      index_add_kernel<T><<<grid_for(numel), kThreads, 0, stream()>>>((const T*)src, index, (T*)out, g);
      AMPGRAD_CUDA_CHECK(cudaGetLastError());
    }
  });
}

}  // namespace ampgrad::cuda
