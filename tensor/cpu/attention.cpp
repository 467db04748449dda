// attention.cpp — scaled dot-product attention's softmax over rows of scores, with the causal
// mask applied inside the row loop (query i reads keys 0..i; the rest of its row is written as
// zeros, no mask tensor), and its backward. The GEMMs around it are matmul.cpp's.
// Letters: B batch (heads folded in), L queries, S keys; a row is one query's S scores.
#include <algorithm>
#include <cmath>

#include "tensor/cpu/loops.h"
#include "tensor/cpu/parallel.h"
#include "tensor/cpu/rows.h"
#include "tensor/kernels.h"
#include "tensor/scalar_math.h"

namespace ampgrad::cpu {
using namespace ampgrad::kernels;

namespace {
// e^x, the float one written without branches (scalar_math.h) so that a row's loop vectorises.
inline float row_exp(float x) { return math::exp_vectorised(x); }
inline double row_exp(double x) { return std::exp(x); }

// The keys query i sees: 0..i where causal (top-left aligned, as PyTorch's tril(ones(L, S))), else all S.
inline int64_t seen(int64_t r, int64_t L, int64_t S, bool causal) { return causal ? std::min(r % L + 1, S) : S; }
}  // namespace

// s (B, L, S) in A (float32, or float64 for float64) -> P (B, L, S) in out_dtype
Tensor attention_softmax(const Tensor& s_in, double scale, bool causal, DType out_dtype) {
  const Tensor s = contiguous_copy(s_in);
  Tensor out = empty(s.shape(), out_dtype);
  const int64_t L = s.size(1), S = s.size(2), rows = s.size(0) * L;
  dispatch_floating("attention_softmax", out_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    const A* x = (const A*)s.raw_data();
    T* p = (T*)out.raw_data();
    parallel_for(rows, S, [&](int64_t begin, int64_t end) {
      RowBuffer<T> row(S);
      for (int64_t r = begin; r < end; ++r) {
        const A* xr = x + r * S;
        A* e = row.write(p + r * S);
        const int64_t n = seen(r, L, S, causal);
        for (int64_t j = 0; j < n; ++j) e[j] = A(scale) * xr[j];
        A mx = n > 0 ? as_array(e, n).maxCoeff() : A(0);
        if (mx == -INFINITY) mx = 0;  // an all -inf row: exp(-inf - 0) = 0, and the row 0/0 = NaN, as softmax's
        for (int64_t j = 0; j < n; ++j) e[j] = row_exp(e[j] - mx);
        const A sum = lane_sum<A>(n, [&](int64_t j) { return e[j]; });
        for (int64_t j = 0; j < n; ++j) e[j] /= sum;
        std::fill(e + n, e + S, A(0));
        row.done();
      }
    });
  });
  return out;
}

// p (B, L, S) in T, dp (B, L, S) in A -> dS = scale·P ⊙ (dP − Σ_j P ⊙ dP) in T, zeros where masked
Tensor attention_softmax_backward(const Tensor& p_in, const Tensor& dp_in, double scale, bool causal) {
  const Tensor p = contiguous_copy(p_in), dp = contiguous_copy(dp_in);
  Tensor out = empty(p.shape(), p.dtype());
  const int64_t L = p.size(1), S = p.size(2), rows = p.size(0) * L;
  dispatch_floating("attention_softmax_backward", p.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    const T* pp = (const T*)p.raw_data();
    const A* g = (const A*)dp.raw_data();
    T* ds = (T*)out.raw_data();
    parallel_for(rows, S, [&](int64_t begin, int64_t end) {
      RowBuffer<T> in(S), out(S);
      for (int64_t r = begin; r < end; ++r) {
        const int64_t n = seen(r, L, S, causal), o = r * S;
        const A* pr = in.read(pp + o);
        A* d = out.write(ds + o);
        const A dot = lane_sum<A>(n, [&](int64_t j) { return pr[j] * g[o + j]; });
        for (int64_t j = 0; j < n; ++j) d[j] = A(scale) * pr[j] * (g[o + j] - dot);
        std::fill(d + n, d + S, A(0));
        out.done();
      }
    });
  });
  return out;
}

}  // namespace ampgrad::cpu
