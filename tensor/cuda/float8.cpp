// float8.cpp — the C++ side of the CUDA FP8 narrowing (arguments checked in tensor/kernels.cpp):
// a contiguous x, then float8.cu's kernels.
#include "tensor/cuda/loops.h"

namespace ampgrad::cuda {

Tensor abs_max(const Tensor& x_in) {
  const Tensor x = contiguous(x_in);
  Tensor out = empty_on(x, {}, kFloat32);
  launch_abs_max(x.dtype(), x.raw_data(), x.numel(), out.data_ptr<float>());
  return out;
}

Tensor scaled_cast(const Tensor& x_in, const Tensor& scale, DType float8_dtype) {
  const Tensor x = contiguous(x_in);
  Tensor out = empty_on(x, x.shape(), float8_dtype);
  launch_scale_to_float8(x.dtype(), float8_dtype, x.raw_data(), scale.data_ptr<float>(), out.raw_data(), x.numel());
  return out;
}

}  // namespace ampgrad::cuda
