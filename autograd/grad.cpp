// grad.cpp — autograd::grad: the engine run with its inputs' gradients taken on the way and no
// leaf accumulation, only the part of the graph that leads to them running (the pruning); and
// composite_backward, a fused backward's recordable twin, which runs the engine the same way.
#include "autograd/grad.h"

#include <algorithm>
#include <unordered_set>

#include "autograd/node.h"

namespace ampgrad::autograd {

// Runs the engine with its gradients caught and no leaf accumulating, only the nodes that lead to
// a stop or observe point running: the rest neither run nor free their saved tensors (PyTorch's
// exec_info). Children come before parents in this depth-first post-order, the graph being
// acyclic, so a node's edges are decided before the node is.
static void run_pruned(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads, bool retain_graph, Catches catches,
                       bool create_graph) {
  std::unordered_set<Node*> leading, seen;
  catches.leading = &leading;
  std::vector<std::pair<Node*, bool>> dfs;  // (node, its children done)
  for (const Tensor& r : roots)
    if (r.grad_fn() && !catches.stops(r.grad_fn().get())) dfs.push_back({r.grad_fn().get(), false});
  while (!dfs.empty()) {
    auto [n, children_done] = dfs.back();
    dfs.pop_back();
    if (children_done) {
      if (std::any_of(n->edges.begin(), n->edges.end(), [&](const Edge& e) { return catches.wants(e); })) leading.insert(n);
    } else if (seen.insert(n).second) {
      dfs.push_back({n, true});
      for (Edge& e : n->edges)
        if (e.fn && !catches.stops(e.fn.get()) && !seen.count(e.fn.get())) dfs.push_back({e.fn.get(), false});
    }
  }
  run_backward(roots, root_grads, retain_graph, catches, create_graph);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs, const std::vector<Tensor>& grad_outputs,
                         std::optional<bool> retain_graph, bool create_graph, bool allow_unused) {
  AMPGRAD_CHECK(!outputs.empty() && !inputs.empty(), "grad: needs at least one output and one input");
  AMPGRAD_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(),
                "grad: got " << grad_outputs.size() << " grad_outputs for " << outputs.size() << " outputs");
  std::vector<Tensor> root_grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    AMPGRAD_CHECK(outputs[i].defined() && outputs[i].requires_grad(), "grad: output " << i << " does not require grad and has no grad_fn");
    root_grads.push_back(root_gradient("grad", outputs[i], grad_outputs.empty() ? Tensor() : grad_outputs[i], create_graph));
  }
  // A leaf input's gradient is caught where it arrives; an intermediate one's is observed as its
  // node receives it, and the walk goes on below it, since another input may lie there.
  std::vector<const void*> targets;
  Caught at_leaves, at_nodes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    AMPGRAD_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "grad: input " << i << " does not require grad");
    const bool leaf = !inputs[i].grad_fn();
    targets.push_back(leaf ? (const void*)inputs[i].impl_ptr().get() : (const void*)inputs[i].grad_fn().get());
    (leaf ? at_leaves : at_nodes)[targets.back()] = Tensor();
  }
  run_pruned(outputs, root_grads, retain_graph.value_or(create_graph), {.stop_at = &at_leaves, .observe = &at_nodes}, create_graph);
  std::vector<Tensor> gradients;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& g = at_leaves.count(targets[i]) ? at_leaves[targets[i]] : at_nodes[targets[i]];
    AMPGRAD_CHECK(g.defined() || allow_unused, "grad: input " << i << " is not used in the graph of the outputs (allow_unused gives it an "
                                                                     "undefined gradient)");
    gradients.push_back(g);
  }
  return gradients;
}

// Each wanted input enters the composite through a view of its own, whose node is a stop: its
// gradient is caught there and the walk goes no further, whatever produced the input (below it
// lies the rest of the model's graph, which the outer backward walks anyway).
Grads composite_backward(const CompositeFn& forward, const std::vector<Tensor>& inputs, const Tensor& g, const Needs& needs) {
  std::vector<Tensor> operands = inputs;
  Caught at_views;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!needs[i] || !inputs[i].defined() || !inputs[i].requires_grad()) continue;
    operands[i] = inputs[i].view(inputs[i].shape());
    at_views[operands[i].grad_fn().get()] = Tensor();
  }
  Grads out(inputs.size());
  if (at_views.empty()) return out;
  run_pruned({forward(operands)}, {g}, /*retain_graph=*/true, {.stop_at = &at_views}, /*create_graph=*/true);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (operands[i].defined() && operands[i].grad_fn() && at_views.count(operands[i].grad_fn().get())) out[i] = at_views[operands[i].grad_fn().get()];
  return out;
}

}  // namespace ampgrad::autograd
