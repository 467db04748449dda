// ops.h — every differentiable op of the library, as free functions (PyTorch's names).
// Each is defined in autograd/<family>.cpp in three visible steps: autocast its inputs through
// the policy table (amp/policy.h), call the kernel (tensor/kernels.h), record the backward
// written right beside it. Shape letters: N batch, C classes/channels, D features.
//
//   Tensor logits = linear(x, w, b);                       // (N, C)
//   Tensor loss = cross_entropy(logits, target);          // 0-d, float32 under autocast
//   loss.backward();
#pragma once
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "tensor/random.h"
#include "tensor/tensor.h"

namespace ampgrad {

// A number beside a tensor in an op (x * 2, 1.5 - x), as PyTorch's Scalar: it remembers whether
// it was written as an integer, which decides the result type for an integer or bool tensor:
// int64 for x * 2, float32 for x * 2.0. A floating tensor keeps its own dtype either way.
struct Scalar {
  double value;
  bool integral;
  template <class T>
    requires(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
  Scalar(T v) : value(double(v)), integral(std::is_integral_v<T>) {}
};

// ---- elementwise (broadcasting; mixed dtypes promote as in PyTorch) ----
// The plain ones come from tensor/ops.def: for every UNARY op (neg, exp, log, sqrt, relu, ...)
// Tensor name(const Tensor& x) followed by its scalar arguments, as its line declares them
// (ARG(double, negative_slope, 0.01) gives `double negative_slope = 0.01`):
//   Tensor pow(const Tensor& x, double exponent);
//   Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);  // a float bound makes an integer x float32
// and Tensor name(const Tensor& a, const Tensor& b) for add, sub, mul, div and the comparisons
// (eq, ne, lt, le, gt, ge: bool outputs, no gradient).
#define ARG(type, name, ...) , type name __VA_OPT__(= __VA_ARGS__)
#define UNARY(name, cuda, cpu, args, ...) Tensor name(const Tensor& x AMPGRAD_ARGS args);
#define BINARY_KERNEL(name, Functor, cuda, cpu) Tensor name(const Tensor& a, const Tensor& b);
#include "tensor/ops.def"
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// The scalar as a 0-d tensor on like's device, in the dtype the rule above gives.
Tensor scalar_like(Scalar value, const Tensor& like);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);  // true division: x / 2 is float32 for an int64 x
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);

// ---- reductions (empty dims = all dims) ----
Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor max(const Tensor& x);  // over all elements
Tensor min(const Tensor& x);
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);  // (values, indices)
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = {}, bool keepdim = false);

// ---- shape and views (views share storage; reshape copies only when it must) ----
Tensor reshape(const Tensor& x, const Shape& shape);  // one dim may be -1
Tensor view(const Tensor& x, const Shape& shape);     // never copies; errors if it would have to
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor permute(const Tensor& x, const Shape& dims);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
// x's slices index[0], index[1], ... along dim (index a 1-D int64 list): a copy, whose gradient
// adds each slice's back into the slice it came from
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor expand(const Tensor& x, const Shape& shape);  // -1 keeps a dim
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor squeeze(const Tensor& x, std::optional<int64_t> dim = {});
Tensor contiguous(const Tensor& x);
Tensor clone(const Tensor& x);
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);

// ---- casts: differentiable; the gradient is cast back to the input's dtype/device ----
Tensor to(const Tensor& x, DType dtype);
Tensor to(const Tensor& x, Device device);

// ---- linear algebra ----
Tensor matmul(const Tensor& a, const Tensor& b);  // 1-D, 2-D, batched 3-D (a 2-D b broadcasts)
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});  // x (N, Din), weight (Dout, Din)

// ---- torch.mm and torch.bmm: matmul under PyTorch's names and its stricter shape rules ----
// One rank each and no broadcasting, so a wrong shape is an error naming both, not another product.
Tensor mm(const Tensor& a, const Tensor& b);   // a (M, K) @ b (K, N) -> (M, N)
Tensor bmm(const Tensor& a, const Tensor& b);  // a (B, M, K) @ b (B, K, N) -> (B, M, N)

// ---- neural-network ops ----
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// softmax(scale · q kᵀ) v as one op (PyTorch's scaled_dot_product_attention without a mask tensor or
// dropout: nn::functional's takes those). is_causal: query i attends to keys 0..i (top-left aligned
// when L ≠ S); scale defaults to 1/√E. q (..., L, E), k (..., S, E), v (..., S, Ev) -> (..., L, Ev)
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal = true, std::optional<double> scale = {});
// The losses, as PyTorch's: `reduction` gives one loss per sample, their mean or their sum.
// For the class losses, logits / log_probs (N, C) and int64 targets (N): `weight` (C) weighs
// each class, and a mean divides by the summed weights of the targets; a target equal to
// `ignore_index` adds nothing and does not count.
enum class Reduction { None, Mean, Sum };
struct CrossEntropyOptions {
  Tensor weight = {};
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
  double label_smoothing = 0.0;
};
struct NLLLossOptions {
  Tensor weight = {};
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
};
// Fused log-softmax + NLL.
//   cross_entropy(logits, y, {.ignore_index = 0, .label_smoothing = 0.1})
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options = {});
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const NLLLossOptions& options = {});
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// Binary cross-entropy over elements (multi-label outputs): input and target of one shape, the
// target each element's probability of class 1. `weight` weighs each element's loss and
// `pos_weight` its positive part; both broadcast against the input and take no gradient.
struct BCEOptions {
  Tensor weight = {};
  Reduction reduction = Reduction::Mean;
};
struct BCEWithLogitsOptions {
  Tensor weight = {};
  Tensor pos_weight = {};
  Reduction reduction = Reduction::Mean;
};
// input: probabilities in [0, 1]. Refused under CUDA autocast, as in PyTorch (its banned row in tensor/ops.def; amp::why_banned says why).
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const BCEOptions& options = {});
// input: logits, the sigmoid fused in: exact where a 16-bit sigmoid would round to 0 or 1.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const BCEWithLogitsOptions& options = {});
// x (N, Cin, H, W), weight (Cout, Cin, kh, kw), bias (Cout) -> (N, Cout, Ho, Wo)
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, int64_t stride = 1, int64_t padding = 0);
Tensor max_pool2d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride = {});
// normalises over the trailing dims of normalized_shape; weight/bias may be undefined
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5);
// normalises each channel (dim 1) of x (N, C, ...): with the batch's statistics when training
// (and then moves running_mean/var towards them by momentum, if given), with running_mean/var
// when not. Every (C) tensor may be undefined but the running pair when not training.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight = {}, const Tensor& bias = {},
                  bool training = false, double momentum = 0.1, double eps = 1e-5);
// normalises each sample's channels (dim 1 of x (N, C, ...)) in num_groups groups of C/num_groups
// channels, each over its channels and all their positions; weight/bias (C) may be undefined
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5);
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);
// int64 indices of any shape (...), weight (V, D) -> (..., D): the rows the indices name
Tensor embedding(const Tensor& indices, const Tensor& weight);

}  // namespace ampgrad
