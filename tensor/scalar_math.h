// scalar_math.h — scalar functions shared by the CPU and CUDA kernels, written once.
// Under nvcc they compile for the device too, so the CPU tests cover the CUDA arithmetic.
// Every function takes and returns the op's math type (float for half inputs).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tensor/host_device.h"

namespace ampgrad::math {

using std::erf;
using std::exp;  // so float stays float: the std overloads, not C's double versions

template <class A> AMPGRAD_HD inline A sigmoid(A x) { return A(1) / (A(1) + exp(-x)); }
template <class A> AMPGRAD_HD inline A relu(A x) { return x > A(0) || x != x ? x : A(0); }  // PyTorch's clamp_min(x, 0): NaN stays NaN

// ---- softmax cross-entropy's gradient at one element (tensor/primitives.inc): each product and
// sum rounded on its own, as the separate ops of its composite form round (autograd/nn_ops.cpp).
// On a GPU the _rn intrinsics keep nvcc from fusing a multiply into an add; on the CPU the
// caller is compiled with -ffp-contract=off (tensor/cpu/softmax.cpp), and must stay its only
// CPU caller: one compiled with contraction could leave the linker a fused copy to keep.
template <class A> AMPGRAD_HD inline A mul_rn(A a, A b) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same_v<A, float>) return __fmul_rn(a, b);
  else return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
template <class A> AMPGRAD_HD inline A add_rn(A a, A b) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same_v<A, float>) return __fadd_rn(a, b);
  else return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
template <class A> AMPGRAD_HD inline A sub_rn(A a, A b) { return add_rn(a, -b); }

// (exp(logp)·coef − (onehot·hit + spread))·scale, spread null without label smoothing
template <class A> AMPGRAD_HD inline A cross_entropy_grad(A logp, bool is_target, A coef, A hit, const A* spread, A scale) {
  A goal = mul_rn(A(is_target ? 1 : 0), hit);
  if (spread) goal = add_rn(goal, *spread);
  return mul_rn(sub_rn(mul_rn(exp(logp), coef), goal), scale);
}

// ---- exp and the normal CDF for float, written to vectorise: no library calls and no branch
// a select cannot replace, so the CPU's loops run them 8 at a time (AVX2). A contiguous run, a
// strided one (gathered, or one at a time) and a tail give the same values (a NaN's sign aside);
// CUDA runs the same functions, though nvcc fuses multiply-adds where GCC does not, so its last
// bits may differ. (GCC turns the selects into blends only without -ftrapping-math, which the CPU
// elementwise kernels are compiled without: CMakeLists.txt.) gelu's float path (float16 and
// bfloat16 compute in it too) is built on them; double keeps the C library's.

AMPGRAD_HD inline float pow2i(int k) {  // 2^k for k in [-126, 127], straight into the exponent bits
  const uint32_t bits = uint32_t(k + 127) << 23;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

// e^x = 2^n · e^r with n = round(x / ln 2), |r| ≤ ln2 / 2, and e^r by its Taylor series to r⁷ (the
// first term left out is under 1e-8 of the sum). ln 2 is split in two so that n · hi is exact.
// 2^n is applied as two factors, each a normal float for n in [-150, 128], so the product
// rounds to a subnormal, to 0 or to inf just where e^x does. A NaN stays NaN through r.
AMPGRAD_HD inline float exp_vectorised(float x) {
  const float xc = x < -104.0f ? -104.0f : x > 89.0f ? 89.0f : x;
  const float n = rintf(xc * 1.44269504088896341f);
  const float r = (xc - n * 0.693145751953125f) - n * 1.42860676533018e-06f;
  float p = 1.0f / 5040;  // Horner: ((1/7! · r + 1/6!) · r + … + 1) · r + 1
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int k = int(n == n ? n : 0.0f), k1 = k / 2;
  return p * pow2i(k1) * pow2i(k - k1);
}

// Φ(x), the standard normal CDF, as ½·erfc(|x|/√2) on the side where it is small and one minus
// that on the other, so the negative tail keeps its relative precision (1 + erf(x/√2) cancels to 0
// there: Φ(-6) would be 0, not 1e-9). erfc(z) = t · e^(−z² + P(t)), t = 1 / (1 + z/2), where P, of
// degree 9, is ampgrad's own least-squares fit of ln(erfc(z)/t) + z² at 400 Chebyshev points of
// t in [1/6.5, 1] (z up to 11, past which Φ is 0 or 1 in float32). Against Φ in 30 digits:
// within 1 ulp for x ≥ 4, 4 on [0, 4], 16 on [-4, 0] and 64 on [-9, -4], where rounding x²
// to float costs that much.
AMPGRAD_HD inline float normal_cdf(float x) {
  const float t = 1.0f / (1.0f + 0.5f * 0.70710678118654752f * fabsf(x));
  float p = 0.15217128396034241f;  // Horner, t⁹'s coefficient down to t⁰'s
  p = p * t - 0.72015756368637085f;
  p = p * t + 1.2489850521087646f;
  p = p * t - 0.81853657960891724f;
  p = p * t + 0.020350491628050804f;
  p = p * t - 0.051861517131328583f;
  p = p * t + 0.052532698959112167f;
  p = p * t + 0.38292455673217773f;
  p = p * t + 0.99906039237976074f;
  p = p * t - 1.2654688358306885f;  // (the fit's -1.26546872, nudged by an ulp so that P(1) = 0 exactly: Φ(0) = ½)
  const float half_erfc = 0.5f * t * exp_vectorised(-0.5f * x * x + p);
  return x >= 0 ? 1.0f - half_erfc : half_erfc;
}

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
// float: the same, on the vectorised functions above.
AMPGRAD_HD inline float gelu(float x) { return x * normal_cdf(x); }
AMPGRAD_HD inline float gelu_grad(float x) { return normal_cdf(x) + x * (exp_vectorised(-0.5f * x * x) * 0.39894228040143267794f); }

// A floating value into int64, one rule for both backends (C++ leaves NaN and out-of-range
// undefined; x86 gives INT64_MIN for all of them, CUDA saturates): truncate toward zero,
// saturate past the range, NaN to 0 — what CUDA's cvt.rzi.s64 does, so the GPU pays nothing.
template <class A> AMPGRAD_HD inline int64_t to_int64(A x) {
  if (x != x) return 0;
  if (x >= A(9223372036854775807.0)) return INT64_MAX;  // 2^63, the first float past the range
  if (x <= A(-9223372036854775808.0)) return INT64_MIN;
  return int64_t(x);
}

// max_pool2d's rule for v taking a window's lead from best: a NaN wins (the first one), then a
// larger value; a tie keeps the earlier element, so both backends return the same index.
template <class A> AMPGRAD_HD inline bool pool_beats(A v, A best) { return v > best || (v != v && best == best); }

}  // namespace ampgrad::math
