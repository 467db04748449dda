// create_graph.cpp — what a backward with create_graph adds to running a node (node.cpp's
// call_backward): the backward runs in grad mode with its Saved tensors read back linked to the
// graph (Saved::linked), so its arithmetic is recorded and can be differentiated again; a
// once-differentiable one runs unrecorded, its gradients leading to a node that refuses a second backward.
#include <utility>

#include "autograd/node.h"

namespace ampgrad::autograd {

static thread_local Node* recording_node = nullptr;  // the node whose backward create_graph records now
// (A plain pass nested in a recorded backward runs with grad mode off: nothing of it is recorded.)
bool recording_backward() { return recording_node != nullptr && is_grad_enabled(); }

template <class A, class B> static bool same_owner(const A& a, const B& b) { return !a.owner_before(b) && !b.owner_before(a); }

Tensor Saved::linked() const {
  if (source_.leaf) return Tensor(source_.leaf);  // the leaf itself, so a second backward accumulates into its .grad
  std::shared_ptr<Node> fn = source_.fn;
  if (!fn && same_owner(origin_, recording_node->output)) fn = recording_node->shared_from_this();  // the op's own output
  if (!fn) return tensor_;  // a constant of the op (a mask, an index)
  Tensor linked = tensor_.detach();
  linked.impl().requires_grad = true;
  linked.impl().grad_fn = std::move(fn);
  return linked;
}

// What a once-differentiable backward's gradient becomes under create_graph: the same values,
// produced by a node whose edges lead where the gradient depends (the incoming gradient and the
// op's inputs) and whose backward raises, as PyTorch's DelayedError: a second backward that
// reaches it is refused by name, one that does not is unaffected.
static Tensor not_differentiable_again(const Node& n, const Tensor& gi, const Tensor& g) {
  auto refusal = std::make_shared<Node>();
  refusal->name = n.name;
  auto link = [&](const Edge& e, const Shape& shape) {
    if (!e) return;
    refusal->edges.push_back(e);
    refusal->input_shapes.push_back(shape);
  };
  link(edge_to(g), g.shape());
  for (size_t i = 0; i < n.edges.size(); ++i) link(n.edges[i], n.input_shapes[i]);
  if (refusal->edges.empty()) return gi;  // nothing a second backward could reach
  refusal->backward = [name = n.name](const Tensor&, const Needs&) -> Grads {
    AMPGRAD_CHECK(false, "backward of '" << name << "' is not differentiable twice (its backward is not recorded: once_differentiable): "
                         "a gradient made through it with create_graph cannot be differentiated again");
    return {};
  };
  Tensor out = gi.detach();
  attach(out, std::move(refusal));
  return out;
}

// The node being recorded, restored after, for engines nest (composite_backward, checkpoint's rerun).
struct Recording {
  Node* outer;
  explicit Recording(Node* n) : outer(std::exchange(recording_node, n)) {}
  ~Recording() { recording_node = outer; }
};

Grads recorded_backward(Node& n, const Tensor& g, const Needs& needs) {
  const bool recorded = !n.once_differentiable;
  Grads gs;
  {
    GradModeGuard grad_mode(recorded);
    Recording recording(recorded ? &n : nullptr);
    gs = call_backward(n, g, needs);
  }
  if (!recorded)
    for (Tensor& gi : gs)
      if (gi.defined()) gi = not_differentiable_again(n, gi, g);
  return gs;
}

}  // namespace ampgrad::autograd
