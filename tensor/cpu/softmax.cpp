// softmax.cpp — numerically stable softmax / log-softmax over the last dim (rows of length C),
// and softmax cross-entropy's gradient. Subtracting the row max keeps exp() from overflowing;
// sums accumulate in float32 or wider, and the row loops vectorise (rows.h, scalar_math.h's exp).
// Compiled with -ffp-contract=off (CMakeLists.txt): the gradient must round each product and sum
// as the separate ops it replaces do, never fusing a multiply and an add (nothing else here has
// a product to fuse; scalar_math.h's own multiply-adds are explicit).
#include <algorithm>
#include <cmath>

#include "tensor/cpu/loops.h"
#include "tensor/cpu/parallel.h"
#include "tensor/cpu/rows.h"
#include "tensor/kernels.h"
#include "tensor/scalar_math.h"

namespace ampgrad::cpu {
using namespace ampgrad::kernels;

Tensor softmax_lastdim(const Tensor& x_in, bool log) {
  const char* op = log ? "log_softmax" : "softmax";  // at least 1-d, floating: checked in tensor/kernels.cpp
  Tensor x = contiguous_copy(x_in);
  Tensor out = empty(x.shape(), x.dtype());
  const int64_t C = x.shape().back(), rows = C == 0 ? 0 : x.numel() / C;
  dispatch_floating(op, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    parallel_for(rows, C, [&](int64_t begin, int64_t end) {  // rows are independent
      RowBuffer<T> in(C), y(C);
      for (int64_t r = begin; r < end; ++r) {
        const A* row = in.read((const T*)x.raw_data() + r * C);
        A* o = y.write((T*)out.raw_data() + r * C);
        A mx = as_array(row, C).maxCoeff();
        if (std::isinf(mx) && mx < 0) mx = 0;  // an all -inf row: exp(-inf - 0) = 0, and the row 0/0 = NaN, as PyTorch's
        for (int64_t j = 0; j < C; ++j) o[j] = math::exp(row[j] - mx);  // each exp once: kept for the division
        const A s = lane_sum<A>(C, [o](int64_t j) { return o[j]; });
        if (log) {
          const A lse = mx + math::log(s);
          for (int64_t j = 0; j < C; ++j) o[j] = row[j] - lse;
        } else {
          for (int64_t j = 0; j < C; ++j) o[j] = o[j] / s;
        }
        y.done();
      }
    });
  });
  return out;
}

// One row per item; each element is scalar_math.h's cross_entropy_grad.
Tensor cross_entropy_backward(const Tensor& logp_in, const Tensor& index_in, const Tensor& kept_in, const Tensor& coef_in,
                              const Tensor& hit_in, const Tensor& spread_in, const Tensor& scale_in, DType dtype) {
  const Tensor logp = contiguous_copy(logp_in), index = contiguous_copy(index_in), kept = contiguous_copy(kept_in),
               coef = contiguous_copy(coef_in), hit = contiguous_copy(hit_in), scale = contiguous_copy(scale_in),
               spread = spread_in.defined() ? contiguous_copy(spread_in) : spread_in;
  const int64_t N = logp.size(0), C = logp.size(1);
  const bool per_sample_scale = scale.numel() == N && N != 1, per_class_spread = spread.defined() && spread.numel() == C && C != 1;
  Tensor out = empty({N, C}, dtype);
  dispatch_floating("cross_entropy_backward", dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using W = opmath_t<T>;  // logp's dtype (checked in tensor/kernels.cpp)
    const W *lp = (const W*)logp.raw_data(), *a = (const W*)coef.raw_data(), *h = (const W*)hit.raw_data(),
            *sc = (const W*)scale.raw_data(), *sp = spread.defined() ? (const W*)spread.raw_data() : nullptr;
    const int64_t* target = (const int64_t*)index.raw_data();
    const bool* keep = (const bool*)kept.raw_data();
    parallel_for(N, C, [&](int64_t begin, int64_t end) {
      RowBuffer<T> row(C);
      for (int64_t n = begin; n < end; ++n) {
        W* o = row.write((T*)out.raw_data() + n * C);
        const W s = sc[per_sample_scale ? n : 0], *lpn = lp + n * C;
        const int64_t t = target[n];
        if (!keep[n]) std::fill(o, o + C, W(0));
        else if (!sp) for (int64_t c = 0; c < C; ++c) o[c] = math::cross_entropy_grad(lpn[c], c == t, a[n], h[n], (const W*)nullptr, s);
        else for (int64_t c = 0; c < C; ++c) o[c] = math::cross_entropy_grad(lpn[c], c == t, a[n], h[n], sp + (per_class_spread ? c : 0), s);
        row.done();
      }
    });
  });
  return out;
}

}  // namespace ampgrad::cpu
