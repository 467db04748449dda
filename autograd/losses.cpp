// losses.cpp — the losses, as PyTorch's: cross_entropy (fused with its log_softmax: its gradient
// is softmax − one-hot, weighed), nll_loss, mse_loss (composed of ops, so its backward comes
// free) and the binary cross-entropies, each with PyTorch's reduction (none, mean, sum).
// Letters: N batch, C classes.
#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/op_support.h"
#include "tensor/cpu/loops.h"  // broadcast_shapes: geometry, shared by every backend

namespace ampgrad {

// ---- losses over (N, C) scores and int64 class targets (N)

// The targets of a class loss, checked, in the loss's working dtype (float32 for half scores):
// `index` sends ignored targets to class 0, so every gather stays in bounds, and `kept` marks
// the others; `weight` is each sample's weight, u[t_n] (u the class weights, 1 without) where
// kept, else 0; `total` its sum, what a mean divides by, as in PyTorch (the number of kept
// targets without class weights); `target` is kept for autograd's version check, as PyTorch's.
struct Targets {
  Saved target;
  Tensor index = {}, kept = {}, weight = {}, total = {}, u = {};  // u: (1, C), undefined without class weights
};
static Targets class_targets(const char* op, const Tensor& scores, const Tensor& target, const Tensor& class_weight, int64_t ignore_index) {
  AMPGRAD_CHECK(scores.dim() == 2, op << ": expected (N, C) inputs, got shape " << shape_str(scores.shape()));
  AMPGRAD_CHECK(target.dtype() == kInt64, op << ": target must be int64 class indices, got " << dtype_name(target.dtype()));
  AMPGRAD_CHECK(target.dim() == 1 && target.size(0) == scores.size(0),
                op << ": target of shape " << shape_str(target.shape()) << " does not match input of shape " << shape_str(scores.shape()));
  const int64_t C = scores.size(1);
  if (class_weight.defined()) {
    AMPGRAD_CHECK(class_weight.dim() == 1 && class_weight.size(0) == C && class_weight.is_floating_point(),
                  op << ": weight must be a floating tensor of shape [" << C << "] (one per class), got " << shape_str(class_weight.shape())
                     << " " << dtype_name(class_weight.dtype()));
    AMPGRAD_CHECK(class_weight.device() == scores.device(),
                  op << ": weight is on " << class_weight.device().str() << ", the input on " << scores.device().str());
  }
  const DType wd = is_half(scores.dtype()) ? kFloat32 : scores.dtype();
  Targets t{.target = Saved(target)};
  t.kept = ne(target, scalar_like(ignore_index, target));
  t.index = where(t.kept, target, zeros_like(target));
  // On the CPU a bad label is checked here, for a clear error instead of a read out of bounds.
  // On a GPU that would be a host sync per loss: there the gather kernel checks each index on
  // the device and aborts with the same message, as PyTorch's device-side assert does.
  if (target.numel() > 0 && target.device().is_cpu()) {
    const int64_t lo = kernels::max_dim(t.index, 0, false, true).first.item<int64_t>();
    const int64_t hi = kernels::max_dim(t.index, 0, false, false).first.item<int64_t>();
    AMPGRAD_CHECK(lo >= 0 && hi < C, op << ": target " << (lo < 0 ? lo : hi) << " is out of bounds for " << C << " classes");
  }
  t.weight = t.kept.to(wd);
  if (class_weight.defined()) {
    t.u = class_weight.detach().to(wd).unsqueeze(0);
    t.weight = t.weight * kernels::gather(t.u, 1, t.index.unsqueeze(0)).squeeze(0);
  }
  t.total = sum(t.weight);
  return t;
}

// −scores[n, t_n] · weight_n, per sample (N), in the working dtype
static Tensor weighted_nll(const Tensor& scores, const Targets& t) {
  return neg(widened(kernels::gather(scores, 1, t.index.unsqueeze(1))).squeeze(1)) * t.weight;
}

// The losses (N) reduced as asked and rounded once to the scores' dtype.
static Tensor reduce_losses(const Tensor& losses, const Targets& t, Reduction reduction, DType dtype) {
  if (reduction == Reduction::None) return rounded_to(losses, dtype);
  Tensor total = sum(losses);
  return rounded_to(reduction == Reduction::Mean ? total / t.total : total, dtype);
}

// The upstream gradient of the reduced loss as each sample's loss receives it: (N, 1) without
// reduction, else (1, 1), over the weights' total for a mean.
static Tensor per_sample(const Tensor& g, const Targets& t, Reduction reduction) {
  (void)t.target.get();  // raises if the targets were written in place since the forward
  const Tensor gn = widened(g);
  return reduction == Reduction::None ? gn.unsqueeze(1) : (reduction == Reduction::Mean ? gn / t.total : gn).reshape({1, 1});
}

// A class loss's gradient, d loss_n / d scores[n, :] (N, C), times the upstream gradient of its
// sample (per_sample), rounded to the scores' dtype. Ignored targets' rows are 0 even where a
// mean of nothing (0/0) makes the rest NaN, as in PyTorch.
static Tensor class_grad(const Tensor& dloss_n, const Tensor& upstream, const Targets& t, DType dtype) {
  const Tensor grad = dloss_n * upstream;
  return rounded_to(where(t.kept.unsqueeze(1), grad, scalar_like(0, grad)), dtype);
}

// (N, C) one-hot of target in dtype/device of `like`
static Tensor one_hot(const Tensor& target, const Tensor& like) {
  Tensor idx = target.unsqueeze(1);
  return kernels::scatter_add(like.shape(), 1, idx, ones(idx.shape(), TensorOptions(like.dtype()).device(like.device())));
}

// With p = softmax(logits), u the class weights (1 without), w_n = u[t_n] and k_n = 1 for kept
// targets (both 0 for ignored ones), ε the label smoothing:
//   loss_n = (1−ε)·w_n·(−log p[n, t_n]) + ε/C · k_n · Σ_c u_c·(−log p[n, c])
//   d loss_n / d logits[n, c] = p_c·((1−ε)·w_n + ε/C·k_n·Σu) − (1−ε)·w_n·[c = t_n] − ε/C·k_n·u_c
// (without weights or ignored targets: p − ((1−ε)·onehot + ε/C), the familiar softmax − target).
Tensor cross_entropy(const Tensor& logits_in, const Tensor& target, const CrossEntropyOptions& o) {
  auto [logits] = cast_inputs(Op::cross_entropy, logits_in);
  amp::suspend fused;  // the steps below are this op's own, not op calls to cast or trace
  const double eps = o.label_smoothing;
  AMPGRAD_CHECK(eps >= 0 && eps <= 1, "cross_entropy: label_smoothing must be in [0, 1], got " << eps);
  const Targets t = class_targets("cross_entropy", logits, target, o.weight, o.ignore_index);
  const int64_t C = logits.size(1);
  // logp keeps its link to the logits (through a log_softmax node, which saves logp itself), so a
  // create_graph backward differentiates the probabilities it reads; the forward's arithmetic
  // below runs on the values alone.
  const Tensor logp_linked = widened(log_softmax(logits, 1));  // (N, C)
  const Tensor logp = logp_linked.detach();
  Tensor losses = weighted_nll(logp, t) * (1 - eps);
  if (eps > 0) losses = losses + neg(sum(t.u.defined() ? logp * t.u : logp, {1})) * t.kept.to(logp.dtype()) * (eps / C);
  Tensor loss = reduce_losses(losses, t, o.reduction, logits.dtype());
  record("cross_entropy", loss, {logits}, [logp = Saved(logp_linked), t, eps, C, reduction = o.reduction, dtype = logits.dtype()](const Tensor& g, const Needs&) {
    const Tensor lp = logp, upstream = per_sample(g, t, reduction);
    // Per sample (N, 1): the weight of its target's one-hot, coef that of p; spread, what label
    // smoothing gives every class (ignored rows are zeroed at the end).
    const Tensor hit = (t.weight * (1 - eps)).unsqueeze(1);
    Tensor coef = hit, spread;
    if (eps > 0) {
      coef = coef + (t.u.defined() ? sum(t.u) * (eps / C) : scalar_like(eps, coef));
      spread = t.u.defined() ? t.u * (eps / C) : scalar_like(eps / C, coef);
    }
    // A plain backward writes the gradient in one pass, one (N, C) tensor where the ops below
    // hold six at once (the logits are a language model's largest activation); the ops, recorded
    // under create_graph, round every step alike (on the CPU a test holds the two to the bit).
    if (!autograd::recording_backward())
      return grads(kernels::cross_entropy_backward(lp, t.index, t.kept, coef, hit, spread, upstream, dtype));
    Tensor goal = one_hot(t.index, lp) * hit;
    if (spread.defined()) goal = goal + spread;
    return grads(class_grad(exp(lp) * coef - goal, upstream, t, dtype));
  });
  return loss;
}

// loss_n = −w_n · log_probs[n, t_n]; its gradient −w_n at (n, t_n), 0 elsewhere
Tensor nll_loss(const Tensor& logp_in, const Tensor& target, const NLLLossOptions& o) {
  auto [logp] = cast_inputs(Op::nll_loss, logp_in);
  amp::suspend fused;  // as in cross_entropy
  const Targets t = class_targets("nll_loss", logp, target, o.weight, o.ignore_index);
  Tensor loss = reduce_losses(weighted_nll(logp, t), t, o.reduction, logp.dtype());
  record("nll_loss", loss, {logp}, [t, shape = logp.shape(), reduction = o.reduction, dtype = logp.dtype()](const Tensor& g, const Needs&) {
    Tensor dloss_n = kernels::scatter_add(shape, 1, t.index.unsqueeze(1), neg(t.weight).unsqueeze(1));
    return grads(class_grad(dloss_n, per_sample(g, t, reduction), t, dtype));
  });
  return loss;
}

static Tensor reduce_elements(const Tensor& losses, Reduction reduction, DType dtype) {
  Tensor out = reduction == Reduction::None ? losses : reduction == Reduction::Mean ? mean(losses) : sum(losses);
  return out.dtype() == dtype ? out : to(out, dtype);
}

Tensor mse_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  auto [input, target] = cast_inputs(Op::mse_loss, input_in, target_in);
  AMPGRAD_CHECK(input.shape() == target.shape(), "mse_loss: input " << shape_str(input.shape()) << " and target " << shape_str(target.shape()) << " differ in shape");
  const Tensor squares = pow(input - target, 2);
  return reduce_elements(squares, reduction, squares.dtype());
}

