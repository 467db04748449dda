// elementwise.cpp — the C++ side of CUDA maps and zips: the output on the input's device, and a
// Loop for the kernel (arguments were checked in tensor/kernels.cpp). The kernels are in
// elementwise.cu; copy_ is in copy.cpp.
#include "tensor/cuda/loops.h"

namespace ampgrad::cuda {
using namespace ampgrad::kernels;

Tensor unary(Unary op, const Tensor& x, const ScalarArgs& scalars) {
  Tensor out = empty_on(x, x.shape(), x.dtype());
  launch_unary(op, scalars, x.dtype(), make_loop<2>(unary_name(op), out.shape(), {&out, &x}));
  return out;
}

Tensor binary(Binary op, const Tensor& a, const Tensor& b) {
  const char* name = binary_name(op);
  Tensor out = empty_on(a, cpu::broadcast_shapes(name, a.shape(), b.shape()), is_comparison_op(op) ? kBool : a.dtype());
  launch_binary(op, a.dtype(), make_loop<3>(name, out.shape(), {&out, &a, &b}));
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Shape shape = cpu::broadcast_shapes("where", cond.shape(), cpu::broadcast_shapes("where", a.shape(), b.shape()));
  Tensor out = empty_on(a, shape, a.dtype());
  launch_where(a.dtype(), make_loop<4>("where", shape, {&out, &cond, &a, &b}));
  return out;
}

void fill_(const Tensor& dst, double value) { launch_fill(dst.dtype(), make_loop<1>("fill_", dst.shape(), {&dst}), value); }

void add_(const Tensor& y, const Tensor& x, double alpha) {  // arguments checked in tensor/kernels.cpp
  launch_axpy(y.dtype(), make_loop<3>("add_", y.shape(), {&y, &y, &x}), alpha);
}

void mul_(const Tensor& y, double factor) { launch_scale(y.dtype(), make_loop<2>("mul_", y.shape(), {&y, &y}), factor); }

}  // namespace ampgrad::cuda
