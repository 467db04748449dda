// node.cpp — how an op records its node (record, attach, edge_to), how one node's backward runs
// (call_backward) and reads what it saved (Saved::get, with its version check), and how a long
// chain of nodes is freed without recursion. Walking the graph is engine.cpp's.
#include <algorithm>
#include <atomic>
#include <utility>

#include "autograd/node.h"
#include "tensor/observer.h"

namespace ampgrad::autograd {

Node::~Node() {
  // Free the chain below this node with an explicit stack: a node whose last owner is this
  // chain is detached from it first, so its own destructor finds nothing left to recurse into.
  // (The backward goes first: the Saved tensors in it hold their producers too.)
  std::vector<std::shared_ptr<Node>> stack;
  auto take = [&stack](Node& n) {
    n.backward = nullptr;
    for (Edge& e : n.edges)
      if (e.fn && e.fn.use_count() == 1) stack.push_back(std::move(e.fn));
  };
  take(*this);
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    take(*n);
  }
}

// One count for all threads: a node recorded before another, on whatever thread, has the lower number.
static std::atomic<uint64_t> sequence_counter{0};
uint64_t next_sequence_nr() { return sequence_counter.load(); }

Edge edge_to(const Tensor& x) {
  Edge e;
  if (x.defined() && x.requires_grad()) {
    if (x.grad_fn()) e.fn = x.grad_fn();
    else e.leaf = x.impl_ptr();
  }
  return e;
}

void attach(Tensor& out, std::shared_ptr<Node> node) {
  node->sequence_nr = sequence_counter++;
  node->output = out.impl_ptr();
  out.impl().requires_grad = true;
  out.impl().grad_fn = std::move(node);
}

void record(const char* name, Tensor& out, const std::vector<Tensor>& inputs, BackwardFn backward) {
  announce([&](Observer& o) { o.on_op_output(out, name, inputs); });
  auto wants_grad = [](const Tensor& x) { return x.defined() && x.requires_grad(); };
  if (!is_grad_enabled() || std::none_of(inputs.begin(), inputs.end(), wants_grad)) return;
  auto node = std::make_shared<Node>();
  node->name = name;
  for (const Tensor& x : inputs) {
    node->edges.push_back(edge_to(x));
    node->input_shapes.push_back(x.defined() ? x.shape() : Shape{});
  }
  node->backward = std::move(backward);
  attach(out, std::move(node));
}

void record(const char* name, Tensor& out, const std::vector<Tensor>& inputs, BackwardFn backward, OnceDifferentiable) {
  record(name, out, inputs, std::move(backward));
  if (out.grad_fn()) out.grad_fn()->once_differentiable = true;
}

static thread_local const char* running_backward = "";  // the node whose backward runs now, for errors

Tensor Saved::get() const {
  AMPGRAD_CHECK(!tensor_.defined() || tensor_.version() == version_,
                "backward of '" << running_backward << "': one of the variables needed for gradient computation has been modified "
                "by an inplace operation: [" << dtype_name(tensor_.dtype()) << " " << shape_str(tensor_.shape()) << "] is at version "
                << tensor_.version() << "; expected version " << version_ << " instead (an optimizer step or copy_ between "
                "forward and backward?)");
  return tensor_.defined() && recording_backward() ? linked() : tensor_;  // create_graph: linked to the graph (create_graph.cpp)
}

Grads call_backward(Node& n, const Tensor& g, const Needs& needs) {
  struct Running {  // n named in Saved's errors, the outer node restored after, for engines nest
    const char* outer;
    ~Running() { running_backward = outer; }
  } running{std::exchange(running_backward, n.name)};
  return n.backward(g, needs);
}

}  // namespace ampgrad::autograd
