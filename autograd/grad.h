// grad.h — torch.autograd.grad: the gradients of some outputs with respect to some inputs,
// returned instead of added into any .grad. The inputs may be leaves or intermediate results
// (an activation, say, for a saliency map or to watch a layer's gradient norm).
//
//   Tensor h = relu(linear(x, w1)), loss = mse_loss(linear(h, w2), y);
//   std::vector<Tensor> g = autograd::grad({loss}, {h, w1});  // dloss/dh, dloss/dw1; no .grad changes
//
// Several outputs sum their gradients, each weighted by its grad_output (left out: a scalar
// output's is 1). As in PyTorch only the part of the graph that leads to an input runs, and
// that part is freed unless retain_graph; an input that no output depends on is an error unless
// allow_unused, when its gradient is undefined. With create_graph the gradients carry a graph
// of their own and can be differentiated again (retain_graph then defaults to true):
//
//   Tensor g = autograd::grad({loss}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
//   (loss + (g * g).sum()).backward();   // a gradient penalty: d/dw of ‖dloss/dx‖² included
#pragma once
#include <optional>
#include <vector>

#include "tensor/tensor.h"

namespace ampgrad::autograd {

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs, const std::vector<Tensor>& grad_outputs = {},
                         std::optional<bool> retain_graph = std::nullopt, bool create_graph = false, bool allow_unused = false);

}  // namespace ampgrad::autograd
