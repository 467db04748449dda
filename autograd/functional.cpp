// functional.cpp — vjp, jvp, jacobian, hessian and hvp as backward passes through fn's graph.
#include "autograd/functional.h"

#include "autograd/grad.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace ampgrad::autograd::functional {

namespace {

// The inputs as fn sees them: leaves of their own, so its graph starts there; under create_graph
// an input that requires grad enters through a view instead, which keeps its link to the graph
// the caller is recording.
std::vector<Tensor> as_inputs(const char* op, const std::vector<Tensor>& inputs, bool create_graph) {
  AMPGRAD_CHECK(!inputs.empty(), op << ": needs at least one input");
  std::vector<Tensor> xs;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    AMPGRAD_CHECK(x.defined() && x.is_floating_point(),
                  op << ": input " << k << " must be a floating tensor, got " << (x.defined() ? dtype_name(x.dtype()) : "an undefined one"));
    xs.push_back(create_graph && x.requires_grad() ? x.view(x.shape()) : x.detach().requires_grad_());
  }
  return xs;
}

Tensor call(const char* op, const Fn& fn, const std::vector<Tensor>& xs) {
  Tensor out = fn(xs);
  AMPGRAD_CHECK(out.defined(), op << ": fn returned an undefined tensor");
  return out;
}

void check_one_value(const char* op, const Tensor& out) {
  AMPGRAD_CHECK(out.numel() == 1, op << ": fn must return one value, got shape " << shape_str(out.shape()));
}

// One v per input, each of its input's shape.
void check_directions(const char* op, const std::vector<Tensor>& v, const std::vector<Tensor>& xs) {
  AMPGRAD_CHECK(v.size() == xs.size(), op << ": got " << v.size() << " vectors v for " << xs.size() << " inputs");
  for (size_t k = 0; k < v.size(); ++k)
    AMPGRAD_CHECK(v[k].defined() && v[k].shape() == xs[k].shape(),
                  op << ": v[" << k << "] of shape " << (v[k].defined() ? shape_str(v[k].shape()) : "(undefined)") << " must match input " << k
                     << " of shape " << shape_str(xs[k].shape()));
}

// The gradients of out (seeded with `seed`, or ones for one element) with respect to xs: zeros
// where out does not depend on an input, plain values unless keep_graph.
std::vector<Tensor> gradients(const Tensor& out, const std::vector<Tensor>& xs, const Tensor& seed, bool retain_graph, bool keep_graph) {
  std::vector<Tensor> gs(xs.size());
  if (out.requires_grad())
    gs = grad({out}, xs, seed.defined() ? std::vector<Tensor>{seed} : std::vector<Tensor>{}, retain_graph, keep_graph, /*allow_unused=*/true);
  for (size_t k = 0; k < xs.size(); ++k) gs[k] = !gs[k].defined() ? zeros_like(xs[k]) : keep_graph ? gs[k] : gs[k].detach();
  return gs;
}

// Σ_k sum(a_k · b_k): the dot product of two lists of tensors.
Tensor dot(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  Tensor s = (a[0] * b[0]).sum();
  for (size_t k = 1; k < a.size(); ++k) s = s + (a[k] * b[k]).sum();
  return s;
}

// A one-hot tensor of `shape`: 1 at flat position i.
Tensor one_hot(const Shape& shape, int64_t i, const Tensor& like) {
  Tensor e = zeros(shape, TensorOptions(like.dtype()).device(like.device()));
  e.view({-1}).narrow(0, i, 1).fill_(1);
  return e;
}

Tensor flat_cat(const std::vector<Tensor>& ts) {
  std::vector<Tensor> flat;
  for (const Tensor& t : ts) flat.push_back(t.reshape({-1}));
  return cat(flat);
}

Shape joined(const Shape& a, const Shape& b) {
  Shape s = a;
  s.insert(s.end(), b.begin(), b.end());
  return s;
}

}  // namespace

std::pair<Tensor, std::vector<Tensor>> vjp(const Fn& fn, const std::vector<Tensor>& inputs, const Tensor& v, bool create_graph) {
  EnableGradGuard recorded;  // whatever the caller's mode: fn, and what is made of its gradients, build graphs
  const std::vector<Tensor> xs = as_inputs("vjp", inputs, create_graph);
  const Tensor out = call("vjp", fn, xs);
  AMPGRAD_CHECK(v.defined() ? v.shape() == out.shape() : out.numel() == 1,
                "vjp: v " << (v.defined() ? "of shape " + shape_str(v.shape()) : std::string("(left out)")) << " does not fit fn's output of shape "
                          << shape_str(out.shape()));
  return {create_graph ? out : out.detach(), gradients(out, xs, v, create_graph, create_graph)};
}

