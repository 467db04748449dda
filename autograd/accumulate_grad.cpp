// accumulate_grad.cpp — where a backward's gradients end: added into a leaf's .grad, PyTorch's
// AccumulateGrad, and, once a leaf has all of a pass's gradients, announced (observer.h's
// on_grad_accumulated: data-parallel training starts reducing it there).
#include "autograd/engine_parts.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"
#include "tensor/observer.h"

namespace ampgrad::autograd {

// The first gradient a leaf receives becomes its .grad. A fresh result that nothing else can
// see (its handle is the last one, its storage backs no other tensor: a GEMM's or a reduction's
// output, the usual case for a weight) is adopted as it is; anything else (add's backward hands
// the same g to both inputs; the user may hold the gradient passed to backward) is copied, so a
// .grad aliases no other tensor. Later gradients are added into it in place, as PyTorch's
// AccumulateGrad does: a handle to .grad sees the sum, and accumulating allocates nothing. (A
// .grad the user set with set_grad may be any view, even one g overlaps: that one is replaced
// by the sum instead, and so is a .grad under create_graph: a sum made in place would not be
// recorded.)
static void accumulate_into_leaf(TensorImpl& leaf, Tensor g) {
  AMPGRAD_CHECK(g.dtype() == leaf.dtype, "backward: gradient dtype " << dtype_name(g.dtype()) << " does not match the leaf's " << dtype_name(leaf.dtype));
  MadeBy named("AccumulateGrad");  // PyTorch's name for this step
  Span span("AccumulateGrad", SpanKind::node);
  const Tensor grad(leaf.grad);
  if (grad.defined() && !is_grad_enabled() && grad.is_contiguous() && !grad.shares_storage(g)) kernels::axpy_(grad, g, 1.0);
  else if (grad.defined()) leaf.grad = (grad + g).impl_ptr();
  else if (g.impl_ptr().use_count() == 1 && g.impl().storage.use_count() == 1 && !g.impl().is_view && g.is_contiguous())
    leaf.grad = g.impl_ptr();
  else leaf.grad = g.clone().impl_ptr();
}

void LeafGradients::add(const std::shared_ptr<TensorImpl>& leaf, Tensor g, bool last) {
  if (!accumulate_) return;
  if (g.defined()) {
    accumulate_into_leaf(*leaf, std::move(g));
    if (observed()) added_.insert(leaf.get());
  }
  if (last && added_.erase(leaf.get())) announce([&](Observer& o) { o.on_grad_accumulated(Tensor(leaf)); });
}

}  // namespace ampgrad::autograd
