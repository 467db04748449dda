// image.cpp — the image kernels behind conv2d and max_pool2d, on (N, C, H, W) tensors.
// conv2d is im2col + GEMM: each output pixel's receptive field becomes one row of a matrix,
// so the convolution is a single matrix multiply (and its backward two more plus col2im).
// Arguments (shapes, a window that fits) are checked in tensor/kernels.cpp.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "tensor/cpu/loops.h"
#include "tensor/kernels.h"
#include "tensor/scalar_math.h"

namespace ampgrad::cpu {
using namespace ampgrad::kernels;

// Calls f(k) with the window width k as a compile-time constant when it is one of Ks (the common
// ones), so the few elements of a window row are copied, added or compared without a loop or a
// memmove call; any other width runs the same code with k at run time.
template <int64_t... Ks, class F> void with_width(int64_t k, const F& f) {
  if (!((k == Ks && (f(std::integral_constant<int64_t, Ks>{}), true)) || ...)) f(k);
}

// cols[(n, oh, ow), (c, i, j)] = x[n, c, oh*s - p + i, ow*s - p + j]   (0 outside the image)
Tensor im2col(const Tensor& x_in, int64_t kh, int64_t kw_in, int64_t s, int64_t p) {
  Tensor x = contiguous_copy(x_in);
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const int64_t Ho = kernels::window_out_size(H, kh, s, p), Wo = kernels::window_out_size(W, kw_in, s, p);
  Tensor cols = empty({N * Ho * Wo, C * kh * kw_in}, x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = (const T*)x.raw_data();
    T* cp = (T*)cols.raw_data();
    with_width<3, 5>(kw_in, [&](auto kw) {
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
                  for (int64_t j = 0; j < kw; ++j) row[j] = T(0);
                  continue;
                }
                const T* xr = xp + ((n * C + c) * H + h) * W;  // image row h
                if (inside)  // one unrolled copy of kw elements when kw is a constant
                  for (int64_t j = 0; j < kw; ++j) row[j] = xr[w0 + j];
                else
                  for (int64_t j = 0; j < kw; ++j) row[j] = w0 + j >= 0 && w0 + j < W ? xr[w0 + j] : T(0);
              }
          }
    });
  });
  return cols;
}

// The adjoint of im2col: every column entry is added back to the pixel it was read from. A
// pixel's entries sum in opmath_t (float32 for the 16-bit dtypes), in the order of the output
// positions (oh, ow) that read it, and round once, as on CUDA.
Tensor col2im(const Tensor& cols_in, const Shape& x_shape, int64_t kh, int64_t kw_in, int64_t s, int64_t p) {
  Tensor cols = contiguous_copy(cols_in);
  const int64_t N = x_shape[0], C = x_shape[1], H = x_shape[2], W = x_shape[3];
  const int64_t Ho = kernels::window_out_size(H, kh, s, p), Wo = kernels::window_out_size(W, kw_in, s, p);
  Tensor x;
  dispatch(cols.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    if constexpr (!std::is_same_v<T, bool>) {  // refused in tensor/kernels.cpp
      Tensor sums = zeros(x_shape, dtype_of<A>());
      A* xp = (A*)sums.raw_data();
      const T* cp = (const T*)cols.raw_data();
      with_width<3, 5>(kw_in, [&](auto kw) {
#pragma omp parallel for
        for (int64_t n = 0; n < N; ++n)  // images are independent: no two threads touch one pixel
          for (int64_t oh = 0; oh < Ho; ++oh)
            for (int64_t ow = 0; ow < Wo; ++ow) {
              const T* row = cp + ((n * Ho + oh) * Wo + ow) * C * kh * kw;
              const int64_t w0 = ow * s - p;
              const bool inside = w0 >= 0 && w0 + kw <= W;
              for (int64_t c = 0; c < C; ++c)
                for (int64_t i = 0; i < kh; ++i, row += kw) {
                  const int64_t h = oh * s - p + i;
                  if (h < 0 || h >= H) continue;  // a padding row
                  A* xr = xp + ((n * C + c) * H + h) * W;
                  for (int64_t j = 0; j < kw; ++j)
                    if (inside || (w0 + j >= 0 && w0 + j < W)) xr[w0 + j] += A(row[j]);
                }
            }
      });
      x = sums;
      if constexpr (!std::is_same_v<A, T>) {
        x = empty(x_shape, cols.dtype());
        copy_(x, sums);
      }
    }
  });
  return x;
}

// The windows of up to kPoolLanes planes at once, one plane per SIMD lane: each window's first
// maximum wins (a NaN beats any number, math::pool_beats) and idx holds its position in the plane.
// Within a window each comparison waits on the last, so windows must go side by side; lanes take
// planes rather than a row's windows, whose rows are short (12 and 4 in the MNIST CNN).
constexpr int64_t kPoolLanes = 16;
template <class T, class K>
void pool_planes(const T* x, T* out, int64_t* idx, int64_t lanes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, K k, int64_t s) {
  using A = opmath_t<T>;
  A lead[kPoolLanes];
  int64_t best[kPoolLanes];
  for (int64_t oh = 0; oh < Ho; ++oh)
    for (int64_t ow = 0; ow < Wo; ++ow) {
      const int64_t first = oh * s * W + ow * s, o = oh * Wo + ow;
#pragma omp simd
      for (int64_t l = 0; l < lanes; ++l) {
        lead[l] = A(x[l * H * W + first]);
        best[l] = first;
      }
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < k; ++j)
#pragma omp simd
          for (int64_t l = 0; l < lanes; ++l) {
            const int64_t pos = first + i * W + j;
            const A v = A(x[l * H * W + pos]);
            const bool wins = math::pool_beats(v, lead[l]);
            best[l] = wins ? pos : best[l];
            lead[l] = wins ? v : lead[l];
          }
#pragma omp simd
      for (int64_t l = 0; l < lanes; ++l) {
        out[l * Ho * Wo + o] = x[l * H * W + best[l]];
        idx[l * Ho * Wo + o] = best[l];
      }
    }
}

std::pair<Tensor, Tensor> max_pool2d(const Tensor& x_in, int64_t k_in, int64_t s) {
  Tensor x = contiguous_copy(x_in);
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const int64_t Ho = kernels::window_out_size(H, k_in, s, 0), Wo = kernels::window_out_size(W, k_in, s, 0);
  Tensor out = empty({N, C, Ho, Wo}, x.dtype()), idx = empty({N, C, Ho, Wo}, kInt64);
  int64_t* ip = idx.data_ptr<int64_t>();
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = (const T*)x.raw_data();
    T* op = (T*)out.raw_data();
    with_width<2>(k_in, [&](auto k) {  // k is the window's height too
#pragma omp parallel for
      for (int64_t p = 0; p < N * C; p += kPoolLanes)
        pool_planes(xp + p * H * W, op + p * Ho * Wo, ip + p * Ho * Wo, std::min(kPoolLanes, N * C - p), H, W, Ho, Wo, k, s);
    });
  });
  return {out, idx};
}

}  // namespace ampgrad::cpu
