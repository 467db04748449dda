// softmax.cpp — the C++ side of CUDA softmax / log-softmax over the last dim (arguments checked
// in tensor/kernels.cpp): a contiguous input, then softmax.cu's kernel over rows of length C.
#include "tensor/cuda/loops.h"

namespace ampgrad::cuda {

Tensor softmax_lastdim(const Tensor& x_in, bool log) {
  Tensor x = contiguous(x_in), out = empty_on(x, x.shape(), x.dtype());
  const int64_t C = x.shape().back(), rows = C == 0 ? 0 : x.numel() / C;
  launch_softmax_rows(x.dtype(), x.raw_data(), out.raw_data(), rows, C, log);
  return out;
}

}  // namespace ampgrad::cuda
