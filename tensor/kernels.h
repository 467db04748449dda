// kernels.h — THE list of primitives a backend implements. Nothing here is differentiable:
// these are plain functions of tensors that dispatch on device, then on dtype.
// autograd/ builds every op (forward and backward) from them; adding a backend means
// implementing exactly this list (tensor/cpu/*.cpp today, tensor/cuda/*.cu beside them).
//
// Conventions: inputs of a binary/ternary kernel share one dtype (autograd promotes first);
// outputs are freshly allocated and contiguous; half types compute in float32 and round once
// on store. Shape letters: B batch, M/N/K matrix dims, N C H W images, R reduced length.
#pragma once
#include <optional>
#include <utility>

#include "tensor/tensor.h"

namespace ampgrad::kernels {

enum class Unary : uint8_t { neg, exp, log, sqrt, abs, tanh, sigmoid, relu, gelu };
enum class Binary : uint8_t {
  add, sub, mul, div,
  eq, ne, lt, le, gt, ge,           // comparisons: output bool
  relu_backward,                    // (grad, x) -> grad * (x > 0)
  gelu_backward,                    // (grad, x) -> grad * gelu'(x)
};
const char* unary_name(Unary op);
const char* binary_name(Binary op);

// ---- elementwise ----
Tensor unary(Unary op, const Tensor& x);
Tensor pow_scalar(const Tensor& x, double exponent);
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi);
Tensor binary(Binary op, const Tensor& a, const Tensor& b);             // broadcasting
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);      // cond bool, broadcasting
void copy_(const Tensor& dst, const Tensor& src);  // strided; broadcasts src; casts dtype; crosses devices
void fill_(const Tensor& dst, double value);
void axpy_(const Tensor& y, const Tensor& x, double alpha);  // y += alpha * x (same shape)
void scale_(const Tensor& y, double factor);                 // y *= factor

// ---- reductions (accumulate in float32 for half, the dtype itself otherwise) ----
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim);  // bool/int64 -> int64
// values and int64 indices of the max (or min) along `dim`; first index on ties
std::pair<Tensor, Tensor> max_dim(const Tensor& x, int64_t dim, bool keepdim, bool is_min);

// ---- indexing along one dim (index is int64, same rank as x) ----
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// zeros(shape) with src added at index along dim
Tensor scatter_add(const Shape& shape, int64_t dim, const Tensor& index, const Tensor& src);

// ---- matrix multiply: a (B, M, K) or (M, K), b likewise -> (B, M, N) or (M, N).
// Half inputs multiply with float32 accumulation and one rounding of the output, like tensor
// cores. Transposed (column-major) operands are read in place, without a copy.
Tensor bmm(const Tensor& a, const Tensor& b);

// ---- softmax family along the last dim ----
Tensor softmax_lastdim(const Tensor& x, bool log);

// ---- images (N, C, H, W) ----
// im2col: (N, C, H, W) -> (N*Ho*Wo, C*kh*kw) rows of patches; col2im is its adjoint (adds).
Tensor im2col(const Tensor& x, int64_t kh, int64_t kw, int64_t stride, int64_t pad);
Tensor col2im(const Tensor& cols, const Shape& x_shape, int64_t kh, int64_t kw, int64_t stride, int64_t pad);
// max pooling: returns values (N, C, Ho, Wo) and the int64 flat index (into H*W) of each max
std::pair<Tensor, Tensor> max_pool2d(const Tensor& x, int64_t k, int64_t stride);

}  // namespace ampgrad::kernels
