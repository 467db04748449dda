// functional.h — torch.autograd.functional: the derivatives of a function, as values. Each is a
// few backward passes over fn's graph, with create_graph where a derivative of a derivative is
// needed:
//
//   auto f = [](const std::vector<Tensor>& in) { return (in[0] * in[0] * in[0]).sum(); };
//   auto H = autograd::functional::hessian(f, {x});          // H[0][0] = diag(6x)
//   auto [y, Hv] = autograd::functional::hvp(f, {x}, {v});   // 6x·v, without forming H
//
// fn maps the inputs to one tensor. fn's graph starts at the inputs (taken as new leaves, or under
// create_graph through views that keep their link); an input fn does not use gets zeros, as
// PyTorch's strict=false; the results are plain values unless create_graph, when they keep a
// graph back to inputs that require grad. Each block of a Jacobian or Hessian has the dtype of the
// input it differentiates by, as in PyTorch.
#pragma once
#include <functional>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace ampgrad::autograd::functional {

using Fn = std::function<Tensor(const std::vector<Tensor>& inputs)>;

// vᵀJ: fn's output and, for each input x, Σ_o v_o ∂fn_o/∂x (one backward; v may be left out
// for a one-element output).
std::pair<Tensor, std::vector<Tensor>> vjp(const Fn& fn, const std::vector<Tensor>& inputs, const Tensor& v = {}, bool create_graph = false);

// J v: fn's output and Σ_x ∂fn/∂x · v_x, shaped as the output, by the "double-vjp" trick: uᵀJ (a
// vjp with a cotangent u) dotted with v is uᵀ(J v), whose gradient with respect to u is J v. Two
// backwards, no J; the second goes through the first, so fn must be twice differentiable (an op
// recorded once_differentiable refuses it: take jacobian or vjp there).
std::pair<Tensor, Tensor> jvp(const Fn& fn, const std::vector<Tensor>& inputs, const std::vector<Tensor>& v, bool create_graph = false);

// J: for each input x, ∂fn/∂x shaped output.shape + x.shape; one backward per output element.
std::vector<Tensor> jacobian(const Fn& fn, const std::vector<Tensor>& inputs, bool create_graph = false);

// The Hessian of a one-element fn: H[i][j] = ∂²fn/∂x_i∂x_j, shaped x_i.shape + x_j.shape; the
// Jacobian of the gradient, one backward per input element through the create_graph gradient.
std::vector<std::vector<Tensor>> hessian(const Fn& fn, const std::vector<Tensor>& inputs, bool create_graph = false);

// H v of a one-element fn: its value and, for each input x_i, Σ_j H[i][j] v_j: the gradient of
// ∇fn · v, two backwards, no H.
std::pair<Tensor, std::vector<Tensor>> hvp(const Fn& fn, const std::vector<Tensor>& inputs, const std::vector<Tensor>& v, bool create_graph = false);

}  // namespace ampgrad::autograd::functional