// ---- binary cross-entropy: every element its own two-class problem (multi-label outputs), the
// target the probability of class 1. One node per op, its per-element closed form beside the
// forward, then the reduction, whose backward comes free. weight and pos_weight are constants,
// as in PyTorch, and broadcast against the input.

using NamedConstants = std::initializer_list<std::pair<const Tensor*, const char*>>;
static void check_binary_loss(const char* op, const Tensor& input, const Tensor& target, NamedConstants constants) {
  require_floating(op, input.dtype());
  require_floating(op, target.dtype());
  AMPGRAD_CHECK(target.shape() == input.shape(), op << ": target of shape " << shape_str(target.shape()) << " must have the input's shape "
                                                     << shape_str(input.shape()));
  for (auto [t, name] : constants) {
    if (!t->defined()) continue;
    Shape joint;  // the shape t and the input broadcast to, which must be the input's
    try {
      joint = cpu::broadcast_shapes(op, t->shape(), input.shape());
    } catch (const Error&) {  // shapes that do not broadcast at all: say which argument
    }
    AMPGRAD_CHECK(joint == input.shape(),
                  op << ": " << name << " of shape " << shape_str(t->shape()) << " does not broadcast to the input's shape "
                     << shape_str(input.shape()));
    AMPGRAD_CHECK(!(is_grad_enabled() && t->requires_grad()), op << ": " << name << " takes no gradient (as in PyTorch); pass it detached");
  }
}

