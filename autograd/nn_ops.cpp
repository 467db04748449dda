// nn_ops.cpp — softmax family, losses, convolution, pooling, layer norm, dropout.
// Softmax + cross-entropy is fused by hand (its gradient is simply softmax − one-hot); layer
// norm, mse and dropout are composed from the library's own ops, so their backward comes free.
// Letters: N batch, C classes or channels, H W image, k kernel.
#include <cmath>

#include "autograd/op_support.h"

namespace ampgrad {

// ---- softmax / log_softmax along `dim` (moved last for the kernel and back)

static Tensor softmax_impl(Op op, const Tensor& x_in, int64_t dim, bool log) {
  auto [x] = autocast(op, x_in);
  const char* name = log ? "log_softmax" : "softmax";
  const int64_t n = std::max<int64_t>(x.dim(), 1);  // a 0-d x takes dim 0 or -1, as in PyTorch
  AMPGRAD_CHECK(dim >= -n && dim < n, name << ": dim " << dim << " out of range for shape " << shape_str(x.shape()));
  if (x.dim() == 0) return softmax_impl(op, x.reshape({1}), 0, log).reshape({});
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  const int64_t last = x.dim() - 1;
  Tensor moved = d == last ? x : x.detach().transpose(d, last);
  Tensor out = kernels::softmax_lastdim(moved, log);
  if (d != last) out = out.transpose(d, last);
  record(name, out, {x}, [y = Saved(out), d, log](const Tensor& g, const Needs&) {
    if (log) return grads(g - exp(y) * sum(g, {d}, true));  // d log_softmax: g − softmax · Σg
    return grads(y * (g - sum(g * y, {d}, true)));           // d softmax: y (g − Σ g y)
  });
  return out;
}
Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(Op::softmax, x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(Op::log_softmax, x, dim, true); }

// ---- losses over (N, C) scores and int64 class targets (N)

static void check_targets(const char* op, const Tensor& scores, const Tensor& target) {
  AMPGRAD_CHECK(scores.dim() == 2, op << ": expected (N, C) inputs, got shape " << shape_str(scores.shape()));
  AMPGRAD_CHECK(target.dtype() == kInt64, op << ": target must be int64 class indices, got " << dtype_name(target.dtype()));
  AMPGRAD_CHECK(target.dim() == 1 && target.size(0) == scores.size(0),
                op << ": target of shape " << shape_str(target.shape()) << " does not match input of shape " << shape_str(scores.shape()));
  // On the CPU a bad label is checked here, for a clear error instead of a read out of bounds.
  // On a GPU that would be a host sync per loss: there the gather kernel checks each index on
  // the device and aborts with the same message, as PyTorch's device-side assert does.
  if (target.numel() == 0 || !target.device().is_cpu()) return;
  int64_t lo = kernels::max_dim(target, 0, false, true).first.item<int64_t>();
  int64_t hi = kernels::max_dim(target, 0, false, false).first.item<int64_t>();
  AMPGRAD_CHECK(lo >= 0 && hi < scores.size(1), op << ": target " << (lo < 0 ? lo : hi) << " is out of bounds for " << scores.size(1) << " classes");
}

// (N, C) one-hot of target in dtype/device of `like`
static Tensor one_hot(const Tensor& target, const Tensor& like) {
  Tensor idx = target.unsqueeze(1);
  return kernels::scatter_add(like.shape(), 1, idx, ones(idx.shape(), TensorOptions(like.dtype()).device(like.device())));
}

// loss = mean_n [ (1−ε)·(−log p[n, t_n]) + ε/C · Σ_c −log p[n, c] ],  p = softmax(logits)
// d loss / d logits = (p − ((1−ε)·onehot + ε/C)) / N
Tensor cross_entropy(const Tensor& logits_in, const Tensor& target, double eps) {
  auto [logits] = autocast(Op::cross_entropy, logits_in);
  check_targets("cross_entropy", logits, target);
  AMPGRAD_CHECK(eps >= 0 && eps <= 1, "cross_entropy: label_smoothing must be in [0, 1], got " << eps);
  const int64_t N = logits.size(0), C = logits.size(1);
  Tensor logp = kernels::softmax_lastdim(logits, true);  // (N, C)
  Tensor picked = kernels::gather(logp, 1, target.unsqueeze(1));     // (N, 1)
  Tensor loss = kernels::sum(widened(picked), {}, false);
  kernels::scale_(loss, -(1 - eps) / N);
  if (eps > 0) kernels::axpy_(loss, kernels::sum(widened(logp), {}, false), -eps / (C * (double)N));
  loss = rounded_to(loss, logits.dtype());
  record("cross_entropy", loss, {logits}, [logp, target = Saved(target), eps, N, C](const Tensor& g, const Needs&) {
    Tensor p = exp(logp), goal = one_hot(target, p) * (1 - eps);
    if (eps > 0) goal = goal + eps / C;
    return grads((p - goal) * scaled(g, 1.0 / N));
  });
  return loss;
}

// loss = −mean_n log_probs[n, t_n]
Tensor nll_loss(const Tensor& logp_in, const Tensor& target) {
  auto [logp] = autocast(Op::nll_loss, logp_in);
  check_targets("nll_loss", logp, target);
  const int64_t N = logp.size(0);
  Tensor loss = kernels::sum(widened(kernels::gather(logp, 1, target.unsqueeze(1))), {}, false);
  kernels::scale_(loss, -1.0 / N);
  loss = rounded_to(loss, logp.dtype());
  record("nll_loss", loss, {logp}, [target = Saved(target), shape = logp.shape(), N](const Tensor& g, const Needs&) {
    Tensor src = scaled(g, -1.0 / N).reshape({1, 1}).expand({N, 1}).contiguous();
    return grads(kernels::scatter_add(shape, 1, target.get().unsqueeze(1), src));
  });
  return loss;
}

Tensor mse_loss(const Tensor& input_in, const Tensor& target_in) {
  auto [input, target] = autocast(Op::mse_loss, input_in, target_in);
  AMPGRAD_CHECK(input.shape() == target.shape(), "mse_loss: input " << shape_str(input.shape()) << " and target " << shape_str(target.shape()) << " differ in shape");
  return mean(pow(input - target, 2));
}

// ---- convolution as im2col + GEMM
// x (N, Cin, H, W), weight (Cout, Cin, kh, kw) -> (N, Cout, Ho, Wo)
//   cols (N·Ho·Wo, Cin·kh·kw) = im2col(x);  out2 (N·Ho·Wo, Cout) = cols · W2ᵀ + b
//   backward: dW2 = G2ᵀ cols;  dcols = G2 W2 -> col2im -> dx;  db = Σ G2
Tensor conv2d(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, int64_t stride, int64_t pad) {
  auto [x, w, b] = autocast(Op::conv2d, x_in, w_in, b_in);
  AMPGRAD_CHECK(x.dim() == 4 && w.dim() == 4 && x.size(1) == w.size(1),
                "conv2d: input of shape " << shape_str(x.shape()) << " does not match weight of shape " << shape_str(w.shape()) << " (expected (N, Cin, H, W) and (Cout, Cin, kh, kw))");
  AMPGRAD_CHECK(x.dtype() == w.dtype() && (!b.defined() || b.dtype() == w.dtype()), "conv2d: input and weight dtypes differ (" << dtype_name(x.dtype()) << ", " << dtype_name(w.dtype()) << ")");
  AMPGRAD_CHECK(stride >= 1 && pad >= 0, "conv2d: stride must be >= 1 and padding >= 0, got " << stride << " and " << pad);
  AMPGRAD_CHECK(!b.defined() || (b.dim() == 1 && b.size(0) == w.size(0)), "conv2d: bias of shape " << shape_str(b.shape()) << " does not match weight " << shape_str(w.shape()));
  const int64_t N = x.size(0), Cout = w.size(0), kh = w.size(2), kw = w.size(3);
  Tensor cols = kernels::im2col(x, kh, kw, stride, pad);
  const int64_t Ho = kernels::window_out_size(x.size(2), kh, stride, pad), Wo = kernels::window_out_size(x.size(3), kw, stride, pad);
  Tensor w2 = w.detach().reshape({Cout, -1});  // a view of w: saved with w's version
  Tensor out2 = kernels::bmm(cols, w2.t());  // (N·Ho·Wo, Cout)
  if (b.defined()) kernels::axpy_(out2, b, 1.0);
  Tensor out = empty({N, Cout, Ho, Wo}, TensorOptions(x.dtype()).device(x.device()));
  kernels::copy_(out, out2.view({N, Ho, Wo, Cout}).permute({0, 3, 1, 2}));
  record("conv2d", out, {x, w, b}, [cols, w2 = Saved(w2), x_shape = x.shape(), w_shape = w.shape(), stride, pad](const Tensor& g, const Needs& need) {
    Tensor g2 = g.permute({0, 2, 3, 1}).contiguous().view({-1, w_shape[0]});  // (N·Ho·Wo, Cout)
    return grads(need[0] ? kernels::col2im(kernels::bmm(g2, w2), x_shape, w_shape[2], w_shape[3], stride, pad) : Tensor(),
                 need[1] ? kernels::bmm(g2.t(), cols).view(w_shape) : Tensor(),
                 need[2] ? kernels::sum(g2, {0}, false) : Tensor());
  });
  return out;
}

// x (N, C, H, W) -> (N, C, Ho, Wo); the gradient goes to the max of each window
Tensor max_pool2d(const Tensor& x_in, int64_t k, std::optional<int64_t> stride) {
  auto [x] = autocast(Op::max_pool2d, x_in);
  AMPGRAD_CHECK(k >= 1 && stride.value_or(k) >= 1, "max_pool2d: kernel_size and stride must be >= 1, got " << k << " and " << stride.value_or(k));
  auto [out, idx] = kernels::max_pool2d(x, k, stride.value_or(k));
  record("max_pool2d", out, {x}, [idx, x_shape = x.shape()](const Tensor& g, const Needs&) {
    const int64_t N = x_shape[0], C = x_shape[1];
    Tensor gx = kernels::scatter_add({N, C, x_shape[2] * x_shape[3]}, 2, idx.view({N, C, -1}), g.contiguous().view({N, C, -1}));
    return grads(gx.view(x_shape));
  });
  return out;
}

// y = (x − mean) / √(var + eps) · weight + bias, statistics over the trailing dims
Tensor layer_norm(const Tensor& x_in, const Shape& normalized_shape, const Tensor& w_in, const Tensor& b_in, double eps) {
  auto [x, w, b] = autocast(Op::layer_norm, x_in, w_in, b_in);
  const int64_t k = (int64_t)normalized_shape.size();
  AMPGRAD_CHECK(k >= 1 && x.dim() >= k && Shape(x.shape().end() - k, x.shape().end()) == normalized_shape,
                "layer_norm: normalized_shape " << shape_str(normalized_shape) << " does not match the trailing dims of input " << shape_str(x.shape()));
  for (const Tensor* p : {&w, &b})
    AMPGRAD_CHECK(!p->defined() || p->shape() == normalized_shape, "layer_norm: weight/bias of shape " << shape_str(p->shape()) << " must be " << shape_str(normalized_shape));
  Shape dims;
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) dims.push_back(d);
  // A float16/bfloat16 x is normalised in float32 and rounded once, as PyTorch's kernel does:
  // in float16 the square of 600 is already inf.
  const DType wide = is_half(x.dtype()) ? kFloat32 : x.dtype();
  Tensor xw = to(x, wide);
  Tensor mu = mean(xw, dims, true);
  Tensor xc = xw - mu;
  Tensor y = xc / sqrt(mean(xc * xc, dims, true) + eps);  // biased variance, as PyTorch
  if (w.defined()) y = y * to(w, wide);
  if (b.defined()) y = y + to(b, wide);
  return to(y, x.dtype());
}

// Zeroes each element with probability p and scales survivors by 1/(1−p) (train mode only).
Tensor dropout(const Tensor& x_in, double p, bool training, Generator* gen) {
  auto [x] = autocast(Op::dropout, x_in);
  AMPGRAD_CHECK(p >= 0 && p <= 1, "dropout: probability must be in [0, 1], got " << p);
  if (!training || p == 0) return x;
  if (p == 1) return x * 0.0;
  // drawn and compared in float32 or wider: in bfloat16, u >= 0.1 would keep 90.015% instead of 90%
  Tensor u = rand(x.shape(), TensorOptions(is_half(x.dtype()) ? kFloat32 : x.dtype()).device(x.device()), gen);
  Tensor keep = to(ge(u, scalar_like(p, u)), x.dtype());
  return x * scaled(keep, 1 / (1 - p));
}

}  // namespace ampgrad