std::pair<Tensor, Tensor> jvp(const Fn& fn, const std::vector<Tensor>& inputs, const std::vector<Tensor>& v, bool create_graph) {
  EnableGradGuard recorded;
  const std::vector<Tensor> xs = as_inputs("jvp", inputs, create_graph);
  check_directions("jvp", v, xs);
  const Tensor out = call("jvp", fn, xs);
  AMPGRAD_CHECK(out.is_floating_point(), "jvp: fn's output must be floating, got " << dtype_name(out.dtype()));
  // u only marks where the output's gradient enters: its value does not matter, vjp being linear in it
  const Tensor u = zeros_like(out).requires_grad_();
  const Tensor ujv = dot(gradients(out, xs, u, /*retain_graph=*/true, /*keep_graph=*/true), v);  // uᵀ J v
  return {create_graph ? out : out.detach(), gradients(ujv, {u}, {}, create_graph, create_graph)[0]};
}

std::vector<Tensor> jacobian(const Fn& fn, const std::vector<Tensor>& inputs, bool create_graph) {
  EnableGradGuard recorded;
  const std::vector<Tensor> xs = as_inputs("jacobian", inputs, create_graph);
  const Tensor out = call("jacobian", fn, xs);
  std::vector<std::vector<Tensor>> rows(xs.size());  // row o of each input's J: the gradient of output element o
  for (int64_t o = 0; o < out.numel(); ++o) {
    const std::vector<Tensor> gs = gradients(out, xs, one_hot(out.shape(), o, out), /*retain_graph=*/true, create_graph);
    for (size_t k = 0; k < xs.size(); ++k) rows[k].push_back(gs[k].reshape({-1}));
  }
  std::vector<Tensor> js;
  for (size_t k = 0; k < xs.size(); ++k) {
    const Shape shape = joined(out.shape(), xs[k].shape());
    js.push_back(rows[k].empty() ? zeros(shape, TensorOptions(xs[k].dtype()).device(xs[k].device())) : stack(rows[k]).reshape(shape));
  }
  return js;
}

std::vector<std::vector<Tensor>> hessian(const Fn& fn, const std::vector<Tensor>& inputs, bool create_graph) {
  EnableGradGuard recorded;
  const std::vector<Tensor> xs = as_inputs("hessian", inputs, create_graph);
  const Tensor out = call("hessian", fn, xs);
  check_one_value("hessian", out);
  // the gradient flattened end to end; row r of H is the gradient of its element r
  const Tensor g = flat_cat(gradients(out, xs, {}, /*retain_graph=*/true, /*keep_graph=*/true));
  std::vector<Tensor> rows;
  for (int64_t r = 0; r < g.numel(); ++r)
    rows.push_back(flat_cat(gradients(g, xs, one_hot(g.shape(), r, g), /*retain_graph=*/true, create_graph)));
  const Tensor H = stack(rows);  // (N, N)
  std::vector<std::vector<Tensor>> blocks(xs.size());
  for (int64_t i = 0, row = 0; i < (int64_t)xs.size(); row += xs[i].numel(), ++i)
    for (int64_t j = 0, col = 0; j < (int64_t)xs.size(); col += xs[j].numel(), ++j)
      blocks[i].push_back(H.narrow(0, row, xs[i].numel()).narrow(1, col, xs[j].numel()).reshape(joined(xs[i].shape(), xs[j].shape())).to(xs[j].dtype()));
  return blocks;
}

std::pair<Tensor, std::vector<Tensor>> hvp(const Fn& fn, const std::vector<Tensor>& inputs, const std::vector<Tensor>& v, bool create_graph) {
  EnableGradGuard recorded;
  const std::vector<Tensor> xs = as_inputs("hvp", inputs, create_graph);
  check_directions("hvp", v, xs);
  const Tensor out = call("hvp", fn, xs);
  check_one_value("hvp", out);
  const Tensor gv = dot(gradients(out, xs, {}, /*retain_graph=*/true, /*keep_graph=*/true), v);  // ∇fn · v
  return {create_graph ? out : out.detach(), gradients(gv, xs, {}, create_graph, create_graph)};
}

}  // namespace ampgrad::autograd::functional
