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
// Tensors a backward reads are captured as Saved: detached (a saved tensor holding its own
// grad_fn would tie the graph into a cycle, or a recursion as deep as the graph when freed),
// and with their storage's version, so that reading one after an in-place write is an error.
#pragma once
#include <functional>
#include <initializer_list>
#include <memory>
#include <unordered_map>
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

struct Node {
  const char* name = "";          // the op, e.g. "matmul": errors and traces name it
  std::vector<Edge> edges;        // one per input, empty for inputs that need no gradient
  std::vector<Shape> input_shapes;
  std::vector<DType> input_dtypes;
  BackwardFn backward;            // emptied after use unless retain_graph or reusable
  bool reusable = false;          // saves nothing, so later backwards may run it again (cached casts)
  uint64_t sequence_nr = 0;       // recording order, one count for all threads: checkpoint tells its region's nodes by it
  ~Node();                        // iterative, so a 100,000-node chain frees without recursion
};

template <class... Ts> Grads grads(Ts&&... ts) { return Grads{Tensor(std::forward<Ts>(ts))...}; }

// A tensor saved for backward. Read through it (it converts to const Tensor&, or get() for a
// member call) only inside the backward: if an in-place op (an optimizer step between forward
// and backward, say) has written its storage since, the read raises PyTorch's error instead of
// giving a silently wrong gradient.
class Saved {
 public:
  Saved(const Tensor& t) : tensor_(t.defined() ? t.detach() : t), version_(t.defined() ? t.version() : 0) {}
  operator const Tensor&() const { return get(); }
  const Tensor& get() const;

 private:
  Tensor tensor_;
  uint64_t version_;
};

// If grad mode is on and any input requires grad, attaches a Node to `out`.
void record(const char* name, Tensor& out, const std::vector<Tensor>& inputs, BackwardFn backward);

// record's two halves, for a node whose edges are not one per input tensor (checkpoint.cpp):
Edge edge_to(const Tensor& x);  // x's grad_fn, or x as a leaf; empty if x needs no gradient
void attach(Tensor& out, std::shared_ptr<Node> node);  // numbers the node, makes it out's grad_fn
uint64_t next_sequence_nr();   // the number the next recorded node gets

// Gradients taken on their way to leaves (keyed by TensorImpl*) or nodes (Node*): the gradient
// arriving for a node is the gradient of its op's output, since every op has one differentiable
// output (a multi-output op would need a key per output here).
using Caught = std::unordered_map<const void*, Tensor>;

// What a backward pass takes on its way:
struct Catches {
  // Leaves or nodes whose gradients are summed here instead of passed on or accumulated, so
  // nothing below them runs (checkpoint's boundary, grad()'s leaf inputs).
  Caught* stop_at = nullptr;
  // Nodes (only) whose gradient is recorded as they receive it, the walk going on below them
  // (grad()'s intermediate inputs).
  Caught* observe = nullptr;
  // true: other leaves add their gradients into .grad. false (grad()): no .grad changes, and only
  // the nodes that lead to a stop or observe point run.
  bool accumulate_leaves = true;
};

// Runs the backward pass from `roots`, each with its gradient (the engine: engine.cpp).
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads, bool retain_graph, const Catches& catches = {});

// The gradient a backward from `out` starts with: `gradient`, checked against out's shape and
// cast to its dtype, or ones if undefined and out has one element. `op` names the caller in errors.
Tensor root_gradient(const char* op, const Tensor& out, const Tensor& gradient);

// Sums a broadcast gradient back to `shape` (the inverse of broadcasting).
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace ampgrad::autograd
