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

template <class A> AMPGRAD_HD inline A relu(A x) { return x > A(0) || x != x ? x : A(0); }  // PyTorch's clamp_min(x, 0): NaN stays NaN

// ---- exp, log, log1p, tanh, sigmoid and the normal CDF (gelu) for float, written to vectorise:
// no library calls and no branch a select cannot replace, so the CPU's loops run them 8 at a time
// (AVX2); half inputs compute in them too and round once. Every multiply-add is written as mad(),
// one rounding where the CPU has FMA, so no -ffp-contract flag changes a value, and CUDA runs
// the same functions to the same bits (its own expf/logf would be no faster for a memory-bound
// kernel, and the CPU tests would no longer cover them). GCC turns the selects into blends only
// without -ftrapping-math, which the CPU kernels calling them are compiled without
// (CMakeLists.txt). Their max ulp error against float64 over all of float32: docs/results.md,
// asserted by tests/test_vecmath.cpp. double keeps the C library's (the templates at the end).

AMPGRAD_HD inline float mad(float a, float b, float c) {
#if defined(__CUDA_ARCH__) || defined(__FMA__)
  return fmaf(a, b, c);
#else
  return a * b + c;  // no FMA unit: no compiler could fuse it either
#endif
}
// c₀·xⁿ + c₁·xⁿ⁻¹ + … + cₙ by Horner's rule, one mad per coefficient, unrolled by the compiler.
AMPGRAD_HD inline float horner(float x, float c) { return c; }
template <class... C> AMPGRAD_HD inline float horner(float x, float c0, float c1, C... c) { return horner(x, mad(c0, x, c1), c...); }
AMPGRAD_HD inline float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
AMPGRAD_HD inline uint32_t to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
AMPGRAD_HD inline float pow2i(int k) { return from_bits(uint32_t(k + 127) << 23); }  // 2^k, k in [-126, 127]

// e^x = 2^n · e^r with n = round(x / ln 2), |r| ≤ ln2 / 2 (ln 2 split in two, Cody and Waite's
// reduction), and e^r by its Taylor series to r⁷ (the first term left out is under 1e-8 of the sum).
// 2^n is applied as two factors, each a normal float for n in [-150, 128], so the product rounds
// to a subnormal, to 0 or to inf just where e^x does. A NaN stays NaN through r.
AMPGRAD_HD inline float exp_vectorised(float x) {
  const float xc = x < -104.0f ? -104.0f : x > 89.0f ? 89.0f : x;
  const float n = rintf(xc * 1.44269504088896341f);
  const float r = mad(-n, 1.42860676533018e-06f, mad(-n, 0.693145751953125f, xc));
  const float p = horner(r, 1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f);
  const int k = int(n == n ? n : 0.0f), k1 = k / 2;
  return p * pow2i(k1) * pow2i(k - k1);
}

// ln x = e · ln 2 + ln(1 + f), with x = (1 + f) · 2^e and 1 + f in [√½, √2), and ln(1 + f) =
// f − f²/2 + f³ · P(f), P Cephes' logf polynomial (Eigen's plog uses it too); ln 2 in two parts.
// A subnormal x is scaled by 2^23 first. 0 gives −inf, a negative x NaN, inf inf.
AMPGRAD_HD inline float log_vectorised(float x) {
  const bool subnormal = x < 1.17549435e-38f;
  const uint32_t u = to_bits(subnormal ? x * 8388608.0f : x);
  const float m = from_bits((u & 0x007fffffu) | 0x3f000000u);  // x = m · 2^e, m in [½, 1)
  const bool low = m < 0.707106781186547524f;
  const float f = low ? m + m - 1.0f : m - 1.0f, z = f * f;
  const float e = float(int(u >> 23) - 126 - (subnormal ? 23 : 0) - (low ? 1 : 0));
  const float p = horner(f, 7.0376836292e-2f, -1.1514610310e-1f, 1.1676998740e-1f, -1.2420140846e-1f, 1.4249322787e-1f,
                         -1.6668057665e-1f, 2.0000714765e-1f, -2.4999993993e-1f, 3.3333331174e-1f);
  const float y = mad(e, 0.693359375f, f + mad(-0.5f, z, mad(e, -2.12194440e-4f, z * f * p)));
  return x == INFINITY ? x : x > 0 ? y : x == 0 ? -INFINITY : NAN;
}

// ln(1 + x) = ln u + (x − (u − 1)) / u, u = 1 + x rounded: the second term is the rounding of u,
// which ln u alone would lose for small x. Where u is 1, ln(1 + x) is x (its sign kept).
AMPGRAD_HD inline float log1p_vectorised(float x) {
  const float u = 1.0f + x, y = log_vectorised(u) + (x - (u - 1.0f)) / u;
  return u == 1.0f || x == INFINITY ? x : u == 0 ? -INFINITY : y;
}

