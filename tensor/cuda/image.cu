// image.cu — the image kernels behind conv2d and max_pool2d on contiguous (N, C, H, W) tensors:
// im2col, its adjoint col2im, and max pooling with indices. One thread per output element;
// col2im gathers (each pixel sums the column entries read from it), so it needs no atomics.
#include "tensor/cuda/loops.cuh"

namespace ampgrad::cuda {

// cols[(n, oh, ow), (c, i, j)] = x[n, c, oh*s - p + i, ow*s - p + j]   (0 outside the image)
template <class T> __global__ void __launch_bounds__(kThreads) im2col_kernel(const T* x, T* cols, ImageGeometry g) {
  const int64_t K = g.C * g.kh * g.kw, total = g.N * g.Ho * g.Wo * K;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t row = e / K, col = e % K;
    const int64_t j = col % g.kw, i = col / g.kw % g.kh, c = col / (g.kw * g.kh);
    const int64_t ow = row % g.Wo, oh = row / g.Wo % g.Ho, n = row / (g.Wo * g.Ho);
    const int64_t h = oh * g.stride - g.pad + i, w = ow * g.stride - g.pad + j;
    cols[e] = (h >= 0 && h < g.H && w >= 0 && w < g.W) ? x[((n * g.C + c) * g.H + h) * g.W + w] : cast<T>(0);
  }
}

// x[n, c, h, w] = sum of every cols entry im2col read from that pixel: the (oh, ow, i, j) with
// oh*s - p + i = h and ow*s - p + j = w. Summed in the math type, rounded once; the terms come
// in the CPU's order (oh, then ow, ascending: i and j descending), so float32 and float64 agree
// with the CPU to the bit.
template <class T> __global__ void __launch_bounds__(kThreads) col2im_kernel(const T* cols, T* x, ImageGeometry g) {
  using A = opmath_t<T>;
  const int64_t K = g.C * g.kh * g.kw, total = g.N * g.C * g.H * g.W;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t w = e % g.W, h = e / g.W % g.H, c = e / (g.W * g.H) % g.C, n = e / (g.W * g.H * g.C);
    A acc = 0;
    for (int64_t i = g.kh - 1; i >= 0; --i) {
      const int64_t th = h + g.pad - i;  // = oh * s
      if (th < 0 || th % g.stride != 0 || th / g.stride >= g.Ho) continue;
      for (int64_t j = g.kw - 1; j >= 0; --j) {
        const int64_t tw = w + g.pad - j;  // = ow * s
        if (tw < 0 || tw % g.stride != 0 || tw / g.stride >= g.Wo) continue;
        const int64_t row = (n * g.Ho + th / g.stride) * g.Wo + tw / g.stride;
        acc += load(cols[row * K + (c * g.kh + i) * g.kw + j]);
      }
    }
    x[e] = cast<T>(acc);
  }
}

// out[n, c, oh, ow] = max of the k x k window at (oh*s, ow*s); a NaN wins, the first on ties.
template <class T> __global__ void __launch_bounds__(kThreads) max_pool2d_kernel(const T* x, T* out, int64_t* indices, ImageGeometry g) {
  using A = opmath_t<T>;
  const int64_t total = g.N * g.C * g.Ho * g.Wo;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t ow = e % g.Wo, oh = e / g.Wo % g.Ho, nc = e / (g.Wo * g.Ho);
    const T* plane = x + nc * g.H * g.W;
    int64_t best = oh * g.stride * g.W + ow * g.stride;
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t pos = (oh * g.stride + i) * g.W + ow * g.stride + j;
        const A v = load(plane[pos]), b = load(plane[best]);
        if (v > b || (v != v && b == b)) best = pos;
      }
    out[e] = plane[best];
    indices[e] = best;
  }
}

void launch_im2col(DType dtype, const void* x, void* cols, const ImageGeometry& g) {
  const int64_t total = g.N * g.Ho * g.Wo * g.C * g.kh * g.kw;
  if (total == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    im2col_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>((const T*)x, (T*)cols, g);
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
      col2im_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>((const T*)cols, (T*)x, g);
      AMPGRAD_CUDA_CHECK(cudaGetLastError());
    }
  });
}

void launch_max_pool2d(DType dtype, const void* x, void* out, int64_t* indices, const ImageGeometry& g) {
  const int64_t total = g.N * g.C * g.Ho * g.Wo;
  if (total == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    max_pool2d_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>((const T*)x, (T*)out, indices, g);
    AMPGRAD_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace ampgrad::cuda
