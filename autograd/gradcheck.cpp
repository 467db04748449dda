// gradcheck.cpp — the Jacobian comparison behind gradcheck(). Elements are read and written
// through copies and one-element fills, never raw pointers, so the inputs may live on any device.
#include "autograd/gradcheck.h"

#include <cmath>

#include "autograd/grad.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "tensor/random.h"

namespace ampgrad {

bool gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, double eps, double atol, double rtol) {
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.defined() || !x.requires_grad()) continue;
    AMPGRAD_CHECK(x.dtype() == kFloat64 && x.is_contiguous(), "gradcheck: input " << k << " must be a contiguous float64 tensor, got "
                                                                             << (x.is_contiguous() ? "" : "a strided ") << dtype_name(x.dtype()));
  }
  Tensor out = fn(inputs);
  const int64_t m = out.numel();
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.defined() || !x.requires_grad()) continue;
    const int64_t n = x.numel();
    // numerical Jacobian, column by column (n columns of m entries)
    std::vector<double> numerical(m * n);
    const std::vector<double> values = to_vector<double>(x);
    {
      NoGradGuard no_grad;
      for (int64_t i = 0; i < n; ++i) {
        Tensor element = x.view({n}).narrow(0, i, 1);
        element.fill_(values[i] + eps);
        std::vector<double> plus = to_vector<double>(fn(inputs).to(kFloat64));
        element.fill_(values[i] - eps);
        std::vector<double> minus = to_vector<double>(fn(inputs).to(kFloat64));
        element.fill_(values[i]);
        for (int64_t o = 0; o < m; ++o) numerical[o * n + i] = (plus[o] - minus[o]) / (2 * eps);
      }
    }
    // analytical Jacobian, row by row
    for (int64_t o = 0; o < m; ++o) {
      for (const Tensor& in : inputs)
        if (in.defined() && in.requires_grad()) in.impl().grad.reset();
      Tensor seed = zeros(out.shape(), TensorOptions(out.dtype()).device(out.device()));
      seed.view({m}).narrow(0, o, 1).fill_(1);
      if (Tensor y = fn(inputs); y.requires_grad()) y.backward(seed);  // else constant in every input: a zero row
      Tensor g = x.grad();
      std::vector<double> row = g.defined() ? to_vector<double>(g) : std::vector<double>(n, 0.0);
      for (int64_t i = 0; i < n; ++i) {
        double num = numerical[o * n + i], ana = row[i];
        AMPGRAD_CHECK(std::abs(num - ana) <= atol + rtol * std::abs(num),
                      "gradcheck: Jacobian mismatch for input " << k << ", output element " << o << ", input element " << i
                                                                << ": numerical " << num << ", analytical " << ana);
      }
    }
    x.impl().grad.reset();
  }
  return true;
}

bool gradgradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, double eps, double atol, double rtol) {
  const Tensor out = fn(inputs);
  Generator gen(0);
  std::vector<Tensor> checked = inputs;  // and v, last: a backward must be differentiable in its incoming gradient too
  checked.push_back(randn(out.shape(), TensorOptions(out.dtype()).device(out.device()), &gen).requires_grad_());
  // fn's gradients, flattened end to end: Σ_o v_o ∂fn_o/∂x for each checked input x (zeros for
  // one fn does not use). Grad mode is on even where gradcheck perturbs under NoGradGuard.
  auto gradients = [&fn](const std::vector<Tensor>& in) {
    EnableGradGuard recorded;
    const std::vector<Tensor> xs(in.begin(), in.end() - 1);
    std::vector<Tensor> wrt;
    for (const Tensor& x : xs)
      if (x.defined() && x.requires_grad()) wrt.push_back(x);
    const std::vector<Tensor> gs = autograd::grad({fn(xs)}, wrt, {in.back()}, std::nullopt, /*create_graph=*/true, /*allow_unused=*/true);
    std::vector<Tensor> flat;
    for (size_t k = 0; k < gs.size(); ++k) flat.push_back(gs[k].defined() ? gs[k].reshape({-1}) : zeros({wrt[k].numel()}, TensorOptions(wrt[k].dtype()).device(wrt[k].device())));
    return cat(flat);
  };
  return gradcheck(gradients, checked, eps, atol, rtol);
}

}  // namespace ampgrad
