// nn_ops.cpp — softmax and log_softmax, dropout and embedding: the neural-network ops that are
// neither losses (losses.cpp), images (image.cpp) nor normalisations (normalization.cpp).
#include "autograd/op_support.h"

namespace ampgrad {

// ---- softmax / log_softmax along `dim` (moved last for the kernel and back)

static Tensor softmax_impl(Op op, const Tensor& x_in, int64_t dim, bool log) {
  auto [x] = cast_inputs(op, x_in);
  const char* name = log ? "log_softmax" : "softmax";
  const int64_t n = std::max<int64_t>(x.dim(), 1);  // a 0-d x takes dim 0 or -1, as in PyTorch
  AMPGRAD_CHECK(dim >= -n && dim < n, name << ": dim " << dim << " out of range for shape " << shape_str(x.shape()));
  if (x.dim() == 0) return softmax_impl(op, x.reshape({1}), 0, log).reshape({});
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  const int64_t last = x.dim() - 1;
  Tensor moved = d == last ? x : x.detach().transpose(d, last);
  Tensor out = kernels::softmax_lastdim(moved, log);
  if (d != last) out = out.transpose(d, last);
  record(name, out, {x}, [y = Saved(out), d, log](const Tensor& g, const Needs&) {
    if (log) return grads(g - exp(y) * sum(g, {d}, true));  // d log_softmax: g − softmax · Σg
    return grads(y * (g - sum(g * y, {d}, true)));           // d softmax: y (g − Σ g y)
  });
  return out;
}
Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(Op::softmax, x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(Op::log_softmax, x, dim, true); }

// Zeroes each element with probability p and scales survivors by 1/(1−p) (train mode only).
// Backward keeps the bool mask, a byte an element as in PyTorch, and scales it again there.
Tensor dropout(const Tensor& x_in, double p, bool training, Generator* gen) {
  auto [x] = cast_inputs(Op::dropout, x_in);
  AMPGRAD_CHECK(p >= 0 && p <= 1, "dropout: probability must be in [0, 1], got " << p);
  if (!training || p == 0) return x;
  if (p == 1) return x * 0.0;
  // drawn and compared in float32 or wider: in bfloat16, u >= 0.1 would keep 90.015% instead of 90%
  Tensor u = rand(x.shape(), TensorOptions(is_half(x.dtype()) ? kFloat32 : x.dtype()).device(x.device()), gen);
  Tensor keep = ge(u, scalar_like(p, u));
  auto multiplier = [scale = 1 / (1 - p)](const Tensor& keep, DType dtype) { return scaled(to(keep, dtype), scale); };
  Tensor out = kernels::binary(kernels::Binary::mul, x, multiplier(keep, x.dtype()));
  record("dropout", out, {x}, [keep = Saved(keep), multiplier](const Tensor& g, const Needs&) {
    return grads(g * multiplier(keep, g.dtype()));
  });
  return out;
}

// Row indices[i] of weight for every index: a lookup table, whose gradient adds each output
// row's gradient back into the row it came from (a token seen twice gets both).
//   indices int64 (...), weight (V, D) -> (..., D)
Tensor embedding(const Tensor& indices, const Tensor& w_in) {
  auto [w] = cast_inputs(Op::embedding, w_in);
  AMPGRAD_CHECK(w.dim() == 2, "embedding: weight must be 2-D (num_embeddings, embedding_dim), got " << shape_str(w.shape()));
  AMPGRAD_CHECK(indices.dtype() == kInt64, "embedding: indices must be int64, got " << dtype_name(indices.dtype()));
  AMPGRAD_CHECK(indices.device() == w.device(), "embedding: indices on " << indices.device().str() << ", weight on " << w.device().str());
  Tensor index = indices.detach().reshape({-1});
  Tensor out;
  try {
    out = kernels::index_select(w, 0, index);
  } catch (const Error& e) {  // an index out of range, found on the CPU: say which op read it
    throw Error(std::string("embedding: ") + e.what());
  }
  record("embedding", out, {w}, [index = Saved(index), w_shape = w.shape()](const Tensor& g, const Needs&) {
    return grads(autograd::index_add(w_shape, 0, index, g));
  });
  Shape out_shape = indices.shape();
  out_shape.push_back(w.size(1));
  return out.reshape(out_shape);
}

}  // namespace ampgrad
