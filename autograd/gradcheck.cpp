// gradcheck.cpp — the Jacobian comparison behind gradcheck(). Elements are read and written
// through copies and one-element fills, never raw pointers, so the inputs may live on any device.
#include "autograd/gradcheck.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

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
      fn(inputs).backward(seed);
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

}  // namespace ampgrad
