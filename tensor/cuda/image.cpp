// image.cpp — the C++ side of the CUDA image kernels (im2col, col2im, max_pool2d; arguments
// checked in tensor/kernels.cpp): output shapes, contiguous inputs, and image.cu's launchers.
#include "tensor/cuda/loops.h"

namespace ampgrad::cuda {

Tensor im2col(const Tensor& x_in, int64_t kh, int64_t kw, int64_t s, int64_t p) {
  Tensor x = contiguous(x_in);
  const ImageGeometry g = image_geometry(x.shape(), kh, kw, s, p);
  Tensor cols = empty_on(x, {g.N * g.Ho * g.Wo, g.C * kh * kw}, x.dtype());
  launch_im2col(x.dtype(), x.raw_data(), cols.raw_data(), g);
  return cols;
}

Tensor col2im(const Tensor& cols_in, const Shape& x_shape, int64_t kh, int64_t kw, int64_t s, int64_t p) {
  const ImageGeometry g = image_geometry(x_shape, kh, kw, s, p);
  Tensor cols = contiguous(cols_in), x = empty_on(cols, x_shape, cols.dtype());
  launch_col2im(cols.dtype(), cols.raw_data(), x.raw_data(), g);
  return x;
}

std::pair<Tensor, Tensor> max_pool2d(const Tensor& x_in, int64_t k, int64_t s) {
  Tensor x = contiguous(x_in);
  const ImageGeometry g = image_geometry(x.shape(), k, k, s, 0);
  Tensor out = empty_on(x, {g.N, g.C, g.Ho, g.Wo}, x.dtype()), idx = empty_on(x, {g.N, g.C, g.Ho, g.Wo}, kInt64);
  launch_max_pool2d(x.dtype(), x.raw_data(), out.raw_data(), idx.data_ptr<int64_t>(), g);
  return {out, idx};
}

}  // namespace ampgrad::cuda
