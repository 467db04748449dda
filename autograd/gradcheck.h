// gradcheck.h — compares autograd's gradients with float64 central differences, as
// torch.autograd.gradcheck does: for every output element o and input element i,
//   numerical J[o][i] = (f(x + eps e_i) − f(x − eps e_i))[o] / (2 eps)
//   analytical J[o][i] = row o of the backward pass seeded with the one-hot e_o.
// Raises ampgrad::Error naming the input, the element and both values on a mismatch.
//
//   Tensor x = randn({3, 4}, kFloat64).requires_grad_();
//   gradcheck([](auto& in) { return tanh(in[0]).sum({1}); }, {x});
//
// gradgradcheck, as torch.autograd.gradgradcheck, checks second derivatives the same way: it
// runs gradcheck on the function that returns fn's gradients for a random cotangent v of fn's
// output (made with create_graph), with respect to the inputs and to v, so the numerical side
// differentiates the gradients and the analytical side backpropagates through the graph that
// create_graph recorded.
#pragma once
#include <functional>
#include <vector>

#include "tensor/tensor.h"

namespace ampgrad {

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Inputs: contiguous float64 tensors on any device; those that require grad are checked.
// Passes when |numerical − analytical| <= atol + rtol·|numerical| everywhere; returns true.
bool gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, double eps = 1e-6, double atol = 1e-5, double rtol = 1e-3);
bool gradgradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, double eps = 1e-6, double atol = 1e-5, double rtol = 1e-3);

}  // namespace ampgrad
