// image.cpp — the image kernels behind conv2d and max_pool2d, on (N, C, H, W) tensors.
// conv2d is im2col + GEMM: each output pixel's receptive field becomes one row of a matrix,
// so the convolution is a single matrix multiply (and its backward two more plus col2im).
// Arguments (shapes, a window that fits) are checked in tensor/kernels.cpp.
#include <algorithm>
#include <cmath>

#include "tensor/cpu/loops.h"
#include "tensor/kernels.h"
#include "tensor/scalar_math.h"

namespace ampgrad::cpu {
using namespace ampgrad::kernels;

// cols[(n, oh, ow), (c, i, j)] = x[n, c, oh*s - p + i, ow*s - p + j]   (0 outside the image)
Tensor im2col(const Tensor& x_in, int64_t kh, int64_t kw, int64_t s, int64_t p) {
  Tensor x = contiguous_copy(x_in);
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const int64_t Ho = kernels::window_out_size(H, kh, s, p), Wo = kernels::window_out_size(W, kw, s, p);
  Tensor cols = empty({N * Ho * Wo, C * kh * kw}, x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = (const T*)x.raw_data();
    T* cp = (T*)cols.raw_data();
#pragma omp parallel for
    for (int64_t n = 0; n < N; ++n)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          T* row = cp + ((n * Ho + oh) * Wo + ow) * C * kh * kw;
          const int64_t w0 = ow * s - p;
          const bool inside = w0 >= 0 && w0 + kw <= W;  // the common case: no column padding
          for (int64_t c = 0; c < C; ++c)
            for (int64_t i = 0; i < kh; ++i, row += kw) {
              const int64_t h = oh * s - p + i;
              if (h < 0 || h >= H) {  // a padding row
                std::fill(row, row + kw, T(0));
                continue;
              }
              const T* xr = xp + ((n * C + c) * H + h) * W;  // image row h
              if (inside) std::copy(xr + w0, xr + w0 + kw, row);
              else
                for (int64_t j = 0; j < kw; ++j) row[j] = (w0 + j >= 0 && w0 + j < W) ? xr[w0 + j] : T(0);
            }
        }
  });
  return cols;
}

// The adjoint of im2col: every column entry is added back to the pixel it was read from. A
// pixel's entries sum in opmath_t (float32 for the 16-bit dtypes) and round once, as on CUDA.
Tensor col2im(const Tensor& cols_in, const Shape& x_shape, int64_t kh, int64_t kw, int64_t s, int64_t p) {
  Tensor cols = contiguous_copy(cols_in);
  const int64_t N = x_shape[0], C = x_shape[1], H = x_shape[2], W = x_shape[3];
  const int64_t Ho = kernels::window_out_size(H, kh, s, p), Wo = kernels::window_out_size(W, kw, s, p);
  Tensor x;
  dispatch(cols.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    if constexpr (!std::is_same_v<T, bool>) {  // refused in tensor/kernels.cpp
      Tensor sums = zeros(x_shape, dtype_of<A>());
      A* xp = (A*)sums.raw_data();
      const T* cp = (const T*)cols.raw_data();
#pragma omp parallel for
      for (int64_t n = 0; n < N; ++n)  // images are independent: no two threads touch one pixel
        for (int64_t oh = 0; oh < Ho; ++oh)
          for (int64_t ow = 0; ow < Wo; ++ow) {
            const T* row = cp + ((n * Ho + oh) * Wo + ow) * C * kh * kw;
            for (int64_t c = 0; c < C; ++c)
              for (int64_t i = 0; i < kh; ++i) {
                int64_t h = oh * s - p + i;
                for (int64_t j = 0; j < kw; ++j, ++row) {
                  int64_t w = ow * s - p + j;
                  if (h >= 0 && h < H && w >= 0 && w < W) xp[((n * C + c) * H + h) * W + w] += A(*row);
                }
              }
          }
      x = sums;
      if constexpr (!std::is_same_v<A, T>) {
        x = empty(x_shape, cols.dtype());
        copy_(x, sums);
      }
    }
  });
  return x;
}

std::pair<Tensor, Tensor> max_pool2d(const Tensor& x_in, int64_t k, int64_t s) {
  Tensor x = contiguous_copy(x_in);
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const int64_t Ho = kernels::window_out_size(H, k, s, 0), Wo = kernels::window_out_size(W, k, s, 0);
  Tensor out = empty({N, C, Ho, Wo}, x.dtype()), idx = empty({N, C, Ho, Wo}, kInt64);
  int64_t* ip = idx.data_ptr<int64_t>();
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    const T* xp = (const T*)x.raw_data();
    T* op = (T*)out.raw_data();
#pragma omp parallel for
    for (int64_t nc = 0; nc < N * C; ++nc)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          int64_t best = (oh * s) * W + ow * s;
          for (int64_t i = 0; i < k; ++i)
            for (int64_t j = 0; j < k; ++j) {
              int64_t pos = (oh * s + i) * W + ow * s + j;
              A v = A(xp[nc * H * W + pos]), b = A(xp[nc * H * W + best]);
              if (math::pool_beats(v, b)) best = pos;
            }
          int64_t o = (nc * Ho + oh) * Wo + ow;
          op[o] = xp[nc * H * W + best];
          ip[o] = best;
        }
  });
  return {out, idx};
}

}  // namespace ampgrad::cpu
