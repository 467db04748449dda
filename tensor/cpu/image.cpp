// image.cpp — the image kernels behind conv2d and max_pool2d, on (N, C, H, W) tensors.
// conv2d is im2col + GEMM: each output pixel's receptive field becomes one row of a matrix,
// so the convolution is a single matrix multiply (and its backward two more plus col2im).
// Arguments (shapes, a window that fits) are checked in tensor/kernels.cpp.
#include <algorithm>
#include <bit>
#include <cmath>
#include <type_traits>

#include "tensor/cpu/loops.h"
#include "tensor/kernels.h"
#include "tensor/scalar_math.h"

namespace ampgrad::cpu {
using namespace ampgrad::kernels;

// Calls f(k) with the window width k as a compile-time constant for the common widths (2 for
// pooling, 3 and 5 for convolutions), so the few elements of a window row are copied, added or
// compared without a loop or a memmove call; any other width runs the same code with k at run time.
template <class F> void with_width(int64_t k, const F& f) {
  if (k == 2) f(std::integral_constant<int64_t, 2>{});
  else if (k == 3) f(std::integral_constant<int64_t, 3>{});
  else if (k == 5) f(std::integral_constant<int64_t, 5>{});
  else f(k);
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
    with_width(kw_in, [&](auto kw) {
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
      with_width(kw_in, [&](auto kw) {
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

// c ? x : y by bit masks: g++ turns a ?: back into a branch, and on a coin-toss condition (which
// element of a window is largest) the branch predictor loses half the time: max pooling 1.6× slower.
template <class V> V choose(bool c, V x, V y) {
  using U = std::conditional_t<sizeof(V) == 8, uint64_t, std::conditional_t<sizeof(V) == 4, uint32_t, std::conditional_t<sizeof(V) == 2, uint16_t, uint8_t>>>;
  const U m = U(0) - U(c);
  return std::bit_cast<V>(U((std::bit_cast<U>(x) & m) | (std::bit_cast<U>(y) & ~m)));
}

// One (H, W) plane's windows: each window's first maximum wins (a NaN beats any number,
// math::pool_beats), and idx holds its position in the plane. The sizes come as arguments, not
// captures: a store through `idx` could alias a captured int64_t, reloaded for every window.
template <class T, class K> void pool_plane(const T* plane, T* out, int64_t* idx, int64_t Ho, int64_t Wo, int64_t W, K k, int64_t s) {
  using A = opmath_t<T>;
  for (int64_t oh = 0; oh < Ho; ++oh)
    for (int64_t ow = 0; ow < Wo; ++ow, ++out, ++idx) {
      const int64_t first = (oh * s) * W + ow * s;
      int64_t best = first;
      A lead = A(plane[first]);
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < k; ++j) {
          const int64_t pos = first + i * W + j;
          const A v = A(plane[pos]);
          const bool wins = math::pool_beats(v, lead);
          best = choose(wins, pos, best);
          lead = choose(wins, v, lead);
        }
      *out = plane[best];
      *idx = best;
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
    with_width(k_in, [&](auto k) {
#pragma omp parallel for
      for (int64_t nc = 0; nc < N * C; ++nc) pool_plane(xp + nc * H * W, op + nc * Ho * Wo, ip + nc * Ho * Wo, Ho, Wo, W, k, s);
    });
  });
  return {out, idx};
}

}  // namespace ampgrad::cpu
