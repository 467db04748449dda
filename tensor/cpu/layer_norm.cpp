// layer_norm.cpp — layer norm over rows of D: each row's mean and 1/std in the math type (float32
// for half rows), kept for the backward, which needs no other statistic. Two passes over a row,
// the mean and then the squares about it: Σx²/D − mean² would lose the variance of a row of
// large, close values. Rows are independent and split between the threads; each row's loops
// and sums vectorise (rows.h).
#include <cmath>

#include "tensor/cpu/loops.h"
#include "tensor/cpu/parallel.h"
#include "tensor/cpu/rows.h"
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
    A *mp = (A*)mean.raw_data(), *rp = (A*)rstd.raw_data();
    const A *wp = params_of<A>(w, wk), *bp = params_of<A>(b, bk);
    parallel_for(R, D, [&](int64_t begin, int64_t end) {
      RowBuffer<T> in(D), out(D);
      for (int64_t r = begin; r < end; ++r) {
        const A* row = in.read((const T*)x.raw_data() + r * D);
        A* o = out.write((T*)y.raw_data() + r * D);
        const A m = lane_sum<A>(D, [row](int64_t j) { return row[j]; }) / A(D);
        for (int64_t j = 0; j < D; ++j) o[j] = row[j] - m;
        const A rs = A(1) / std::sqrt(lane_sum<A>(D, [o](int64_t j) { return o[j] * o[j]; }) / A(D) + A(eps));  // the biased variance, as PyTorch's
        for (int64_t j = 0; j < D; ++j) o[j] = o[j] * rs;
        if (wp) for (int64_t j = 0; j < D; ++j) o[j] = o[j] * wp[j];
        if (bp) for (int64_t j = 0; j < D; ++j) o[j] = o[j] + bp[j];
        out.done();
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
    const A *mp = (const A*)mean.raw_data(), *rp = (const A*)rstd.raw_data(), *wp = params_of<A>(w, wk);
    parallel_for(R, D, [&](int64_t begin, int64_t end) {
      RowBuffer<T> g_row(D), x_row(D), out(D);
      std::vector<A> x_hat(D), g_hat(D);
      for (int64_t r = begin; r < end; ++r) {
        const A *gr = g_row.read((const T*)g.raw_data() + r * D), *xr = x_row.read((const T*)x.raw_data() + r * D);
        for (int64_t j = 0; j < D; ++j) {
          x_hat[j] = (xr[j] - mp[r]) * rp[r];
          g_hat[j] = wp ? gr[j] * wp[j] : gr[j];
        }
        const A mean_g = lane_sum<A>(D, [&](int64_t j) { return g_hat[j]; }) / A(D),
                mean_gx = lane_sum<A>(D, [&](int64_t j) { return g_hat[j] * x_hat[j]; }) / A(D);
        A* o = out.write((T*)dx.raw_data() + r * D);
        for (int64_t j = 0; j < D; ++j) o[j] = rp[r] * (g_hat[j] - mean_g - x_hat[j] * mean_gx);
        out.done();
      }
    });
  });
  return dx;
}

}  // namespace ampgrad::cpu
