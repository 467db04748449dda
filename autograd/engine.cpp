// engine.cpp — reverse-mode autodiff: from one or more roots, count each node's consumers, then
// run nodes in an order where every node runs after all of its consumers have delivered their
// gradients, accumulating into the leaves' .grad or taking gradients at stop and observe points
// (checkpoint, grad()). Iterative throughout (no recursion), so graph depth is bounded only by
// memory.
#include <algorithm>
#include <atomic>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "amp/autocast.h"
#include "autograd/autocast.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"
#include "tensor/memory_history.h"
#include "tensor/profile.h"

namespace ampgrad {

static thread_local bool grad_enabled = true;
bool is_grad_enabled() { return grad_enabled; }
void set_grad_enabled(bool e) { grad_enabled = e; }

}  // namespace ampgrad

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

static thread_local const char* running_backward = "";  // the node whose backward runs now, for errors
static thread_local Node* recording_node = nullptr;  // that node, while create_graph records its backward
bool recording_backward() { return recording_node != nullptr; }

template <class A, class B> static bool same_owner(const A& a, const B& b) { return !a.owner_before(b) && !b.owner_before(a); }

Tensor Saved::get() const {
  AMPGRAD_CHECK(!tensor_.defined() || tensor_.version() == version_,
                "backward of '" << running_backward << "': one of the variables needed for gradient computation has been modified "
                "by an inplace operation: [" << dtype_name(tensor_.dtype()) << " " << shape_str(tensor_.shape()) << "] is at version "
                << tensor_.version() << "; expected version " << version_ << " instead (an optimizer step or copy_ between "
                "forward and backward?)");
  if (!recording_node || !tensor_.defined()) return tensor_;
  if (source_.leaf) return Tensor(source_.leaf);  // the leaf itself, so a second backward accumulates into its .grad
  std::shared_ptr<Node> fn = source_.fn;
  if (!fn && same_owner(origin_, recording_node->output)) fn = recording_node->shared_from_this();  // the op's own output
  if (!fn) return tensor_;  // a constant of the op (a mask, an index)
  Tensor linked = tensor_.detach();
  linked.impl().requires_grad = true;
  linked.impl().grad_fn = std::move(fn);
  return linked;
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
  name_output(out, name);
  if (!is_grad_enabled()) return;
  bool any = false;
  for (const Tensor& x : inputs) any = any || (x.defined() && x.requires_grad());
  if (!any) return;
  auto node = std::make_shared<Node>();
  node->name = name;
  for (const Tensor& x : inputs) {
    node->edges.push_back(edge_to(x));
    node->input_shapes.push_back(x.defined() ? x.shape() : Shape{});
    node->input_dtypes.push_back(x.defined() ? x.dtype() : kFloat32);
  }
  node->backward = std::move(backward);
  attach(out, std::move(node));
}

void record(const char* name, Tensor& out, const std::vector<Tensor>& inputs, BackwardFn backward, OnceDifferentiable) {
  record(name, out, inputs, std::move(backward));
  if (out.grad_fn()) out.grad_fn()->once_differentiable = true;
}

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
  AllocationName named("AccumulateGrad");  // PyTorch's name for this step
  const Tensor grad(leaf.grad);
  if (grad.defined() && !is_grad_enabled() && grad.is_contiguous() && !grad.shares_storage(g)) kernels::axpy_(grad, g, 1.0);
  else if (grad.defined()) leaf.grad = (grad + g).impl_ptr();
  else if (g.impl_ptr().use_count() == 1 && g.impl().storage.use_count() == 1 && !g.impl().is_view && g.is_contiguous())
    leaf.grad = g.impl_ptr();
  else leaf.grad = g.clone().impl_ptr();
}

