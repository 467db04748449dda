// float8.h — FP8 training, as torchao's Float8Linear and Transformer Engine's Linear do it with
// "current" (dynamic, per-tensor) scaling: each GEMM operand of a linear is narrowed to a
// float8 type with a scale of its own, chosen so its largest magnitude lands on the type's
// largest finite value, and the GEMM multiplies the 8-bit values and applies both scales once.
// The arithmetic is an FP8 GEMM's with float32 accumulation, emulated: products of 8-bit values
// are exact in float32, and are summed in float32 (kernels::gemm of bfloat16 copies, which hold
// float8 values exactly, into float32), so a CPU run gives the numerics of FP8 training, at a
// bfloat16 GEMM's speed, not an FP8 one's.
//
//   float8_autocast f8(DeviceType::CPU);      // HYBRID: e4m3 forward, e5m2 gradients
//   Tensor y = linear(x, w, b);                     // runs as float8_linear (the linear route)
//
//   Float8Tensor q = to_float8(x, kFloat8_e4m3fn);  // x ≈ q.data · q.inv_scale
#pragma once
#include "amp/autocast.h"
#include "tensor/tensor.h"

namespace ampgrad {

// Which float8 dtype each GEMM operand of a linear is narrowed to. The default is Transformer
// Engine's HYBRID format: e4m3 (precision) for activations and weights, e5m2 (range) for
// gradients. {kFloat8_e4m3fn, kFloat8_e4m3fn} is its E4M3 format; those two are the recipes
// there are (the forward multiplies two forward operands, and no FP8 GEMM takes e5m2 × e5m2).
struct Float8Recipe {
  DType forward = kFloat8_e4m3fn;   // x and W in y = x Wᵀ
  DType backward = kFloat8_e5m2;    // dL/dy in dx = dy W and dW = dyᵀ x
};

// RAII, as Transformer Engine's fp8_autocast: while on for a device type, every linear (the op,
// so nn::Linear too) on it runs as float8_linear with this recipe, through amp/autocast.h's
// linear route. It nests with autocast, which then picks the linear's output dtype and runs
// every other op; amp::suspend (backward) turns it off with autocast.
class float8_autocast {
 public:
  explicit float8_autocast(DeviceType device, Float8Recipe recipe = {}, bool enabled = true);

 private:
  amp::LinearRouteGuard route_;
};

// A tensor narrowed to float8, and the factor that brings it back: x ≈ data · inv_scale.
struct Float8Tensor {
  Tensor data;       // x's shape, a float8 dtype
  Tensor inv_scale;  // float32, 0-d: amax(|x|) / the type's largest finite value
};

// Dynamic scaling: scale = max_finite / amax(|x|) in float32 (amax at least 1e-12, so an
// all-zero x gets a finite scale, as torchao's), then x · scale clamped to ±max_finite (a
// saturating cast) and rounded to nearest even. An inf or NaN in x leaves NaN in the result
// (the scale becomes 0 or NaN), for a GradScaler downstream to find. Not differentiable: the
// ops below use it.
Float8Tensor to_float8(const Tensor& x, DType float8_dtype);

// a (M, K) @ b (K, N) of float8 tensors, times scale_a · scale_b (0-d float32 tensors, the
// operands' inv_scales), rounded once to out_dtype: torch._scaled_mm. As cuBLASLt's FP8 GEMM,
// it takes e4m3 × e4m3, e4m3 × e5m2 and e5m2 × e4m3, not e5m2 × e5m2. Not differentiable.
Tensor scaled_mm(const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b, DType out_dtype);

// y = x Wᵀ + b with both GEMM operands narrowed to recipe.forward, and in backward the incoming
// gradient to recipe.backward: dx = dy W and dW = dyᵀ x are scaled_mm's too, from the float8 x
// and W saved by the forward (one byte an element). The bias is added, and its gradient summed,
// in the output's dtype: autocast's where autocast is on (and neither is float64), else that of
// x and W promoted.
// x (..., Din), weight (Dout, Din), bias (Dout) or undefined. The backward calls kernels, so it
// is once differentiable. linear() runs this under float8_autocast.
Tensor float8_linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, const Float8Recipe& recipe = {});

}  // namespace ampgrad
