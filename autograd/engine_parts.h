// engine_parts.h — the parts of a backward pass that engine.cpp's walk calls, each in a file of
// its own: running one node's backward, adding into the leaves, and which nodes a pass runs.
#pragma once
#include <memory>
#include <unordered_set>

#include "autograd/node.h"

namespace ampgrad::autograd {

// The key a gradient on its way along e is counted, stopped or observed under: e's node, or its leaf.
inline const void* key_of(const Edge& e) { return e.fn ? (const void*)e.fn.get() : (const void*)e.leaf.get(); }

// Runs n's backward on g. Under create_graph it runs in grad mode with its Saved tensors linked
// to the graph, so its arithmetic is recorded; a once-differentiable one runs unrecorded instead.
// (double_backward.cpp)
Grads call_backward(Node& n, const Tensor& g, const Needs& needs, bool create_graph);

// Adds the gradients a pass sends leaves into their .grad, if the pass accumulates, and announces
// a leaf once its last one is in. (accumulate_grad.cpp)
class LeafGradients {
 public:
  explicit LeafGradients(bool accumulate) : accumulate_(accumulate) {}
  // One of the gradients the pass sends leaf (undefined: nothing came along that edge); last:
  // the pass sends it no more.
  void add(const std::shared_ptr<TensorImpl>& leaf, Tensor g, bool last);

 private:
  bool accumulate_;
  std::unordered_set<const TensorImpl*> added_;  // leaves given a gradient and not yet announced
};

// Which gradients a pass computes. One that accumulates leaves wants them all; one that does not
// (grad()) only those that lead to a stop point or an observed node: the other nodes neither run
// nor free their saved tensors (PyTorch's exec_info). (grad.cpp)
class Wanted {
 public:
  Wanted(const Catches& catches, Node& root);
  bool operator()(const Edge& e) const;  // a gradient along e leads to one that is wanted
  bool runs(Node* n) const { return catches_.accumulate_leaves || runs_.count(n); }

 private:
  const Catches& catches_;
  std::unordered_set<Node*> runs_;
};

}  // namespace ampgrad::autograd
