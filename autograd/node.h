// node.h — one recorded op in the graph, and how ops record it.
// A Node holds the op's backward (a function of the output's gradient returning one gradient
// per input) and an edge per input: to the node that produced it, or to the leaf whose .grad
// receives it. Every op has one differentiable output, so a node needs no output index.
//
//   Tensor out = kernels::unary(Unary::exp, x);
//   record("exp", out, {x}, [y = Saved(out)](const Tensor& g, const Needs&) {
//     return grads(g * y);                 // d exp(x)/dx = exp(x): save the output
//   });
//
// Tensors a backward reads are captured as Saved: detached, with their storage's version, so that
// reading one after an in-place write is an error, and with the edge their own gradient went
// along (an op's output is told by identity instead: holding its own node would tie the graph
// into a cycle).
//
// Because every backward is written with the library's own ops, a backward run with
// create_graph (grad mode on) records a graph of its own: the gradient can be differentiated
// again (Hessian-vector products, gradient penalties). A backward on fused kernels returns
// composite_backward while it is recorded; one that cannot is recorded `once_differentiable`:
// its gradients then lead to a node that raises if a second backward reaches it, never to a
// silent zero.
#pragma once
#include <functional>
#include <initializer_list>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "autograd/grad_mode.h"
#include "tensor/tensor.h"

namespace ampgrad::autograd {

using Needs = std::vector<bool>;  // needs[i]: does input i want a gradient? (skip work if not)
using Grads = std::vector<Tensor>;
using BackwardFn = std::function<Grads(const Tensor& grad_out, const Needs& needs)>;

struct Edge {
  std::shared_ptr<Node> fn;          // the producer of a non-leaf input
  std::shared_ptr<TensorImpl> leaf;  // or the leaf that accumulates the gradient
  explicit operator bool() const { return fn || leaf; }
};

struct Node : std::enable_shared_from_this<Node> {
  const char* name = "";          // the op, e.g. "matmul": errors and traces name it
  std::vector<Edge> edges;        // one per input, empty for inputs that need no gradient
  std::vector<Shape> input_shapes;
  BackwardFn backward;            // emptied after use unless retain_graph or reusable
  bool reusable = false;          // saves nothing, so later backwards may run it again (cached casts)
  uint64_t sequence_nr = 0;       // recording order, one count for all threads: checkpoint tells its region's nodes by it
  bool once_differentiable = false;  // the backward calls kernels directly: its arithmetic cannot be recorded
  std::weak_ptr<const TensorImpl> output;  // the output's identity (compared, never read): how a saved output finds its node
  ~Node();                        // iterative, so a 100,000-node chain frees without recursion
};

template <class... Ts> Grads grads(Ts&&... ts) { return Grads{Tensor(std::forward<Ts>(ts))...}; }

Edge edge_to(const Tensor& x);  // x's grad_fn, or x as a leaf; empty if x needs no gradient

// A tensor saved for backward. Read through it (it converts to Tensor, or get() for a member
// call) only inside the backward: if an in-place op (an optimizer step between forward and
// backward, say) has written its storage since, the read raises PyTorch's error instead of
// giving a silently wrong gradient. Under create_graph the read comes back linked to the graph
// it was saved from (its producer, its leaf, or, for the op's own output, the node being run),
// so the recorded gradient depends on it as the math does.
class Saved {
 public:
  Saved(const Tensor& t)
      : tensor_(t.defined() ? t.detach() : t), version_(t.defined() ? t.version() : 0), source_(edge_to(t)),
        origin_(t.defined() ? t.impl_ptr() : nullptr) {}
  operator Tensor() const { return get(); }
  Tensor get() const;