// tanh |x| as Cephes' tanhf: an odd polynomial below 0.625, else 1 − 2 / (e^{2|x|} + 1), which
// is 1 once e^{2|x|} is inf; then x's sign (so −0 stays −0, a NaN stays NaN).
AMPGRAD_HD inline float tanh_vectorised(float x) {
  const float a = fabsf(x), z = a * a;
  const float p = horner(z, -5.70498872745e-3f, 2.06390887954e-2f, -5.37397155531e-2f, 1.33314422036e-1f, -3.33332819422e-1f);
  return copysignf(a < 0.625f ? mad(a * z, p, a) : 1.0f - 2.0f / (exp_vectorised(a + a) + 1.0f), x);
}

// σ(x) from e = e^{−|x|}, which never overflows: 1 / (1 + e) for x ≥ 0, e / (1 + e) below, so the
// negative tail keeps its relative precision down to the subnormals.
AMPGRAD_HD inline float sigmoid_vectorised(float x) {
  const float e = exp_vectorised(-fabsf(x)), s = 1.0f / (1.0f + e);
  return x >= 0 ? s : e * s;
}

// e^(−x²/2 + p), its exponent exact to the last bit, which at −x²/2 = −80 is worth 2^−17 of the
// result: the roundings of x² (recovered by an FMA) and of the sum (by Knuth's two-sum) are put
// back as the factor 1 + err. |x| is held at 15, past which the result is 0 in float32 (for
// |p| < 4), so x² stays finite; a NaN stays NaN.
AMPGRAD_HD inline float exp_minus_half_square(float x, float p) {
  const float a = fabsf(x) > 15.0f ? 15.0f : fabsf(x), a2 = a * a, a2_err = mad(a, a, -a2);
  const float h = -0.5f * a2, e = h + p, e_h = e - h, e_err = (h - (e - e_h)) + (p - e_h);  // e + e_err = h + p exactly
  return exp_vectorised(e) * (1.0f + mad(-0.5f, a2_err, e_err));
}

// Φ(x), the standard normal CDF, as ½·erfc(|x|/√2) on the side where it is small and one minus
// that on the other, so the negative tail keeps its relative precision (1 + erf(x/√2) cancels to 0
// there: Φ(-6) would be 0, not 1e-9). erfc(z) = t · e^(−z² + P(t)), t = 1 / (1 + z/2), where P, of
// degree 9, is ampgrad's own least-squares fit of ln(erfc(z)/t) + z² at 400 Chebyshev points of
// t in [1/6.5, 1] (z up to 11, past which Φ is 0 or 1 in float32).
AMPGRAD_HD inline float normal_cdf(float x) {
  const float t = 1.0f / mad(0.5f * 0.70710678118654752f, fabsf(x), 1.0f);
  // (t⁰'s, the fit's -1.26546872, nudged by an ulp so that P(1) = 0 exactly: Φ(0) = ½)
  const float p = horner(t, 0.15217128396034241f, -0.72015756368637085f, 1.2489850521087646f, -0.81853657960891724f, 0.020350491628050804f,
                         -0.051861517131328583f, 0.052532698959112167f, 0.38292455673217773f, 0.99906039237976074f, -1.2654688358306885f);
  const float half_erfc = 0.5f * t * exp_minus_half_square(x, p);
  return x >= 0 ? 1.0f - half_erfc : half_erfc;
}

// The functors' entry points (tensor/elementwise_ops.h): float on the functions above, double on
// the C library's. gelu is PyTorch's exact (erf) form, approximate='none':
//   gelu(x) = x · Φ(x),   gelu'(x) = Φ(x) + x · φ(x),   φ(x) = e^(−x²/2) / √(2π)
template <class A> inline constexpr bool is_f32 = std::is_same_v<A, float>;
template <class A> AMPGRAD_HD inline A exp(A x) { if constexpr (is_f32<A>) return exp_vectorised(x); else return std::exp(x); }
template <class A> AMPGRAD_HD inline A log(A x) { if constexpr (is_f32<A>) return log_vectorised(x); else return std::log(x); }
template <class A> AMPGRAD_HD inline A log1p(A x) { if constexpr (is_f32<A>) return log1p_vectorised(x); else return std::log1p(x); }
template <class A> AMPGRAD_HD inline A tanh(A x) { if constexpr (is_f32<A>) return tanh_vectorised(x); else return std::tanh(x); }
template <class A> AMPGRAD_HD inline A sigmoid(A x) { if constexpr (is_f32<A>) return sigmoid_vectorised(x); else return A(1) / (A(1) + std::exp(-x)); }
template <class A> AMPGRAD_HD inline A normal_cdf(A x) { return A(0.5) * std::erfc(x * A(-0.70710678118654752440)); }
template <class A> AMPGRAD_HD inline A gelu(A x) { return x * normal_cdf(x); }
template <class A> AMPGRAD_HD inline A gelu_grad(A x) {
  if constexpr (is_f32<A>) return mad(x, exp_minus_half_square(x, 0.0f) * 0.39894228040143267794f, normal_cdf(x));
  else return normal_cdf(x) + x * (std::exp(A(-0.5) * x * x) * A(0.39894228040143267794));
}

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
// larger value; a tie keeps the earlier element, so both backends return the same index. Bitwise
// | and &, not || and &&: where a window's maximum falls is a coin toss a branch would lose.
template <class A> AMPGRAD_HD inline bool pool_beats(A v, A best) { return (v > best) | ((v != v) & (best == best)); }

}  // namespace ampgrad::math
