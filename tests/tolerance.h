// tolerance.h — how far a dtype's result may be from a reference, derived from the dtype's
// epsilon and the length of the sums inside: tolerances are derived, not found by trial.
#pragma once
#include <cmath>
#include <cstdint>

#include "tensor/dtype.h"

// Machine epsilon: the gap between 1 and the next value of the dtype.
inline double eps(ampgrad::DType t) {
  if (t == ampgrad::kFloat16) return std::ldexp(1.0, -10);
  if (t == ampgrad::kBFloat16) return std::ldexp(1.0, -7);
  if (t == ampgrad::kFloat64) return std::ldexp(1.0, -52);
  return std::ldexp(1.0, -23);
}
// Each primitive computes in float32 (float64 for float64) and rounds its result to the dtype
// once: at most one ulp of the dtype, eps·|y|, per rounding an output passes through (`steps`).
// A sum of R terms in another order than the reference's adds up to R·eps of the accumulator
// times the terms' scale. The scale is the larger of the output's and the inputs' magnitudes:
// a result that cancels to near 0 (x − max in log_softmax) still carries its terms' rounding.
//   |y − reference| <= (steps·eps(dtype) + R·eps(accumulator)) · scale
inline double tolerance(ampgrad::DType dtype, int steps, int64_t R, double scale) {
  const double accumulator = eps(dtype == ampgrad::kFloat64 ? ampgrad::kFloat64 : ampgrad::kFloat32);
  return (steps * eps(dtype) + double(R) * accumulator) * scale;
}

// CPU against CUDA, forward, in float16/bfloat16, for an op that computes in float32 and rounds
// `rounded` times to the dtype before its last rounding. The backends' float32 values differ by a
// float32 sum of R terms in another order (R·eps(float32)·scale) and by their libms and nvcc's fused
// multiply-adds (tens of float32 ulps at most: gelu's exp in tensor/scalar_math.h; 64 allowed).
// That moves the last rounding by one ulp of the dtype at the element itself, |y|, at most; each
// earlier rounding, by one at the scale. A float32 sum order is the one tolerance left: on the
// CPU alone, test_opinfo.cpp holds 16-bit outputs to float32's rounded once, bit for bit.
//   |cpu − cuda| <= eps(dtype)·|y| + (rounded·eps(dtype) + (R + 64)·eps(float32))·scale
inline double cpu_cuda_half_tolerance(ampgrad::DType dtype, int rounded, int64_t R, double y, double scale) {
  return eps(dtype) * std::abs(y) + (rounded * eps(dtype) + double(R + 64) * eps(ampgrad::kFloat32)) * scale;
}