 private:
  Tensor linked() const;  // under create_graph: the value joined to its graph (create_graph.cpp)
  Tensor tensor_;
  uint64_t version_;
  Edge source_;                          // where t's own gradient went when it was saved
  // t's identity: an output is saved before its node exists. Weak: it keeps no tensor alive, and
  // while it is held no other tensor can take this identity.
  std::weak_ptr<const TensorImpl> origin_;
};

// Tag for record(): the backward calls kernels directly, so a create_graph backward cannot
// record it; a second backward through its gradients raises (create_graph.cpp). The scaled 8-bit
// GEMM's backward uses it; it is for an op that has no better answer (docs/double-backward.md).
struct OnceDifferentiable {};
inline constexpr OnceDifferentiable once_differentiable{};

// Whether the backward running now is being recorded (create_graph). A backward built on fused
// kernels (layer_norm's, batch_norm's closed form) then returns composite_backward instead: the
// gradients of `forward`, the op written in the library's own ops, taken with create_graph from
// the inputs (Saved, so linked) and g. The fused path stays the fast one; this one is exact to
// any order. (create_graph.cpp; composite_backward: grad.cpp)
bool recording_backward();
using CompositeFn = std::function<Tensor(const std::vector<Tensor>& inputs)>;
Grads composite_backward(const CompositeFn& forward, const std::vector<Tensor>& inputs, const Tensor& g, const Needs& needs);

// If grad mode is on and any input requires grad, attaches a Node to `out`.
void record(const char* name, Tensor& out, const std::vector<Tensor>& inputs, BackwardFn backward);
void record(const char* name, Tensor& out, const std::vector<Tensor>& inputs, BackwardFn backward, OnceDifferentiable);

// Runs n's backward on g: the plain pass's step (node.cpp); create_graph's adds recording it
// (recorded_backward, create_graph.cpp).
Grads call_backward(Node& n, const Tensor& g, const Needs& needs);
Grads recorded_backward(Node& n, const Tensor& g, const Needs& needs);

// record's two halves, for a node whose edges are not one per input tensor (checkpoint.cpp):
void attach(Tensor& out, std::shared_ptr<Node> node);  // numbers the node, makes it out's grad_fn
uint64_t next_sequence_nr();   // the number the next recorded node gets

// Gradients taken on their way to leaves (keyed by TensorImpl*) or nodes (Node*): the gradient
// arriving for a node is the gradient of its op's output, since every op has one differentiable
// output (a multi-output op would need a key per output here).
using Caught = std::unordered_map<const void*, Tensor>;

// The key a gradient on its way along e is counted, stopped or observed under: e's node, or its leaf.
inline const void* key_of(const Edge& e) { return e.fn ? (const void*)e.fn.get() : (const void*)e.leaf.get(); }

// What a backward pass takes on its way:
struct Catches {
  // Leaves or nodes whose gradients are summed here instead of passed on or accumulated, so
  // nothing below them runs (checkpoint's boundary, grad()'s leaf inputs).
  Caught* stop_at = nullptr;
  // Nodes (only) whose gradient is recorded as they receive it, the walk going on below them
  // (grad()'s intermediate inputs).
  Caught* observe = nullptr;
  // grad()'s pruning (grad.cpp): the nodes that lead to a stop or observe point, the only ones
  // whose gradients are wanted, and no .grad changes. Null: every gradient is, and leaves accumulate.
  const std::unordered_set<Node*>* leading = nullptr;

  bool stops(const void* key) const { return stop_at && stop_at->count(key); }
  bool observes(Node* n) const { return observe && observe->count(n); }
  bool accumulates() const { return !leading; }
  bool wants(const Edge& e) const {  // a gradient along e
    return e && (!leading || stops(key_of(e)) || (e.fn && (observes(e.fn.get()) || leading->count(e.fn.get()))));
  }
};

// Runs the backward pass from `roots`, each with its gradient (the engine: engine.cpp). With
// create_graph the backwards run in grad mode, so the gradients carry a graph of their own.
// Reentrant: a backward may run the engine itself (checkpoint's rerun, composite_backward).
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads, bool retain_graph, const Catches& catches = {},
                  bool create_graph = false);

// The gradient a backward from `out` starts with: `gradient`, checked against out's shape and
// cast to its dtype (differentiably under create_graph), or ones if undefined and out has one
// element. `op` names the caller in errors.
Tensor root_gradient(const char* op, const Tensor& out, const Tensor& gradient, bool create_graph);

// Sums a broadcast gradient back to `shape` (the inverse of broadcasting).
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace ampgrad::autograd
