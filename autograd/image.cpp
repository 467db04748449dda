// image.cpp — the ops over (N, C, H, W) images: conv2d as im2col + one GEMM, and max_pool2d,
// each with its backward (the kernels are tensor/cpu/image.cpp's and tensor/cuda/image.cu's).
// Letters: N batch, C channels, H W image, k kernel.
#include "autograd/op_support.h"

namespace ampgrad {

// im2col and col2im are each other's adjoint, so each is the other's backward: recorded, they let
// a create_graph backward through conv2d be differentiated again.
static Tensor im2col(const Tensor& x, int64_t kh, int64_t kw, int64_t stride, int64_t pad);
static Tensor col2im(const Tensor& cols, const Shape& x_shape, int64_t kh, int64_t kw, int64_t stride, int64_t pad) {
  Tensor x = kernels::col2im(cols, x_shape, kh, kw, stride, pad);
  record("col2im", x, {cols}, [kh, kw, stride, pad](const Tensor& g, const Needs&) { return grads(im2col(g, kh, kw, stride, pad)); });
  return x;
}
static Tensor im2col(const Tensor& x, int64_t kh, int64_t kw, int64_t stride, int64_t pad) {
  Tensor cols = kernels::im2col(x, kh, kw, stride, pad);
  record("im2col", cols, {x}, [x_shape = x.shape(), kh, kw, stride, pad](const Tensor& g, const Needs&) {
    return grads(col2im(g, x_shape, kh, kw, stride, pad));
  });
  return cols;
}

// x (N, Cin, H, W), weight (Cout, Cin, kh, kw) -> (N, Cout, Ho, Wo)
//   cols (N·Ho·Wo, Cin·kh·kw) = im2col(x);  out2 (N·Ho·Wo, Cout) = cols · W2ᵀ + b
//   backward: dW2 = G2ᵀ cols;  dcols = G2 W2 -> col2im -> dx;  db = Σ G2
Tensor conv2d(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, int64_t stride, int64_t pad) {
  auto [x, w, b] = cast_inputs<2>(Op::conv2d, x_in, w_in, b_in);
  AMPGRAD_CHECK(x.dim() == 4 && w.dim() == 4 && x.size(1) == w.size(1),
                "conv2d: input of shape " << shape_str(x.shape()) << " does not match weight of shape " << shape_str(w.shape()) << " (expected (N, Cin, H, W) and (Cout, Cin, kh, kw))");
  AMPGRAD_CHECK(x.dtype() == w.dtype() && (!b.defined() || b.dtype() == w.dtype()), "conv2d: input and weight dtypes differ (" << dtype_name(x.dtype()) << ", " << dtype_name(w.dtype()) << ")");
  AMPGRAD_CHECK(stride >= 1 && pad >= 0, "conv2d: stride must be >= 1 and padding >= 0, got " << stride << " and " << pad);
  AMPGRAD_CHECK(!b.defined() || (b.dim() == 1 && b.size(0) == w.size(0)), "conv2d: bias of shape " << shape_str(b.shape()) << " does not match weight " << shape_str(w.shape()));
  const int64_t N = x.size(0), Cout = w.size(0), kh = w.size(2), kw = w.size(3);
  Tensor cols = kernels::im2col(x, kh, kw, stride, pad);
  const int64_t Ho = kernels::window_out_size(x.size(2), kh, stride, pad), Wo = kernels::window_out_size(x.size(3), kw, stride, pad);
  Tensor out2 = kernels::gemm(cols, w.detach().reshape({Cout, -1}).t(), b, cols.dtype());  // (N·Ho·Wo, Cout): W2ᵀ, a view of w; + b, rounded once
  Tensor out = empty({N, Cout, Ho, Wo}, TensorOptions(x.dtype()).device(x.device()));
  kernels::copy_(out, out2.view({N, Ho, Wo, Cout}).permute({0, 3, 1, 2}));
  // Saves x, not `cols`: the im2col matrix is kh·kw times larger (25 times for 5x5), and redoing
  // it in backward is one copy beside a GEMM. One gradient per statement, so each im2col-sized
  // temporary is freed before the next is made.
  record("conv2d", out, {x, w, b}, [x = save_if(w.requires_grad(), x), x_shape = x.shape(), w = save_if(x.requires_grad(), w), w_shape = w.shape(), stride, pad](const Tensor& g, const Needs& need) {
    const int64_t kh = w_shape[2], kw = w_shape[3];
    Tensor g2 = g.permute({0, 2, 3, 1}).contiguous().view({-1, w_shape[0]});  // (N·Ho·Wo, Cout)
    autograd::Grads gs(3);
    // dx: the patches' gradients summed back into the image in float32, rounded once (a 16-bit g)
    if (need[0]) gs[0] = rounded_to(col2im(matmul(widened(g2), widened(w.get().reshape({w_shape[0], -1}))), x_shape, kh, kw, stride, pad), g.dtype());
    if (need[1]) gs[1] = matmul(g2.t(), im2col(x, kh, kw, stride, pad)).view(w_shape);
    if (need[2]) gs[2] = sum(g2, {0});
    return gs;
  });
  return out;
}

// x (N, C, H, W) -> (N, C, Ho, Wo); the gradient goes to the max of each window
Tensor max_pool2d(const Tensor& x_in, int64_t k, std::optional<int64_t> stride) {
  auto [x] = cast_inputs(Op::max_pool2d, x_in);
  AMPGRAD_CHECK(k >= 1 && stride.value_or(k) >= 1, "max_pool2d: kernel_size and stride must be >= 1, got " << k << " and " << stride.value_or(k));
  auto [out, idx] = kernels::max_pool2d(x, k, stride.value_or(k));
  record("max_pool2d", out, {x}, [idx = idx, x_shape = x.shape()](const Tensor& g, const Needs&) {
    const int64_t N = x_shape[0], C = x_shape[1];
    Tensor gx = autograd::scatter_add({N, C, x_shape[2] * x_shape[3]}, 2, idx.view({N, C, -1}), g.contiguous().view({N, C, -1}));
    return grads(gx.view(x_shape));
  });
  return out;
}

}  // namespace ampgrad
