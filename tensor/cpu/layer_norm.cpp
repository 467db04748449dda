// layer_norm.cpp — layer norm over rows of D: each row's mean and 1/std in the math type (float32
// for half rows), kept for the backward, which needs no other statistic. Two passes over a row,
// the mean and then the squares about it: Σx²/D − mean² would lose the variance of a row of
// large, close values. Rows are independent and split between the threads.
#include <cmath>

#include "tensor/cpu/loops.h"
#include "tensor/cpu/parallel.h"
#include "tensor/kernels.h"

namespace ampgrad::cpu {

// The (optional) weight or bias as the math type's pointer: its dtype was checked in kernels.cpp.
template <class A> static const A* params_of(const Tensor& t, Tensor& keep) {
  if (!t.defined()) return nullptr;
  keep = contiguous_copy(t);
  return (const A*)keep.raw_data();
}

std::tuple<Tensor, Tensor, Tensor> layer_norm(const Tensor& x_in, const Tensor& w, const Tensor& b, double eps) {
  Tensor x = contiguous_copy(x_in), y = empty(x.shape(), x.dtype());
  const int64_t R = x.size(0), D = x.size(1);
  const DType math = is_half(x.dtype()) ? kFloat32 : x.dtype();
  Tensor mean = empty({R}, math), rstd = empty({R}, math), wk, bk;
  dispatch_floating("layer_norm", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    const T* p = (const T*)x.raw_data();
    T* o = (T*)y.raw_data();
    A *mp = (A*)mean.raw_data(), *rp = (A*)rstd.raw_data();
    const A *wp = params_of<A>(w, wk), *bp = params_of<A>(b, bk);
    parallel_for(R, D, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* row = p + r * D;
        A m = 0, v = 0;
        for (int64_t j = 0; j < D; ++j) m += A(row[j]);
        m /= A(D);
        for (int64_t j = 0; j < D; ++j) v += (A(row[j]) - m) * (A(row[j]) - m);
        const A rs = A(1) / std::sqrt(v / A(D) + A(eps));  // the biased variance, as PyTorch's
        for (int64_t j = 0; j < D; ++j) {
          A out = (A(row[j]) - m) * rs;
          if (wp) out = out * wp[j];
          if (bp) out = out + bp[j];
          o[r * D + j] = T(out);
        }
        mp[r] = m;
        rp[r] = rs;
      }
    });
  });
  return {y, mean, rstd};
}

// Per row, with x̂ = (x − mean)·rstd and ĝ = g·weight: dx = rstd · (ĝ − mean(ĝ) − x̂ · mean(ĝ x̂)).
Tensor layer_norm_backward(const Tensor& g_in, const Tensor& x_in, const Tensor& mean, const Tensor& rstd, const Tensor& w) {
  Tensor g = contiguous_copy(g_in), x = contiguous_copy(x_in), dx = empty(x.shape(), x.dtype()), wk;
  const int64_t R = x.size(0), D = x.size(1);
  dispatch_floating("layer_norm_backward", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    const T *gp = (const T*)g.raw_data(), *xp = (const T*)x.raw_data();
    const A *mp = (const A*)mean.raw_data(), *rp = (const A*)rstd.raw_data(), *wp = params_of<A>(w, wk);
    T* o = (T*)dx.raw_data();
    parallel_for(R, D, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T *gr = gp + r * D, *xr = xp + r * D;
        auto x_hat = [&](int64_t j) { return (A(xr[j]) - mp[r]) * rp[r]; };
        auto g_hat = [&](int64_t j) { return wp ? A(gr[j]) * wp[j] : A(gr[j]); };
        A mean_g = 0, mean_gx = 0;
        for (int64_t j = 0; j < D; ++j) {
          mean_g += g_hat(j);
          mean_gx += g_hat(j) * x_hat(j);
        }
        mean_g /= A(D);
        mean_gx /= A(D);
        for (int64_t j = 0; j < D; ++j) o[r * D + j] = T(rp[r] * (g_hat(j) - mean_g - x_hat(j) * mean_gx));
      }
    });
  });
  return dx;
}

}  // namespace ampgrad::cpu
