// image.cu — the image kernels behind conv2d and max_pool2d on contiguous (N, C, H, W) tensors:
// im2col, its adjoint col2im, and max pooling with indices. One thread per output element;
// col2im gathers (each pixel sums the column entries read from it), so it needs no atomics.
// Which elements each thread reads is indexing.h's, where the CPU tests check it.
#include "tensor/cuda/loops.cuh"
#include "tensor/scalar_math.h"

namespace ampgrad::cuda {

// One thread per cols entry: a copy from x, or a zero of the padding.
template <class T> __global__ void __launch_bounds__(kThreads) im2col_kernel(const T* x, T* cols, ImageGeometry g, int64_t total) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t src = fits_32bit(total) ? im2col_source(g, uint32_t(e)) : im2col_source(g, e);
    cols[e] = src >= 0 ? x[src] : cast<T>(0);
  }
}

// One thread per pixel of x: the sum of the cols entries im2col read from it, in the math type,
// rounded once.
template <class T> __global__ void __launch_bounds__(kThreads) col2im_kernel(const T* cols, T* x, ImageGeometry g, int64_t total) {
  using A = opmath_t<T>;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const PixelSources src = fits_32bit(total) ? col2im_sources(g, uint32_t(e)) : col2im_sources(g, e);
    A acc = 0;
    for (int64_t oh = src.oh_begin; oh < src.oh_end; ++oh)
      for (int64_t ow = src.ow_begin; ow < src.ow_end; ++ow) acc += load(cols[src.at(g, oh, ow)]);
    x[e] = cast<T>(acc);
  }
}

// One thread per output: the window's max (the stored element, bits unchanged) and its index.
template <class T>
__global__ void __launch_bounds__(kThreads) max_pool2d_kernel(const T* x, T* out, int64_t* indices, ImageGeometry g, int64_t total) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const PoolWindow win = fits_32bit(total) ? pool_window(g, uint32_t(e)) : pool_window(g, e);
    const T* plane = x + win.plane;
    int64_t best = win.at(0, 0);
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j)
        if (math::pool_beats(load(plane[win.at(i, j)]), load(plane[best]))) best = win.at(i, j);
    out[e] = plane[best];
    indices[e] = best;
  }
}

void launch_im2col(DType dtype, const void* x, void* cols, const ImageGeometry& g) {
  const int64_t total = g.N * g.Ho * g.Wo * g.C * g.kh * g.kw;
  if (total == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    im2col_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>((const T*)x, (T*)cols, g, total);
    AMPGRAD_CUDA_CHECK(cudaGetLastError());
  });
}

// bool never gets here: tensor/kernels.cpp refuses it for every backend
void launch_col2im(DType dtype, const void* cols, void* x, const ImageGeometry& g) {
  const int64_t total = g.N * g.C * g.H * g.W;
  if (total == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {
      col2im_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>((const T*)cols, (T*)x, g, total);
      AMPGRAD_CUDA_CHECK(cudaGetLastError());
    }
  });
}

void launch_max_pool2d(DType dtype, const void* x, void* out, int64_t* indices, const ImageGeometry& g) {
  const int64_t total = g.N * g.C * g.Ho * g.Wo;
  if (total == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    max_pool2d_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>((const T*)x, (T*)out, indices, g, total);
    AMPGRAD_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace ampgrad::cuda
