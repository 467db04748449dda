// engine.cpp — reverse-mode autodiff: from one or more roots, count the gradients each node will
// receive, then run each node once all have arrived, passing the gradients it returns on to its
// inputs' nodes, into the leaves' .grad, or to stop points. Iterative throughout (no recursion),
// so graph depth is bounded only by memory. What a pass adds to that lives beside it
// (engine_parts.h): create_graph's recording, grad()'s pruning, the leaves' accumulation.
#include <unordered_map>

#include "amp/autocast.h"
#include "autograd/autocast.h"
#include "autograd/engine_parts.h"
#include "autograd/ops.h"
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

static void sum_into(Tensor& slot, const Tensor& g) {
  MadeBy named("gradient sum");  // where two paths' gradients meet (a residual connection)
  if (g.defined()) slot = slot.defined() ? slot + g : g;
}

// The gradients n sends its inputs, given the one it received (undefined: none came, none go);
// its saved tensors are freed after unless the graph is retained.
static Grads run_node(Node& n, const Tensor& g, const Wanted& wanted, bool retain_graph, bool create_graph) {
  if (!g.defined()) return {};
  AMPGRAD_CHECK(n.backward, "backward: trying to backward through the graph a second time (through '"
                                << n.name << "'); its saved values were freed after the first backward. "
                                << "Pass retain_graph=true to the first backward if you need to call it twice");
  Needs needs(n.edges.size());
  for (size_t i = 0; i < needs.size(); ++i) needs[i] = wanted(n.edges[i]);
  Grads gs;
  {
    Span span(n.name, SpanKind::node);  // to a timeline: this node's run
    gs = call_backward(n, g, needs, create_graph);
  }
  if (!retain_graph && !n.reusable) n.backward = nullptr;  // frees the saved tensors now
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
  //    point, into a leaf's .grad, or summed for the node that made the input.
  const Wanted wanted(catches, root);
  LeafGradients leaves(catches.accumulate_leaves);
  std::unordered_map<Node*, Tensor> received;
  std::vector<Node*> ready{&root};
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    Tensor g = std::move(received[n]);  // undefined when no consumer sent anything
    received.erase(n);
    if (catches.observes(n)) (*catches.observe)[n] = g;
    if (!wanted.runs(n)) continue;  // nothing below is wanted, nor waits for it
    Grads gs = n == &root ? root_grads : run_node(*n, g, wanted, retain_graph, create_graph);
    for (size_t i = 0; i < n->edges.size(); ++i) {
      const Edge& e = n->edges[i];
      if (!e) continue;
      Tensor gi;
      if (i < gs.size() && gs[i].defined()) {
        MadeBy named(n->name, " backward");  // reduced to its input's shape, still the node's gradient
        gi = sum_to(gs[i], n->input_shapes[i]);
      }
      if (const void* key = key_of(e); catches.stops(key)) {
        sum_into((*catches.stop_at)[key], gi);
      } else if (e.leaf) {
        if (i < gs.size()) gs[i] = Tensor();  // drop our other handle, so a fresh gradient can be adopted
        leaves.add(e.leaf, std::move(gi), --pending[key] == 0);
      } else {
        sum_into(received[e.fn.get()], gi);
        if (--pending[key] == 0) ready.push_back(e.fn.get());
      }
    }
  }
}

}  // namespace ampgrad::autograd
