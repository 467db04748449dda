// engine.cpp — reverse-mode autodiff: from one or more roots, count the gradients each node will
// receive, then run each node once all have arrived (node.cpp's call_backward), passing the
// gradients it returns on to its inputs' nodes, into the leaves' .grad, or to stop points.
// Iterative throughout (no recursion), so graph depth is bounded only by memory. Layered on, each
// entered at one point: create_graph's recording (recorded_backward, create_graph.cpp) and
// grad()'s pruning (Catches::wants, grad.cpp).
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "amp/autocast.h"
#include "autograd/cast.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"
#include "tensor/observer.h"

namespace ampgrad::autograd {

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int64_t lead = g.dim() - (int64_t)shape.size();
  AMPGRAD_CHECK(lead >= 0, "backward: gradient of shape " << shape_str(g.shape()) << " cannot be reduced to " << shape_str(shape));
  Shape dims;
  for (int64_t d = 0; d < g.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && g.shape()[d] != 1)) dims.push_back(d);
  // The op, so a create_graph backward records it; a view only where the shape needs one, so
  // that a leaf adopts the sum as its .grad instead of copying it (a bias's gradient).
  Tensor summed = sum(g, dims, false);
  return summed.shape() == shape ? summed : summed.view(shape);
}

Tensor root_gradient(const char* op, const Tensor& out, const Tensor& gradient, bool create_graph) {
  if (!gradient.defined()) {
    AMPGRAD_CHECK(out.numel() == 1, op << ": grad can be implicitly created only for scalar outputs; got shape " << shape_str(out.shape()));
    return ones_like(out);
  }
  AMPGRAD_CHECK(gradient.shape() == out.shape(),
                op << ": gradient of shape " << shape_str(gradient.shape()) << " does not match output of shape " << shape_str(out.shape()));
  if (gradient.dtype() == out.dtype()) return gradient;
  return create_graph ? cast(gradient, out.dtype()) : cast(gradient.detach(), out.dtype());
}

static void sum_into(Tensor& slot, const Tensor& g) {  // where two paths' gradients meet (a residual connection)
  if (g.defined()) slot = slot.defined() ? slot + g : g;
}

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
  Span span("AccumulateGrad", SpanKind::node);  // PyTorch's name for this step, to listeners
  const Tensor grad(leaf.grad);
  if (grad.defined() && !is_grad_enabled() && grad.is_contiguous() && !grad.shares_storage(g)) kernels::add_(grad, g, 1.0);
  else if (grad.defined()) leaf.grad = (grad + g).impl_ptr();
  else if (g.impl_ptr().use_count() == 1 && g.impl().storage.use_count() == 1 && !g.impl().is_view && g.is_contiguous())
    leaf.grad = g.impl_ptr();
  else leaf.grad = g.clone().impl_ptr();
}

// The gradients n sends its inputs, given the one it received, each reduced to its input's
// shape (undefined: none came, or that input wants none); its saved tensors are freed after
// unless the graph is retained.
static Grads run_node(Node& n, const Tensor& g, const Needs& needs, bool retain_graph, bool create_graph) {
  if (!g.defined()) return {};
  AMPGRAD_CHECK(n.backward, "backward: trying to backward through the graph a second time (through '"
                                << n.name << "'); its saved values were freed after the first backward. "
                                << "Pass retain_graph=true to the first backward if you need to call it twice");
  Span span(n.name, SpanKind::node);  // the one announcement per node: timelines, and what names its memory
  Grads gs = create_graph ? recorded_backward(n, g, needs) : call_backward(n, g, needs);
  if (!retain_graph && !n.reusable) n.backward = nullptr;  // frees the saved tensors now
  for (size_t i = 0; i < gs.size() && i < n.edges.size(); ++i)
    if (gs[i].defined() && n.edges[i]) gs[i] = sum_to(gs[i], n.input_shapes[i]);
  return gs;
}

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads, bool retain_graph, const Catches& catches,
                  bool create_graph) {
  AMPGRAD_CHECK(roots.size() == root_grads.size(), "backward: " << roots.size() << " roots and " << root_grads.size() << " gradients");
  GradModeGuard grad_mode(create_graph);  // plain values, or values with a graph to differentiate again
  amp::suspend no_autocast;               // each gradient runs in the dtype its forward ran in
  Span pass("backward", SpanKind::backward);  // to listeners: the kernels inside it are backward
  Node root;                              // the pass's start, as PyTorch's GraphRoot: its gradients are root_grads
  for (const Tensor& r : roots) {
    root.edges.push_back(edge_to(r));
    root.input_shapes.push_back(r.shape());
  }

  // 1. How many gradients each node and leaf will receive: one along each edge into it.
  std::unordered_map<const void*, int> pending;
  std::vector<Node*> stack{&root};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->edges)
      if (e && !catches.stops(key_of(e)) && pending[key_of(e)]++ == 0 && e.fn) stack.push_back(e.fn.get());
  }

  // 2. Run each node once all its gradients are in, and send on what it returns: to a stop
  //    point, into a leaf's .grad (announced once its last one is in), or summed for the node
  //    that made the input.
  std::unordered_map<Node*, Tensor> received;
  std::unordered_set<const TensorImpl*> unannounced;  // leaves given a gradient, until their last one
  std::vector<Node*> ready{&root};
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    Tensor g = std::move(received[n]);  // undefined when no consumer sent anything
    received.erase(n);
    if (catches.observes(n)) (*catches.observe)[n] = g;
    Needs needs(n->edges.size());
    for (size_t i = 0; i < needs.size(); ++i) needs[i] = catches.wants(n->edges[i]);
    if (std::none_of(needs.begin(), needs.end(), [](bool b) { return b; })) continue;  // nothing below is wanted, nor waits for it
    Grads gs = n == &root ? root_grads : run_node(*n, g, needs, retain_graph, create_graph);
    for (size_t i = 0; i < n->edges.size(); ++i) {
      const Edge& e = n->edges[i];
      if (!e) continue;
      Tensor gi = i < gs.size() ? std::move(gs[i]) : Tensor();  // ours the only handle, so a fresh gradient can be adopted
      if (const void* key = key_of(e); catches.stops(key)) {
        sum_into((*catches.stop_at)[key], gi);
      } else if (e.leaf) {
        if (gi.defined() && catches.accumulates()) {
          accumulate_into_leaf(*e.leaf, std::move(gi));
          if (observed()) unannounced.insert(e.leaf.get());
        }
        if (--pending[key] == 0 && unannounced.erase(e.leaf.get())) announce([&](Observer& o) { o.on_grad_accumulated(Tensor(e.leaf)); });
      } else {
        sum_into(received[e.fn.get()], gi);
        if (--pending[key] == 0) ready.push_back(e.fn.get());
      }
    }
  }
}

}  // namespace ampgrad::autograd
