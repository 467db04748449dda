// grad.h — torch.autograd.grad: the gradients of some outputs with respect to some inputs,
// returned instead of added into any .grad. The inputs may be leaves or intermediate results
// (an activation, say, for a saliency map or to watch a layer's gradient norm). The pass costs
// what a backward() costs: it runs below an intermediate input too, which another input may
// need (PyTorch prunes the branches that lead to no input; this engine does not).
//
//   Tensor h = relu(linear(x, w1)), loss = mse_loss(linear(h, w2), y);
//   auto [dh, dw1] = autograd::grad({loss}, {h, w1});   // w1.grad() and w2.grad() untouched
//
// Several outputs sum their gradients, each weighted by its grad_output (left out: a scalar
// output's is 1). As in PyTorch the graph is freed unless retain_graph, and an input that no
// output depends on is an error unless allow_unused, when its gradient is undefined. No
// create_graph: gradients are computed without a graph (no double backward, in grad() or backward()).
#pragma once
#include <vector>

#include "tensor/tensor.h"

namespace ampgrad::autograd {

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs, const std::vector<Tensor>& grad_outputs = {},
                         bool retain_graph = false, bool allow_unused = false);

}  // namespace ampgrad::autograd
