// kernels.h — the primitives autograd builds every op from (forward and backward). Nothing
// here is differentiable: these are plain functions of tensors that dispatch on device
// (tensor/kernels.cpp), then on dtype inside each backend. The list itself, one line per
// primitive with what it computes, is tensor/primitives.inc; a backend implements exactly that
// list (tensor/cpu/*.cpp, tensor/cuda/*), and a missing one fails to link.
//
// Conventions: inputs of a binary/ternary kernel share one dtype (autograd promotes first);
// outputs are freshly allocated and contiguous; half types compute in float32 and round once
// on store. Shape letters: B batch, M/N/K matrix dims, N C H W images, R reduced length.
#pragma once
#include <tuple>
#include <utility>

#include "tensor/op_enum.h"
#include "tensor/tensor.h"

namespace ampgrad {
using TensorPair = std::pair<Tensor, Tensor>;            // max_dim's and max_pool2d's values and indices
using TensorTriple = std::tuple<Tensor, Tensor, Tensor>;  // layer_norm's y, mean and rstd
}  // namespace ampgrad

namespace ampgrad::kernels {

#define PRIMITIVE(Result, name, params, args) Result name params;
#include "tensor/primitives.inc"

// The output length of a k-wide window sliding with `stride` over `in` padded by `pad` on each
// side: Ho and Wo of im2col and max_pool2d on every backend, and of conv2d. Meaningful only
// where the window fits at least once (window_fits): (in + 2p - k) / s rounds toward zero, so a
// window up to s - 1 too wide would still count one output.
// A pad is refused before in + 2 · pad could overflow.
inline bool window_fits(int64_t in, int64_t k, int64_t stride, int64_t pad) { return k >= 1 && stride >= 1 && pad >= 0 && pad <= (INT64_MAX - in) / 2 && in + 2 * pad >= k; }
inline int64_t window_out_size(int64_t in, int64_t k, int64_t stride, int64_t pad) { return (in + 2 * pad - k) / stride + 1; }

}  // namespace ampgrad::kernels