static void sum_into(Tensor& slot, const Tensor& g) {
  AllocationName named("gradient sum");  // where two paths' gradients meet (a residual connection)
  if (g.defined()) slot = slot.defined() ? slot + g : g;
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

// What a once-differentiable backward's gradient becomes under create_graph: the same values,
// produced by a node whose edges lead where the gradient depends (the incoming gradient and the
// op's inputs) and whose backward raises, as PyTorch's DelayedError: a second backward that
// reaches it is refused by name, one that does not is unaffected.
static Tensor not_differentiable_again(const Node& n, const Tensor& gi, const Tensor& g) {
  auto refusal = std::make_shared<Node>();
  refusal->name = n.name;
  auto link = [&](const Edge& e, const Shape& shape, DType dtype) {
    if (!e) return;
    refusal->edges.push_back(e);
    refusal->input_shapes.push_back(shape);
    refusal->input_dtypes.push_back(dtype);
  };
  link(edge_to(g), g.shape(), g.dtype());
  for (size_t i = 0; i < n.edges.size(); ++i) link(n.edges[i], n.input_shapes[i], n.input_dtypes[i]);
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

// The node whose backward runs, named in errors and in a MemoryHistory, and the one whose Saved
// tensors come back linked while create_graph records it (Saved::get); both restored after, for
// engines nest.
struct Running {
  const char* outer_name;
  Node* outer_recording;
  AllocationName named;
  Running(const Node& n, Node* recording)
      : outer_name(std::exchange(running_backward, n.name)), outer_recording(std::exchange(recording_node, recording)),
        named(n.name, " backward") {}
  ~Running() {
    running_backward = outer_name;
    recording_node = outer_recording;
  }
};

// Runs n's backward. Under create_graph it runs in grad mode with its Saved tensors linked to the
// graph, so its arithmetic is recorded; a once-differentiable one runs unrecorded instead.
static Grads call_backward(Node& n, const Tensor& g, const Needs& needs, bool create_graph) {
  const bool recorded = create_graph && !n.once_differentiable;
  Grads gs;
  {
    GradModeGuard grad_mode(recorded);
    Running running(n, recorded ? &n : nullptr);
    gs = n.backward(g, needs);
  }
  if (create_graph && n.once_differentiable)
    for (Tensor& gi : gs)
      if (gi.defined()) gi = not_differentiable_again(n, gi, g);
  return gs;
}

// The key a gradient on its way along e is stopped or observed under: e's node, or its leaf.
static const void* key_of(const Edge& e) { return e.fn ? (const void*)e.fn.get() : (const void*)e.leaf.get(); }

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads, bool retain_graph, const Catches& catches,
                  bool create_graph) {
  AMPGRAD_CHECK(roots.size() == root_grads.size(), "backward: " << roots.size() << " roots and " << root_grads.size() << " gradients");
  GradModeGuard grad_mode(create_graph);  // plain values, or values with a graph to differentiate again
  amp::suspend no_autocast;  // each gradient runs in the dtype its forward ran in
  InBackward profiled_as_backward;
  auto stops = [&](const void* key) { return catches.stop_at && catches.stop_at->count(key); };
  auto observed = [&](Node* n) { return catches.observe && catches.observe->count(n); };

  // 0. A root stopped at itself, or a leaf, takes its gradient at once; the others start the walk.
  std::unordered_map<Node*, Tensor> received;
  std::vector<Node*> starts;
  for (size_t r = 0; r < roots.size(); ++r) {
    Node* node = roots[r].grad_fn().get();
    if (const void* key = node ? (const void*)node : roots[r].impl_ptr().get(); stops(key)) {
      sum_into((*catches.stop_at)[key], root_grads[r]);
    } else if (node) {
      if (!received.count(node)) starts.push_back(node);
      sum_into(received[node], root_grads[r]);
    } else if (catches.accumulate_leaves) {
      accumulate_into_leaf(roots[r].impl(), root_grads[r]);
    }
  }

  // 1. How many consumers will send each node a gradient.
  std::unordered_map<Node*, int> pending;
  std::vector<Node*> stack = starts;
  for (Node* s : starts) pending[s] = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (Edge& e : n->edges) {
      if (!e.fn || stops(e.fn.get())) continue;
      auto [it, fresh] = pending.try_emplace(e.fn.get(), 0);
      ++it->second;
      if (fresh) stack.push_back(e.fn.get());
    }
  }

  // 1b. With no leaves to accumulate (grad()), a node runs only if it leads to a gradient someone
  //     wants: one of its edges goes to a stop point, an observed node or a node that runs
  //     (PyTorch's exec_info). The rest neither runs nor frees its saved tensors. Children come
  //     before parents in this depth-first post-order, the graph being acyclic.
  std::unordered_set<Node*> runs;
  auto wanted = [&](const Edge& e) {
    if (!e || catches.accumulate_leaves) return bool(e);
    return stops(key_of(e)) || (e.fn && (observed(e.fn.get()) || runs.count(e.fn.get())));
  };
  if (!catches.accumulate_leaves) {
    std::unordered_set<Node*> seen;
    std::vector<std::pair<Node*, bool>> dfs;  // (node, its children done)
    for (Node* s : starts) dfs.push_back({s, false});
    while (!dfs.empty()) {
      auto [n, children_done] = dfs.back();
      dfs.pop_back();
      if (children_done) {
        if (std::any_of(n->edges.begin(), n->edges.end(), wanted)) runs.insert(n);
      } else if (seen.insert(n).second) {
        dfs.push_back({n, true});
        for (Edge& e : n->edges)
          if (e.fn && !stops(e.fn.get()) && !seen.count(e.fn.get())) dfs.push_back({e.fn.get(), false});
      }
    }
  }

  // 2. Run nodes whose consumers are all done, summing what each receives.
  std::vector<Node*> ready;
  for (Node* s : starts)
    if (pending[s] == 0) ready.push_back(s);  // a root another root feeds waits for it
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    Tensor g = std::move(received[n]);  // undefined when no consumer sent anything
    received.erase(n);
    if (observed(n)) (*catches.observe)[n] = g;
    if (!catches.accumulate_leaves && !runs.count(n)) continue;  // nothing below is wanted, nor waits for it
    Grads gs;
    if (g.defined()) {
      AMPGRAD_CHECK(n->backward, "backward: trying to backward through the graph a second time (through '"
                                     << n->name << "'); its saved values were freed after the first backward. "
                                     << "Pass retain_graph=true to the first backward if you need to call it twice");
      Needs needs(n->edges.size());
      for (size_t i = 0; i < needs.size(); ++i) needs[i] = wanted(n->edges[i]);
      gs = call_backward(*n, g, needs, create_graph);
      if (!retain_graph && !n->reusable) n->backward = nullptr;  // frees the saved tensors now
    }
    for (size_t i = 0; i < n->edges.size(); ++i) {
      Edge& e = n->edges[i];
      Tensor gi;
      if (i < gs.size() && gs[i].defined() && e) {
        AllocationName named(n->name, " backward");  // reduced to its input's shape, still the node's gradient
        gi = sum_to(gs[i], n->input_shapes[i]);
      }
      if (e && stops(key_of(e))) {
        sum_into((*catches.stop_at)[key_of(e)], gi);
        continue;
      }
      if (e.leaf) {
        if (i < gs.size()) gs[i] = Tensor();  // drop our other handle, so a fresh gradient can be adopted
        if (gi.defined() && catches.accumulate_leaves) accumulate_into_leaf(*e.leaf, std::move(gi));
        continue;
      }
      if (!e.fn) continue;
      sum_into(received[e.fn.get()], gi);
      if (--pending[e.fn.get()] == 0) ready.push_back(e.fn.get());
    }
  }
}

}  // namespace ampgrad::autograd
