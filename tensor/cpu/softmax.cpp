// softmax.cpp — numerically stable softmax / log-softmax over the last dim (rows of length C).
// Subtracting the row max keeps exp() from overflowing; sums accumulate in float32 or wider.
#include <cmath>

#include "tensor/cpu/loops.h"
#include "tensor/cpu/parallel.h"
#include "tensor/kernels.h"

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
    const T* p = (const T*)x.raw_data();
    T* o = (T*)out.raw_data();
    parallel_for(rows, C, [&](int64_t begin, int64_t end) {  // rows are independent
      std::vector<A> row(C);
      for (int64_t r = begin; r < end; ++r) {
        A mx = -INFINITY;
        for (int64_t j = 0; j < C; ++j) { row[j] = A(p[r * C + j]); mx = std::max(mx, row[j]); }
        if (std::isinf(mx) && mx < 0) mx = 0;  // an all -inf row: exp(-inf - 0) = 0, and the row 0/0 = NaN, as PyTorch's
        A s = 0;
        if (log) {
          for (int64_t j = 0; j < C; ++j) s += std::exp(row[j] - mx);
          const A lse = mx + std::log(s);
          for (int64_t j = 0; j < C; ++j) o[r * C + j] = T(row[j] - lse);
        } else {  // each exp once, kept in the row for the division
          for (int64_t j = 0; j < C; ++j) s += row[j] = std::exp(row[j] - mx);
          for (int64_t j = 0; j < C; ++j) o[r * C + j] = T(row[j] / s);
        }
      }
    });
  });
  return out;
}

}  // namespace ampgrad::cpu
