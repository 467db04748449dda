// image.cpp — the C++ side of the CUDA image kernels (im2col, col2im, max_pool2d): the CPU's
// checks and output shapes (tensor/cpu/image.cpp), contiguous inputs, and image.cu's launchers.
#include "tensor/cuda/loops.h"

namespace ampgrad::cuda {

static Tensor contiguous4d(const char* op, const Tensor& x) {
  AMPGRAD_CHECK(x.dim() == 4, op << ": expected an (N, C, H, W) tensor, got shape " << shape_str(x.shape()));
  return contiguous(x);
}

Tensor im2col(const Tensor& x_in, int64_t kh, int64_t kw, int64_t s, int64_t p) {
  Tensor x = contiguous4d("conv2d", x_in);
  const ImageGeometry g = image_geometry(x.shape(), kh, kw, s, p);
  AMPGRAD_CHECK(g.Ho > 0 && g.Wo > 0, "conv2d: kernel " << kh << "x" << kw << " does not fit input " << shape_str(x.shape()) << " with padding " << p);
  Tensor cols = empty_on(x, {g.N * g.Ho * g.Wo, g.C * kh * kw}, x.dtype());
  launch_im2col(x.dtype(), x.raw_data(), cols.raw_data(), g);
  return cols;
}

// The CPU's col2im checks nothing; here a mismatched cols would be read out of bounds on the
// device, so its shape is checked against x_shape.
Tensor col2im(const Tensor& cols_in, const Shape& x_shape, int64_t kh, int64_t kw, int64_t s, int64_t p) {
  AMPGRAD_CHECK(x_shape.size() == 4, "conv2d: expected an (N, C, H, W) tensor, got shape " << shape_str(x_shape));
  const ImageGeometry g = image_geometry(x_shape, kh, kw, s, p);
  const Shape cols_shape{g.N * g.Ho * g.Wo, g.C * kh * kw};
  AMPGRAD_CHECK(cols_in.shape() == cols_shape, "conv2d: columns of shape " << shape_str(cols_in.shape()) << " do not match image "
                                                  << shape_str(x_shape) << " (expected " << shape_str(cols_shape) << ")");
  Tensor cols = contiguous(cols_in), x = empty_on(cols, x_shape, cols.dtype());
  launch_col2im(cols.dtype(), cols.raw_data(), x.raw_data(), g);
  return x;
}

std::pair<Tensor, Tensor> max_pool2d(const Tensor& x_in, int64_t k, int64_t s) {
  Tensor x = contiguous4d("max_pool2d", x_in);
  const ImageGeometry g = image_geometry(x.shape(), k, k, s, 0);
  AMPGRAD_CHECK(g.Ho > 0 && g.Wo > 0, "max_pool2d: kernel " << k << " does not fit input " << shape_str(x.shape()));
  Tensor out = empty_on(x, {g.N, g.C, g.Ho, g.Wo}, x.dtype()), idx = empty_on(x, {g.N, g.C, g.Ho, g.Wo}, kInt64);
  launch_max_pool2d(x.dtype(), x.raw_data(), out.raw_data(), idx.data_ptr<int64_t>(), g);
  return {out, idx};
}

}  // namespace ampgrad::cuda
