// layer_norm.cpp — the C++ side of CUDA layer norm (arguments checked in tensor/kernels.cpp):
// contiguous rows, the outputs and each row's statistics allocated, then layer_norm.cu's kernels.
#include "tensor/cuda/loops.h"

namespace ampgrad::cuda {

static const void* data_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

std::tuple<Tensor, Tensor, Tensor> layer_norm(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, double eps) {
  Tensor x = contiguous(x_in), y = empty_on(x, x.shape(), x.dtype());
  const Tensor w = w_in.defined() ? contiguous(w_in) : w_in, b = b_in.defined() ? contiguous(b_in) : b_in;
  const int64_t R = x.size(0), D = x.size(1);
  const DType math = is_half(x.dtype()) ? kFloat32 : x.dtype();
  Tensor mean = empty_on(x, {R}, math), rstd = empty_on(x, {R}, math);
  launch_layer_norm(x.dtype(), x.raw_data(), data_or_null(w), data_or_null(b), y.raw_data(), mean.raw_data(), rstd.raw_data(), R, D, eps);
  return {y, mean, rstd};
}

Tensor layer_norm_backward(const Tensor& g_in, const Tensor& x_in, const Tensor& mean, const Tensor& rstd, const Tensor& w_in) {
  Tensor g = contiguous(g_in), x = contiguous(x_in), dx = empty_on(x, x.shape(), x.dtype());
  const Tensor w = w_in.defined() ? contiguous(w_in) : w_in;
  launch_layer_norm_backward(x.dtype(), g.raw_data(), x.raw_data(), mean.raw_data(), rstd.raw_data(), data_or_null(w), dx.raw_data(),
                             x.size(0), x.size(1));
  return dx;
}

}  // namespace ampgrad::cuda