// The widest dtype of the defined operands, which the loss takes, as PyTorch's binary ops promote.
// (PyTorch 1.13's own BCE losses do not: binary_cross_entropy refuses mixed dtypes, and the
// logits form returns the target's dtype, an artifact of its in-place arithmetic; promoting
// never rounds a float64 operand's loss to float32.)
static DType widest(std::initializer_list<Tensor> ts) {
  std::optional<DType> w;
  for (const Tensor& t : ts)
    if (t.defined()) w = w ? promote_types(*w, t.dtype()) : t.dtype();
  return *w;
}

// The forwards' operands, detached, in one math dtype: the widest of theirs, float32 for 16 bits.
static std::vector<Tensor> in_math_dtype(std::initializer_list<Tensor> ts) {
  const DType wide = widest(ts), math = is_half(wide) ? kFloat32 : wide;
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(!t.defined() ? t : t.dtype() == math ? t.detach() : t.detach().to(math));
  return out;
}
using B = kernels::Binary;
using U = kernels::Unary;

// −w · (t log p + (1 − t) log(1 − p)), each log clamped at −100 as PyTorch's, so p = 0 or 1 gives
// a loss of 100, not inf. Under CUDA autocast it is refused (amp::why_banned): use the next one.
Tensor binary_cross_entropy(const Tensor& input_in, const Tensor& target_in, const BCEOptions& o) {
  auto [p, t, w] = cast_inputs<2>(Op::binary_cross_entropy, input_in, target_in, o.weight);
  check_binary_loss("binary_cross_entropy", p, t, {{&w, "weight"}});
  if (p.device().is_cpu() && p.numel() > 0) {  // on a GPU this read would cost a sync per step; there a log of a negative gives NaN
    const double lo = min(p.detach()).item<double>(), hi = max(p.detach()).item<double>();
    AMPGRAD_CHECK(lo >= 0 && hi <= 1, "binary_cross_entropy: input values must be probabilities in [0, 1], got values from " << lo << " to " << hi);
  }
  const std::vector<Tensor> m = in_math_dtype({p, t, w});
  const Tensor &pm = m[0], &tm = m[1], &wm = m[2];
  auto clamped_log = [](const Tensor& v) { return kernels::unary(U::clamp, kernels::unary(U::log, v, {}), {-100.0, INFINITY}); };
  const Tensor log_p = clamped_log(pm), log_q = clamped_log(kernels::binary(B::sub, scalar_like(1, pm), pm));
  Tensor loss = kernels::unary(U::neg, kernels::binary(B::add, log_q, kernels::binary(B::mul, tm, kernels::binary(B::sub, log_p, log_q))), {});  // −(log q + t (log p − log q))
  if (wm.defined()) loss = kernels::binary(B::mul, loss, wm);
  record("binary_cross_entropy", loss, {p, t}, [p = Saved(p), t = Saved(t), w = Saved(w)](const Tensor& g, const Needs& need) {
    const Tensor pm = widened(p.get()), gw = w.get().defined() ? g * widened(w.get()) : g;
    auto log_clamped = [](const Tensor& v) { return clamp(log(v), -100.0, std::nullopt); };
    // d/dp = (p − t) / (p (1 − p)), the denominator kept from 0 at 1e-12 as PyTorch's
    return grads(need[0] ? rounded_to(gw * (pm - widened(t.get())) / clamp(pm * (1.0 - pm), 1e-12, std::nullopt), p.get().dtype()) : Tensor(),
                 need[1] ? rounded_to(gw * (log_clamped(1.0 - pm) - log_clamped(pm)), t.get().dtype()) : Tensor());  // d/dt = log q − log p
  });
  return reduce_elements(loss, o.reduction, widest({p, t, w}));
}

