// softmax.cpp — the C++ side of CUDA softmax / log-softmax over the last dim and of softmax
// cross-entropy's gradient (arguments checked in tensor/kernels.cpp): contiguous inputs, then
// softmax.cu's kernels.
#include "tensor/cuda/loops.h"

namespace ampgrad::cuda {

Tensor softmax_lastdim(const Tensor& x_in, bool log) {
  Tensor x = contiguous(x_in), out = empty_on(x, x.shape(), x.dtype());
  const int64_t C = x.shape().back(), rows = C == 0 ? 0 : x.numel() / C;
  launch_softmax_rows(x.dtype(), x.raw_data(), out.raw_data(), rows, C, log);
  return out;
}

Tensor cross_entropy_backward(const Tensor& logp_in, const Tensor& index_in, const Tensor& kept_in, const Tensor& coef_in,
                              const Tensor& hit_in, const Tensor& spread_in, const Tensor& scale_in, DType dtype) {
  const Tensor logp = contiguous(logp_in), index = contiguous(index_in), kept = contiguous(kept_in), coef = contiguous(coef_in),
               hit = contiguous(hit_in), scale = contiguous(scale_in), spread = spread_in.defined() ? contiguous(spread_in) : spread_in;
  const int64_t N = logp.size(0), C = logp.size(1);
  Tensor out = empty_on(logp, {N, C}, dtype);
  launch_cross_entropy_backward(dtype, logp.raw_data(), (const int64_t*)index.raw_data(), (const bool*)kept.raw_data(), coef.raw_data(),
                                hit.raw_data(), spread.defined() ? spread.raw_data() : nullptr, spread.defined() && spread.numel() == C && C != 1,
                                scale.raw_data(), scale.numel() == N && N != 1, out.raw_data(), N, C);
  return out;
}

}  // namespace ampgrad::cuda
