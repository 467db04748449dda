// cast.cpp — the cast, and applying a policy row to an op's inputs (cast_inputs):
//   lower_precision: floating inputs (not float64) -> the autocast dtype, weights via the cache
//   fp32:            16-bit inputs -> float32
//   promote:         floating inputs -> the widest floating dtype among them
//   input_dtype:     nothing
//   banned:          an error (amp::why_banned)
// Only tensors on the autocast device type are touched; the first defined input decides it.
#include "autograd/cast.h"

#include "autograd/node.h"
#include "tensor/kernels.h"
#include "tensor/observer.h"

namespace ampgrad::autograd {

Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor out = empty(x.shape(), TensorOptions(dtype).device(x.device()));
  kernels::copy_(out, x);
  // To a storage-only type the cast is not differentiable: a gradient narrowed to 8 bits without
  // a scale would be flushed or NaN (a scaled GEMM's op narrows its gradients with one).
  if (ampgrad::is_floating_point(dtype) && !is_storage_only(dtype))
    record("to", out, {x}, [from = x.dtype()](const Tensor& g, const Needs&) { return grads(cast(g, from)); });
  return out;
}

// A cast autocast makes, counted for listeners and named as its maker (observer.h).
static Tensor uncached_cast(const Tensor& x, DType target, AutocastCall& ev) {
  ev.casts++;
  MadeBy named("autocast cast");
  return cast(x, target);
}

// A weight cast made here must keep its link to the weight even if the first use happens
// under NoGradGuard (PyTorch caches a graph-less cast then, and the weight silently gets no
// gradient in later grad-enabled uses). So cacheable casts always record their backward.
static Tensor cached_cast(const Tensor& x, DType target, AutocastCall& ev) {
  if (!amp::cache_eligible(x, target)) return uncached_cast(x, target, ev);
  if (auto hit = amp::cache_lookup(x, target)) { ev.cache_hits++; return *hit; }
  Tensor c;
  {
    EnableGradGuard with_grad;
    MadeBy named("autocast weight cache");
    c = cast(x, target);
  }
  // Every backward in the region (micro-batches) runs through this one cast node: it saves
  // nothing, so it must survive the first backward.
  c.grad_fn()->reusable = true;
  amp::cache_store(x, target, c);
  ev.casts++;
  return is_grad_enabled() ? c : c.detach();
}

void cast_inputs_in_place(amp::Op op, Tensor* xs, size_t n) {
  const Tensor* first = nullptr;
  for (size_t i = 0; i < n && !first; ++i) if (xs[i].defined()) first = &xs[i];
  if (!first) return;
  const DeviceType dev = first->device().type;
  const amp::CastPolicy policy = amp::cast_policy(op, dev);
  const bool on = amp::is_enabled(dev);
  AutocastCall ev{amp::policy_row(op).name, on ? amp::policy_name(policy) : "(autocast off)"};
  for (size_t i = 0; i < n; ++i)
    if (xs[i].defined() && xs[i].is_floating_point()) ev.input_dtypes.push_back(xs[i].dtype());

  if (on) {
    // exercise 1.2: cast_inputs — the row's target dtype, then each castable input cast to it (weights through cached_cast)
    auto castable = [&](const Tensor& x) {  // a storage-only tensor is left to be refused by the kernel
      return x.defined() && x.device().type == dev && x.is_floating_point() && x.dtype() != kFloat64 && !is_storage_only(x.dtype());
    };
    std::optional<DType> target;
    switch (policy) {
      case amp::CastPolicy::lower_precision: target = amp::get_dtype(dev); break;
      case amp::CastPolicy::fp32: target = kFloat32; break;
      case amp::CastPolicy::promote:
        for (size_t i = 0; i < n; ++i)
          if (castable(xs[i])) target = target ? promote_types(*target, xs[i].dtype()) : xs[i].dtype();
        break;
      case amp::CastPolicy::input_dtype: break;
      case amp::CastPolicy::banned: break;  // raised below, once listeners have heard of the call
    }
    for (size_t i = 0; target && i < n; ++i) {
      if (!castable(xs[i]) || xs[i].dtype() == *target) continue;
      if (policy == amp::CastPolicy::fp32 && !is_half(xs[i].dtype())) continue;
      xs[i] = policy == amp::CastPolicy::lower_precision ? cached_cast(xs[i], *target, ev) : uncached_cast(xs[i], *target, ev);
    }
    // end exercise 1.2
  }
  if (autocast_observed()) {
    for (size_t i = 0; i < n; ++i)  // the dtype the kernel sees, after ordinary promotion
      if (xs[i].defined() && xs[i].is_floating_point())
        ev.run_dtype = ev.run_dtype ? promote_types(*ev.run_dtype, xs[i].dtype()) : xs[i].dtype();
    announce([&](Observer& o) { o.on_autocast(ev); });
  }
  AMPGRAD_CHECK(!(on && policy == amp::CastPolicy::banned), amp::why_banned(op) << " (autocast is on for " << device_type_name(dev) << ")");
}

}  // namespace ampgrad::autograd
