// normalization.cpp — layer norm (each sample's features), batch norm (each channel over the
// batch) and group norm (each sample's channels, in groups). All normalise in float32 for
// float16/bfloat16 inputs and round once, keep their input and the statistics for backward, and
// write the backward's closed form beside the forward.
#include <tuple>

#include "autograd/grad_mode.h"
#include "autograd/op_support.h"

namespace ampgrad {

// layer_norm of rows (R, D) in the library's ops: what a create_graph backward differentiates,
// the fused kernels being opaque to it.
static autograd::CompositeFn layer_norm_composite(double eps) {
  return [eps](const std::vector<Tensor>& in) {
    const Tensor x = widened(in[0]), xc = x - mean(x, {1}, true);
    Tensor y = xc / sqrt(mean(xc * xc, {1}, true) + eps);
    if (in[1].defined()) y = y * in[1];
    if (in[2].defined()) y = y + in[2];
    return rounded_to(y, in[0].dtype());
  };
}

// Normalises each row of the trailing dims to mean 0 and variance 1, then scales and shifts it:
// y = (x − mean) · rstd · w + b, rstd = 1/√(var + eps). One fused kernel each way, as llm.c's
// layernorm_forward / layernorm_backward: the forward keeps x and each row's mean and rstd, and
// the backward rebuilds x̂ = (x − mean) · rstd from them. A float16/bfloat16 x is normalised in
// float32 and rounded once, as PyTorch's kernel does (in float16 the square of 600 is inf).
//   x (..., *normalized_shape), weight and bias (normalized_shape) -> y like x
Tensor layer_norm(const Tensor& x_in, const Shape& normalized_shape, const Tensor& w_in, const Tensor& b_in, double eps) {
  auto [x, w, b] = cast_inputs<1>(Op::layer_norm, x_in, w_in, b_in);
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
  record("layer_norm", y, {rows, wm, bm}, [x = Saved(rows), mean = mean, rstd = rstd, w = Saved(wm), b = Saved(bm), eps](const Tensor& g, const Needs& need) {
    if (autograd::recording_backward()) return autograd::composite_backward(layer_norm_composite(eps), {x, w, b}, g, need);
    // x̂ and g in the math dtype, for the parameters' gradients (summed over the rows)
    auto x_hat = [&] {
      return kernels::binary(kernels::Binary::mul, kernels::binary(kernels::Binary::sub, widened(x.get()), mean.unsqueeze(1)), rstd.unsqueeze(1));
    };
    return grads(need[0] ? kernels::layer_norm_backward(g, x, mean, rstd, w) : Tensor(),
                 need[1] ? kernels::sum(kernels::binary(kernels::Binary::mul, widened(g), x_hat()), {0}, false) : Tensor(),  // dw = Σ_rows g x̂
                 need[2] ? kernels::sum(widened(g), {0}, false) : Tensor());                                                  // db = Σ_rows g
  });
  return y.reshape(x.shape());
}

namespace {
// The (C) tensors a channel-wise norm takes, by name: each given one must be (C), on x's device,
// floating.
using Named = std::pair<const Tensor*, const char*>;
void check_per_channel(const char* op, const Tensor& x, std::initializer_list<Named> ts) {
  const int64_t C = x.size(1);
  for (auto [t, name] : ts) {
    if (!t->defined()) continue;
    AMPGRAD_CHECK(t->shape() == Shape{C}, op << ": input of shape " << shape_str(x.shape()) << " has " << C << " channels (dim 1), but "
                                             << name << " has shape " << shape_str(t->shape()));
    AMPGRAD_CHECK(t->device() == x.device(), op << ": " << name << " on " << t->device().str() << ", input on " << x.device().str());
    require_floating(op, t->dtype());
  }
}

// How batch norm sees x (N, C, ...): the dims its statistics reduce over (all but 1), the M values
// of a channel, and (C) statistics broadcast over x as (1, C, 1, ...).
struct Channels {
  Shape dims, per_channel;
  int64_t M;
  Tensor bc(const Tensor& t) const { return t.reshape(per_channel); }
  Tensor mean(const Tensor& t) const { return scaled(sum(t, dims), 1.0 / double(M)); }
};
// y = (x − mean) · rstd · w + b, rstd = 1/√(var + eps), in the library's ops on an x of the math
// dtype; mean and var are the batch's (the variance biased) unless given. The forward runs it
// unrecorded, and a create_graph backward differentiates it: the closed form is opaque to it.
struct Normalized { Tensor y, mean, var, rstd; };
Normalized normalize(const Channels& c, const Tensor& xm, const Tensor& given_mean, const Tensor& given_var, const Tensor& wm, const Tensor& bm,
                     double eps) {
  const Tensor mean = given_mean.defined() ? given_mean : c.mean(xm), xc = xm - c.bc(mean);
  const Tensor var = given_var.defined() ? given_var : c.mean(xc * xc), rstd = scalar_like(1, var) / sqrt(var + eps);
  Tensor y = xc * c.bc(wm.defined() ? rstd * wm : rstd);
  if (bm.defined()) y = y + c.bc(bm);
  return {y, mean, var, rstd};
}
}  // namespace

// Normalises each channel (dim 1) of x (N, C, ...) over the batch and every other dim, then scales
// and shifts it: y = (x − mean) · rstd · w + b, rstd = 1/√(var + eps), with the batch's mean and
// biased variance when training and the running estimates otherwise. Training also moves the
// running estimates towards the batch's (momentum), with the unbiased variance, as PyTorch does,
// except in a forward rerun (grad_mode.h), whose first run already took this batch.
// The statistics are float32 for a float16/bfloat16 x, and the running buffers keep their own
// dtype: under autocast a float16 activation meets float32 statistics, as cuDNN's batch norm
// does. Composed of the kernels on (C)-sized statistics broadcast over x, so every backend runs it.
//   x (N, C, ...), running_mean, running_var, weight, bias (C) or undefined -> y like x
Tensor batch_norm(const Tensor& x_in, const Tensor& running_mean, const Tensor& running_var, const Tensor& w_in, const Tensor& b_in,
                  bool training, double momentum, double eps) {
  auto [x, w, b] = cast_inputs<1>(Op::batch_norm, x_in, w_in, b_in);
  AMPGRAD_CHECK(x.dim() >= 2, "batch_norm: expected an input (N, C, ...) of at least 2 dims, got shape " << shape_str(x.shape()));
  require_floating("batch_norm", x.dtype());
  const int64_t C = x.size(1), M = C ? x.numel() / C : 0;  // M values per channel
  check_per_channel("batch_norm", x, {{&w, "weight"}, {&b, "bias"}, {&running_mean, "running_mean"}, {&running_var, "running_var"}});
  AMPGRAD_CHECK(running_mean.defined() == running_var.defined(), "batch_norm: running_mean and running_var go together: give both or neither");
  AMPGRAD_CHECK(training || running_mean.defined(), "batch_norm: running_mean and running_var are needed when not training");
  AMPGRAD_CHECK(!training || M != 1, "batch_norm: expected more than 1 value per channel when training, got input of shape " << shape_str(x.shape()));

  const DType math = is_half(x.dtype()) ? kFloat32 : x.dtype();
  Channels c{.dims = {0}, .per_channel = Shape(x.dim(), 1), .M = M};
  for (int64_t d = 2; d < x.dim(); ++d) c.dims.push_back(d);
  c.per_channel[1] = C;
  // Weight and bias in the math dtype; the casts are ops, so their gradients return in the parameters' dtypes.
  const Tensor wm = w.defined() ? to(w, math) : w, bm = b.defined() ? to(b, math) : b;
  // Eval normalises with copies of the running estimates: a later training step updates the
  // buffers in place, and this backward must not see it.
  const Tensor given_mean = training ? Tensor() : running_mean.detach().to(math).clone();
  const Tensor given_var = training ? Tensor() : running_var.detach().to(math).clone();
  Normalized n;
  {
    NoGradGuard values_only;  // this op records its own backward, below
    amp::suspend not_traced;
    n = normalize(c, widened(x), given_mean, given_var, wm, bm, eps);
  }
  Tensor y = rounded_to(n.y, x.dtype());
  // unbiased: what estimates the population's (an empty batch has no statistics to give)
  if (training && running_mean.defined() && M > 0 && !is_forward_rerun()) {
    NoGradGuard no_grad;
    Tensor(running_mean).mul_(1 - momentum).add_(n.mean, momentum);  // handles to the caller's buffers
    Tensor(running_var).mul_(1 - momentum).add_(n.var, momentum * double(M) / double(M - 1));
  }

  using B = kernels::Binary;
  record("batch_norm", y, {x, wm, bm},
         [x = Saved(x), mean = n.mean, rstd = n.rstd, given_mean, given_var, w = Saved(wm), b = Saved(bm), c, eps, training](const Tensor& g, const Needs& need) {
           if (autograd::recording_backward()) {
             auto forward = [&](const std::vector<Tensor>& in) {
               return rounded_to(normalize(c, widened(in[0]), given_mean, given_var, in[1], in[2], eps).y, in[0].dtype());
             };
             return autograd::composite_backward(forward, {x, w, b}, g, need);
           }
           const Tensor gm = widened(g);
           auto per_channel_sum = [&](const Tensor& t) { return kernels::sum(t, c.dims, false); };
           auto x_hat = [&] { return kernels::binary(B::mul, kernels::binary(B::sub, widened(x.get()), c.bc(mean)), c.bc(rstd)); };
           Tensor xh = need[1] || (need[0] && training) ? x_hat() : Tensor();
           Tensor sum_g = need[2] || (need[0] && training) ? per_channel_sum(gm) : Tensor();                          // = db
           Tensor sum_gx = need[1] || (need[0] && training) ? per_channel_sum(kernels::binary(B::mul, gm, xh)) : Tensor();  // = dw
           Tensor dx;
           if (need[0]) {
             // Training: the batch statistics depend on x too, which takes each channel's mean
             // gradient and its projection on x̂ out: dx = w·rstd · (g − mean(g) − x̂ · mean(g x̂)).
             // Eval: the statistics are constants, and dx = w·rstd · g.
             Tensor gc = gm;
             if (training) {
               gc = kernels::binary(B::sub, gc, c.bc(scaled(sum_g, 1.0 / double(c.M))));
               gc = kernels::binary(B::sub, gc, kernels::binary(B::mul, xh, c.bc(scaled(sum_gx, 1.0 / double(c.M)))));
             }
             const Tensor wt = w.get();
             dx = rounded_to(kernels::binary(B::mul, gc, c.bc(wt.defined() ? kernels::binary(B::mul, rstd, wt) : rstd)), x.get().dtype());
           }
           return grads(dx, need[1] ? sum_gx : Tensor(), need[2] ? sum_g : Tensor());
         });
  return y;
}

namespace {
// How group norm sees x (N, C, ...): each sample's channels in G groups, a group being a row of x
// viewed as (N·G, D), D = C/G channels times their positions, which is layer norm's view. The
// statistics are (N·G); the affine's (C) tensors broadcast over x as (1, C, 1, ...).
struct Groups {
  Shape shape, rows_shape, per_channel, other_dims;  // x's shape, (N·G, D), (1, C, 1, ...), all dims but 1
  Tensor rows(const Tensor& t) const { return t.reshape(rows_shape); }
  Tensor bc(const Tensor& t) const { return t.reshape(per_channel); }
};
// y = (x − mean) · rstd · w + b, each group's mean and biased variance, in the library's ops on an
// x of the math dtype: what a create_graph backward differentiates, the kernels being opaque to it.
Tensor group_normalize(const Groups& gr, const Tensor& xm, const Tensor& wm, const Tensor& bm, double eps) {
  const auto row_mean = [&](const Tensor& t) { return scaled(sum(t, {1}, true), 1.0 / double(gr.rows_shape[1])); };
  const Tensor xr = gr.rows(xm), xc = xr - row_mean(xr);
  Tensor y = (xc / sqrt(row_mean(xc * xc) + eps)).reshape(gr.shape);
  if (wm.defined()) y = y * gr.bc(wm);
  if (bm.defined()) y = y + gr.bc(bm);
  return y;
}
}  // namespace

// Normalises each sample's channels in num_groups groups, each over its C/G channels and all their
// positions, then scales and shifts each channel: y = (x − mean) · rstd · w + b (Wu & He 2018,
// PyTorch's group_norm). Its statistics are the sample's own, so it needs no batch and no running
// estimates, and training and eval agree; one group is layer norm over (C, ...) with a per-channel
// affine, C groups instance norm. A group is a row of layer norm's fused kernels, each way; the
// per-channel affine is applied around them. Statistics in float32 for a float16/bfloat16 x, and
// the result rounded once.
//   x (N, C, ...), weight and bias (C) or undefined -> y like x
Tensor group_norm(const Tensor& x_in, int64_t num_groups, const Tensor& w_in, const Tensor& b_in, double eps) {
  auto [x, w, b] = cast_inputs<1>(Op::group_norm, x_in, w_in, b_in);
  AMPGRAD_CHECK(x.dim() >= 2, "group_norm: expected an input (N, C, ...) of at least 2 dims, got shape " << shape_str(x.shape()));
  require_floating("group_norm", x.dtype());
  const int64_t N = x.size(0), C = x.size(1);
  AMPGRAD_CHECK(num_groups > 0 && C % num_groups == 0, "group_norm: the " << C << " channels (dim 1) of input " << shape_str(x.shape())
                                                                           << " do not split into num_groups = " << num_groups << " equal groups");
  check_per_channel("group_norm", x, {{&w, "weight"}, {&b, "bias"}});
  const DType math = is_half(x.dtype()) ? kFloat32 : x.dtype();
  Groups gr{.shape = x.shape(), .rows_shape = {N * num_groups, C / num_groups}, .per_channel = Shape(x.dim(), 1), .other_dims = {0}};
  for (int64_t d = 2; d < x.dim(); ++d) gr.rows_shape[1] *= x.size(d), gr.other_dims.push_back(d);
  gr.per_channel[1] = C;
  // Weight and bias in the math dtype; the casts are ops, so their gradients return in the parameters' dtypes.
  const Tensor wm = w.defined() ? to(w, math) : w, bm = b.defined() ? to(b, math) : b;

  using B = kernels::Binary;
  Tensor y, mean, rstd;
  {
    NoGradGuard values_only;  // this op records its own backward, below
    Tensor x_hat;
    std::tie(x_hat, mean, rstd) = kernels::layer_norm(gr.rows(widened(x)), {}, {}, eps);  // (N·G, D), in the math dtype
    y = x_hat.reshape(gr.shape);
    if (wm.defined()) y = kernels::binary(B::mul, y, gr.bc(wm));
    if (bm.defined()) y = kernels::binary(B::add, y, gr.bc(bm));
  }
  y = rounded_to(y, x.dtype());

  record("group_norm", y, {x, wm, bm}, [x = Saved(x), mean, rstd, w = Saved(wm), b = Saved(bm), gr, eps](const Tensor& g, const Needs& need) {
    if (autograd::recording_backward()) {
      auto forward = [&](const std::vector<Tensor>& in) { return rounded_to(group_normalize(gr, widened(in[0]), in[1], in[2], eps), in[0].dtype()); };
      return autograd::composite_backward(forward, {x, w, b}, g, need);
    }
    const Tensor gm = widened(g), xm = gr.rows(widened(x.get()));
    auto per_channel_sum = [&](const Tensor& t) { return kernels::sum(t, gr.other_dims, false); };
    auto x_hat = [&] { return kernels::binary(B::mul, kernels::binary(B::sub, xm, mean.unsqueeze(1)), rstd.unsqueeze(1)).reshape(gr.shape); };
    Tensor dx;
    if (need[0]) {
      // The gradient reaching x̂ is g·w, per channel; from x̂ back to x is layer norm's backward
      // over each group's row, without a weight.
      const Tensor wt = w.get(), dx_hat = wt.defined() ? kernels::binary(B::mul, gm, gr.bc(wt)) : gm;
      dx = rounded_to(kernels::layer_norm_backward(gr.rows(dx_hat), xm, mean, rstd, {}).reshape(gr.shape), x.get().dtype());
    }
    return grads(dx, need[1] ? per_channel_sum(kernels::binary(B::mul, gm, x_hat())) : Tensor(),  // dw = Σ g x̂ over all but dim 1
                 need[2] ? per_channel_sum(gm) : Tensor());                          // db = Σ g
  });
  return y;
}

}  // namespace ampgrad
