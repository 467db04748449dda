// scalar_math.h — scalar functions shared by the CPU and CUDA kernels, written once.
// Under nvcc they compile for the device too, so the CPU tests cover the CUDA arithmetic.
// Every function takes and returns the op's math type (float for half inputs).
#pragma once
#include <cmath>

#include "tensor/host_device.h"

namespace ampgrad::math {

using std::erf;
using std::exp;  // so float stays float: the std overloads, not C's double versions

template <class A> AMPGRAD_HD inline A sigmoid(A x) { return A(1) / (A(1) + exp(-x)); }
template <class A> AMPGRAD_HD inline A relu(A x) { return x > A(0) ? x : A(0); }

// gelu, exact (erf) form, as PyTorch's default approximate='none':
//   gelu(x) = x * Φ(x),   Φ(x) = (1 + erf(x / √2)) / 2
//   gelu'(x) = Φ(x) + x * φ(x),   φ(x) = exp(-x²/2) / √(2π)
template <class A> AMPGRAD_HD inline A gelu(A x) {
  return x * A(0.5) * (A(1) + erf(x * A(0.70710678118654752440)));
}
template <class A> AMPGRAD_HD inline A gelu_grad(A x) {
  A cdf = A(0.5) * (A(1) + erf(x * A(0.70710678118654752440)));
  A pdf = exp(A(-0.5) * x * x) * A(0.39894228040143267794);
  return cdf + x * pdf;
}

// max_pool2d's rule for v taking a window's lead from best: a NaN wins (the first one), then a
// larger value; a tie keeps the earlier element, so both backends return the same index.
template <class A> AMPGRAD_HD inline bool pool_beats(A v, A best) { return v > best || (v != v && best == best); }

}  // namespace ampgrad::math
