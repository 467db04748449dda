// grad_health.h — what float16 would do to a set of gradient values: how many are zero, how
// many would land in float16's subnormal range (losing precision), how many would flush to
// zero, how many would overflow. Evaluated on the true (float32) gradient times a scale, so
// the same gradients can be shown before and after loss scaling. A teaching instrument.
//
//   auto h = amp::grad_health(w.grad(), 1.0);       // unscaled: 40% would flush to zero
//   auto s = amp::grad_health(w.grad(), 65536.0);   // scaled: none would
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>

#include "tensor/tensor.h"

namespace ampgrad::amp {

struct GradHealth {
  int64_t numel = 0;
  double zero = 0;        // fraction exactly zero already
  double subnormal = 0;   // 2^-25 < |g·scale| < 2^-14: a float16 subnormal, with fewer mantissa bits
  double flushed = 0;     // 0 < |g·scale| <= 2^-25: rounds to zero in float16
  double overflow = 0;    // |g·scale| > 65504, or inf/NaN: float16 cannot hold it
};

GradHealth grad_health(const Tensor& grad, double scale = 1.0);
void print_grad_health(std::ostream& os, const std::string& name, const GradHealth& before, const GradHealth& after);

}  // namespace ampgrad::amp
