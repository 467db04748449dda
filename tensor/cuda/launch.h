// launch.h — the seam between the CUDA backend's C++ side (tensor/cuda/*.cpp: checks, output
// allocation, geometry) and its kernel side (tensor/cuda/*.cu): plain-old-data launch arguments
// and one launcher per kernel family. No Tensor and no Eigen here, so nvcc never sees them.
//
//   Tensor out = empty(x.shape(), TensorOptions(x.dtype()).device(x.device()));
//   launch_unary(Unary::exp, {}, x.dtype(), make_loop<2>("exp", out.shape(), {&out, &x}));  // loops.h
#pragma once
#include <cstdint>

#include "tensor/dtype_enum.h"
#include "tensor/op_enum.h"

namespace ampgrad::cuda {

inline constexpr int kMaxDims = 8;  // rank a kernel indexes, after merging dims dense in every operand

// N operands walked over one shape, element by element; operand 0 is the one written. Strides are
// in elements over `shape` (0 along a broadcast dim). When `contiguous`, every operand is dense
// and aligned with the others, so element i sits at offset i in each.
template <int N> struct Loop {
  void* data[N];
  int64_t numel;
  int ndim;
  bool contiguous;
  int64_t shape[kMaxDims];
  int64_t strides[N][kMaxDims];
};

// ---- elementwise.cu (dtype: of the inputs; outputs as tensor/kernels.h says) ----
void launch_unary(kernels::Unary op, const kernels::ScalarArgs& scalars, DType dtype, const Loop<2>& loop);  // (out, x)
void launch_binary(kernels::Binary op, DType dtype, const Loop<3>& loop);                // (out, a, b)
void launch_where(DType dtype, const Loop<4>& loop);                                     // (out, cond, a, b)
void launch_fill(DType dtype, const Loop<1>& loop, double value);                        // (dst)
void launch_axpy(DType dtype, const Loop<3>& loop, double alpha);                        // (y, y, x)
void launch_scale(DType dtype, const Loop<2>& loop, double factor);                      // (y, y)

// ---- copy.cu: dst = src converted, any geometry on one device ----
void launch_copy(DType dst_dtype, DType src_dtype, const Loop<2>& loop);                // (dst, src)

// ---- reduce.cu: x contiguous, viewed as (rows, R) or (R, cols) ----
// out[r] = sum_i x[r, i]; out is x's dtype for floating x, int64 otherwise. `device` is where
// x lives: long rows are summed in two passes through a scratch buffer allocated there.
void launch_sum_rows(DType dtype, const void* x, void* out, int64_t rows, int64_t R, int device);
// out[j] = sum_i x[i, j]: the reduced dims lead, as for a bias gradient, so no transpose is needed.
void launch_sum_columns(DType dtype, const void* x, void* out, int64_t R, int64_t cols, int device);
// values[r], indices[r]: the max (or min) of row r; the first index on ties; a NaN wins.
void launch_max_rows(DType dtype, const void* x, void* values, int64_t* indices, int64_t rows, int64_t R, bool is_min);

// A contiguous int64 index of shape index_shape, addressing a contiguous tensor with `strides`
// along `dim` (of size dim_size): element k of the index names position
// sum_d (d == dim ? index[k] : coord_d(k)) * strides[d].
struct IndexGeometry {
  int ndim, dim;
  int64_t numel, dim_size;
  int64_t index_shape[kMaxDims], strides[kMaxDims];
};
void launch_gather(DType dtype, const void* x, const int64_t* index, void* out, const IndexGeometry& g);
void launch_scatter_add(DType dtype, const void* src, const int64_t* index, void* out, const IndexGeometry& g);
// index_select / index_add: the full tensor viewed as (outer, size, inner) around the dim, the
// selected one as (outer, n, inner), index holding n slice numbers; both contiguous
struct SliceGeometry {
  int64_t outer, size, n, inner;
  int dim;  // for the error text
};
void launch_index_select(DType dtype, const void* x, const int64_t* index, void* out, const SliceGeometry& g);
void launch_index_add(DType dtype, const void* src, const int64_t* index, void* out, const SliceGeometry& g);

// ---- float8.cu: x contiguous, n elements, any floating dtype ----
// *out = the largest |x| as float32 (tensor/float8.h's abs_bits), 0 for n = 0.
void launch_abs_max(DType dtype, const void* x, int64_t n, float* out);
// out = x · *scale, clamped and rounded to float8_dtype (tensor/float8.h's scale_to_float8).
void launch_scale_to_float8(DType dtype, DType float8_dtype, const void* x, const float* scale, void* out, int64_t n);

// ---- attention.cu: s (B, L, S) contiguous in dtype's math type, p and ds contiguous in dtype,
// dp like s (primitives.inc's attention_softmax and its backward) ----
void launch_attention_softmax(DType dtype, const void* s, void* p, int64_t B, int64_t L, int64_t S, double scale, bool causal);
void launch_attention_softmax_backward(DType dtype, const void* p, const void* dp, void* ds, int64_t B, int64_t L, int64_t S, double scale,
                                       bool causal);

// ---- softmax.cu: x and out contiguous (rows, C) ----
void launch_softmax_rows(DType dtype, const void* x, void* out, int64_t rows, int64_t C, bool log);
// softmax cross-entropy's gradient (primitives.inc): logp and out contiguous (N, C), index and
// kept (N), coef and hit (N) in out's math type; scale and spread step 1 per sample and per class,
// or 0 for one number; spread may be null
void launch_cross_entropy_backward(DType dtype, const void* logp, const int64_t* index, const bool* kept, const void* coef, const void* hit,
                                   const void* spread, int64_t spread_step, const void* scale, int64_t scale_step, void* out, int64_t N,
                                   int64_t C);

// ---- layer_norm.cu: x, y, g, dx contiguous (R, D); weight and bias (D, may be null) and mean and
// rstd (R) in the math type (float32 for half x) ----
void launch_layer_norm(DType dtype, const void* x, const void* w, const void* b, void* y, void* mean, void* rstd, int64_t R, int64_t D,
                       double eps);
void launch_layer_norm_backward(DType dtype, const void* g, const void* x, const void* mean, const void* rstd, const void* w, void* dx,
                                int64_t R, int64_t D);

// ---- image.cu: contiguous (N, C, H, W) images, (N*Ho*Wo, C*kh*kw) columns ----
struct ImageGeometry {
  int64_t N, C, H, W, Ho, Wo, kh, kw, stride, pad;
};
void launch_im2col(DType dtype, const void* x, void* cols, const ImageGeometry& g);
void launch_col2im(DType dtype, const void* cols, void* x, const ImageGeometry& g);
// window kh x kw (== k x k), no padding; indices are flat positions in H*W
void launch_max_pool2d(DType dtype, const void* x, void* out, int64_t* indices, const ImageGeometry& g);

}  // namespace ampgrad::cuda
