// normalization.cpp — layer norm (each sample's features) and batch norm (each channel over the
// batch). Both normalise in float32 for float16/bfloat16 inputs and round once, keep their input
// and the statistics for backward, and write the backward's closed form beside the forward.
#include "autograd/checkpoint.h"
#include "autograd/grad_mode.h"
#include "autograd/op_support.h"

namespace ampgrad {

// Normalises each row of the trailing dims to mean 0 and variance 1, then scales and shifts it:
// y = (x − mean) · rstd · w + b, rstd = 1/√(var + eps). One fused kernel each way, as llm.c's
// layernorm_forward / layernorm_backward: the forward keeps x and each row's mean and rstd, and
// the backward rebuilds x̂ = (x − mean) · rstd from them. A float16/bfloat16 x is normalised in
// float32 and rounded once, as PyTorch's kernel does (in float16 the square of 600 is inf).
//   x (..., *normalized_shape), weight and bias (normalized_shape) -> y like x
Tensor layer_norm(const Tensor& x_in, const Shape& normalized_shape, const Tensor& w_in, const Tensor& b_in, double eps) {
  auto [x, w, b] = autocast(Op::layer_norm, x_in, w_in, b_in);
  const int64_t k = (int64_t)normalized_shape.size();
  AMPGRAD_CHECK(k >= 1 && x.dim() >= k && Shape(x.shape().end() - k, x.shape().end()) == normalized_shape,
                "layer_norm: normalized_shape " << shape_str(normalized_shape) << " does not match the trailing dims of input " << shape_str(x.shape()));
  for (const Tensor* p : {&w, &b})
    AMPGRAD_CHECK(!p->defined() || p->shape() == normalized_shape, "layer_norm: weight/bias of shape " << shape_str(p->shape()) << " must be " << shape_str(normalized_shape));
  const int64_t D = numel_of(normalized_shape);
  AMPGRAD_CHECK(D > 0, "layer_norm: normalized_shape " << shape_str(normalized_shape) << " has no elements");
  require_floating("layer_norm", x.dtype());
  // The kernel reads weight and bias in the math dtype; the casts are ops, so their gradients
  // come back in the parameters' own dtypes.
  const DType math = is_half(x.dtype()) ? kFloat32 : x.dtype();
  const Tensor wm = w.defined() ? to(w.reshape({D}), math) : w, bm = b.defined() ? to(b.reshape({D}), math) : b;
  const Tensor rows = x.reshape({-1, D});  // (R, D)
  auto [y, mean, rstd] = kernels::layer_norm(rows, wm, bm, eps);
  record("layer_norm", y, {rows, wm, bm}, [x = Saved(rows), mean, rstd, w = save_if(rows.requires_grad(), wm)](const Tensor& g, const Needs& need) {
    // x̂ and g in the math dtype, for the parameters' gradients (summed over the rows)
    auto x_hat = [&] {
      return kernel(kernels::Binary::mul, kernel(kernels::Binary::sub, widened(x.get()), mean.unsqueeze(1)), rstd.unsqueeze(1));
    };
    return grads(need[0] ? kernels::layer_norm_backward(g, x, mean, rstd, w) : Tensor(),
                 need[1] ? kernels::sum(kernel(kernels::Binary::mul, widened(g), x_hat()), {0}, false) : Tensor(),  // dw = Σ_rows g x̂
                 need[2] ? kernels::sum(widened(g), {0}, false) : Tensor());                                                  // db = Σ_rows g
  }, autograd::once_differentiable);
  return y.reshape(x.shape());
}

// Normalises each channel (dim 1) of x (N, C, ...) over the batch and every other dim, then scales
// and shifts it: y = (x − mean) · rstd · w + b, rstd = 1/√(var + eps), with the batch's mean and
// biased variance when training and the running estimates otherwise. Training also moves the
// running estimates towards the batch's (momentum), with the unbiased variance, as PyTorch does,
// except in a checkpointed region's rerun, which already took this batch in its first run.
// The statistics are float32 for a float16/bfloat16 x, and the running buffers keep their own
// dtype: under autocast a float16 activation meets float32 statistics, as cuDNN's batch norm
// does. Composed of the kernels on (C)-sized statistics broadcast over x, so every backend runs it.
//   x (N, C, ...), running_mean, running_var, weight, bias (C) or undefined -> y like x
Tensor batch_norm(const Tensor& x_in, const Tensor& running_mean, const Tensor& running_var, const Tensor& w_in, const Tensor& b_in,
                  bool training, double momentum, double eps) {
  auto [x, w, b] = autocast(Op::batch_norm, x_in, w_in, b_in);
  AMPGRAD_CHECK(x.dim() >= 2, "batch_norm: expected an input (N, C, ...) of at least 2 dims, got shape " << shape_str(x.shape()));
  require_floating("batch_norm", x.dtype());
  const int64_t C = x.size(1), M = C ? x.numel() / C : 0;  // M values per channel
  using Named = std::pair<const Tensor*, const char*>;
  for (auto [t, name] : {Named{&w, "weight"}, Named{&b, "bias"}, Named{&running_mean, "running_mean"}, Named{&running_var, "running_var"}}) {
    if (!t->defined()) continue;
    AMPGRAD_CHECK(t->shape() == Shape{C}, "batch_norm: input of shape " << shape_str(x.shape()) << " has " << C << " channels (dim 1), but "
                                                                        << name << " has shape " << shape_str(t->shape()));
    AMPGRAD_CHECK(t->device() == x.device(), "batch_norm: " << name << " on " << t->device().str() << ", input on " << x.device().str());
    require_floating("batch_norm", t->dtype());
  }
  AMPGRAD_CHECK(running_mean.defined() == running_var.defined(), "batch_norm: running_mean and running_var go together: give both or neither");
  AMPGRAD_CHECK(training || running_mean.defined(), "batch_norm: running_mean and running_var are needed when not training");
  AMPGRAD_CHECK(!training || M != 1, "batch_norm: expected more than 1 value per channel when training, got input of shape " << shape_str(x.shape()));

  using B = kernels::Binary;
  const DType math = is_half(x.dtype()) ? kFloat32 : x.dtype();
  Shape dims{0}, per_channel(x.dim(), 1);  // reduce over every dim but 1; (C) statistics broadcast as (1, C, 1, ...)
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  per_channel[1] = C;
  auto bc = [per_channel](const Tensor& c) { return c.reshape(per_channel); };
  auto per_channel_sum = [dims](const Tensor& t) { return kernels::sum(t, dims, false); };

  const Tensor xm = widened(x.detach());
  Tensor mean, var, xc;
  if (training) {
    mean = scaled(per_channel_sum(xm), 1.0 / double(M));
    xc = kernel(B::sub, xm, bc(mean));
    var = scaled(per_channel_sum(kernel(B::mul, xc, xc)), 1.0 / double(M));  // biased: what normalises this batch
    // unbiased: what estimates the population's (an empty batch has no statistics to give)
    if (running_mean.defined() && M > 0 && !in_checkpoint_rerun()) {
      NoGradGuard no_grad;
      Tensor(running_mean).mul_(1 - momentum).add_(mean, momentum);  // handles to the caller's buffers
      Tensor(running_var).mul_(1 - momentum).add_(var, momentum * double(M) / double(M - 1));
    }
  } else {
    // copies: a later training step updates the buffers in place, and this backward must not see it
    mean = running_mean.detach().to(math).clone();
    var = running_var.detach().to(math).clone();
    xc = kernel(B::sub, xm, bc(mean));
  }
  const Tensor rstd = kernel(B::div, scalar_like(1, var), kernel(kernels::Unary::sqrt, kernel(B::add, var, scalar_like(eps, var))));
  // Weight and bias in the math dtype; the casts are ops, so their gradients return in the parameters' dtypes.
  const Tensor wm = w.defined() ? to(w, math) : w, bm = b.defined() ? to(b, math) : b;
  Tensor y = kernel(B::mul, xc, bc(wm.defined() ? kernel(B::mul, rstd, wm) : rstd));
  if (bm.defined()) y = kernel(B::add, y, bc(bm));
  y = rounded_to(y, x.dtype());

  record("batch_norm", y, {x, wm, bm},
         [x = Saved(x), mean, rstd, w = save_if(x.requires_grad(), wm), bc, per_channel_sum, M, training](const Tensor& g, const Needs& need) {
           const Tensor gm = widened(g);
           auto x_hat = [&] { return kernel(B::mul, kernel(B::sub, widened(x.get()), bc(mean)), bc(rstd)); };
           Tensor xh = need[1] || (need[0] && training) ? x_hat() : Tensor();
           Tensor sum_g = need[2] || (need[0] && training) ? per_channel_sum(gm) : Tensor();                          // = db
           Tensor sum_gx = need[1] || (need[0] && training) ? per_channel_sum(kernel(B::mul, gm, xh)) : Tensor();  // = dw
           Tensor dx;
           if (need[0]) {
             // Training: the batch statistics depend on x too, which takes each channel's mean
             // gradient and its projection on x̂ out: dx = w·rstd · (g − mean(g) − x̂ · mean(g x̂)).
             // Eval: the statistics are constants, and dx = w·rstd · g.
             Tensor gc = gm;
             if (training) {
               gc = kernel(B::sub, gc, bc(scaled(sum_g, 1.0 / double(M))));
               gc = kernel(B::sub, gc, kernel(B::mul, xh, bc(scaled(sum_gx, 1.0 / double(M)))));
             }
             const Tensor& wt = w.get();
             dx = rounded_to(kernel(B::mul, gc, bc(wt.defined() ? kernel(B::mul, rstd, wt) : rstd)), x.get().dtype());
           }
           return grads(dx, need[1] ? sum_gx : Tensor(), need[2] ? sum_g : Tensor());
         }, autograd::once_differentiable);
  return y;
}

}  // namespace ampgrad