// The same loss of p = σ(x), from the logit x itself, which no rounding of σ can spoil:
//   (1 − t) x + l · softplus(−x),  l = 1 + (pos_weight − 1) t,  softplus(−x) = log(1 + e^(−x)),
// written as log1p(e^(−|x|)) + max(−x, 0) so no exponential overflows. pos_weight > 1 weighs the
// positive (t = 1) part of each element's loss up, as PyTorch's does.
Tensor binary_cross_entropy_with_logits(const Tensor& input_in, const Tensor& target_in, const BCEWithLogitsOptions& o) {
  auto [x, t, w, pw] = cast_inputs<2>(Op::binary_cross_entropy_with_logits, input_in, target_in, o.weight, o.pos_weight);
  check_binary_loss("binary_cross_entropy_with_logits", x, t, {{&w, "weight"}, {&pw, "pos_weight"}});
  // ops, so the backward's use is differentiable again; the forward's is unrecorded (below)
  auto softplus_neg = [](const Tensor& xm) { return log1p(exp(-abs(xm))) + relu(-xm); };
  const std::vector<Tensor> m = in_math_dtype({x, t, w, pw});
  const Tensor &xm = m[0], &tm = m[1], &wm = m[2], &pwm = m[3], one = scalar_like(1, xm);
  Tensor sp;
  {
    NoGradGuard values_only;
    amp::suspend not_traced;  // this op's own arithmetic, not op calls
    sp = softplus_neg(xm);
  }
  const Tensor l = pwm.defined() ? kernels::binary(B::add, one, kernels::binary(B::mul, kernels::binary(B::sub, pwm, one), tm)) : Tensor();  // 1 + (pos_weight − 1) t
  const Tensor positive = l.defined() ? kernels::binary(B::mul, l, sp) : sp;
  Tensor loss = kernels::binary(B::add, kernels::binary(B::mul, kernels::binary(B::sub, one, tm), xm), positive);
  if (wm.defined()) loss = kernels::binary(B::mul, loss, wm);
  record("binary_cross_entropy_with_logits", loss, {x, t},
         [x = Saved(x), t = Saved(t), w = Saved(w), pw = Saved(pw), softplus_neg](const Tensor& g, const Needs& need) {
           const Tensor xm = widened(x.get()), tm = widened(t.get()), gw = w.get().defined() ? g * widened(w.get()) : g;
           const Tensor pwm = pw.get().defined() ? widened(pw.get()) : Tensor();
           Tensor dx, dt;
           if (need[0]) {  // d/dx = l σ(x) − pos_weight t, which is σ(x) − t without pos_weight
             dx = pwm.defined() ? (1.0 + (pwm - 1.0) * tm) * sigmoid(xm) - pwm * tm : sigmoid(xm) - tm;
             dx = rounded_to(gw * dx, x.get().dtype());
           }
           if (need[1]) {  // d/dt = −x + (pos_weight − 1) softplus(−x)
             dt = pwm.defined() ? (pwm - 1.0) * softplus_neg(xm) - xm : -xm;
             dt = rounded_to(gw * dt, t.get().dtype());
           }
           return grads(dx, dt);
         });
  return reduce_elements(loss, o.reduction, widest({x, t, w, pw}));
}

}  // namespace ampgrad
