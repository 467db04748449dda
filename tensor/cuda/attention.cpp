// attention.cpp — the C++ side of CUDA attention's softmax over rows of scores and its backward
// (arguments checked in tensor/kernels.cpp): contiguous inputs, then attention.cu's kernels.
#include "tensor/cuda/loops.h"

namespace ampgrad::cuda {

Tensor attention_softmax(const Tensor& s_in, double scale, bool causal, DType out_dtype) {
  const Tensor s = contiguous(s_in);
  Tensor p = empty_on(s, s.shape(), out_dtype);
  launch_attention_softmax(out_dtype, s.raw_data(), p.raw_data(), s.size(0), s.size(1), s.size(2), scale, causal);
  return p;
}

Tensor attention_softmax_backward(const Tensor& p_in, const Tensor& dp_in, double scale, bool causal) {
  const Tensor p = contiguous(p_in), dp = contiguous(dp_in);
  Tensor ds = empty_on(p, p.shape(), p.dtype());
  launch_attention_softmax_backward(p.dtype(), p.raw_data(), dp.raw_data(), ds.raw_data(), p.size(0), p.size(1), p.size(2), scale, causal);
  return ds;
}

}  // namespace ampgrad::cuda
