// kernel_checks.cpp — what each primitive of tensor/primitives.inc checks before any backend
// sees the call (check_<name>, in the list's order), once for every backend: dtypes, shapes, and
// PyTorch's rules for writing in place. tensor/kernels.cpp runs them, then the backend.
#include <algorithm>

#include "tensor/checked_int.h"
#include "tensor/cpu/loops.h"  // broadcast_shapes: geometry, shared by every backend
#include "tensor/elementwise_ops.h"
#include "tensor/kernels.h"

namespace ampgrad::kernels {

// Whether the op that with_op(body) hands to body is defined for dtype t: elementwise_ops.h's
// defined_for, the rule the backends compile their kernels by, asked at run time.
template <class WithOp> static bool takes_dtype(DType t, WithOp with_op) {
  bool ok = false;
  if (is_storage_only(t)) return false;
  dispatch(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_op(opmath_t<T>{}, [&](auto f) { ok = defined_for<decltype(f), T, opmath_t<T>>; });
  });
  return ok;
}

void check_unary(Unary k, const Tensor& x, const ScalarArgs&) {
  AMPGRAD_CHECK(takes_dtype(x.dtype(), [&](auto a, auto body) { with_unary<decltype(a)>(k, {}, body); }),
                unary_name(k) << ": not defined for dtype " << dtype_name(x.dtype()));
}
void check_binary(Binary k, const Tensor& a, const Tensor& b) {
  const char* name = binary_name(k);
  AMPGRAD_CHECK(a.dtype() == b.dtype(), name << ": dtypes differ (" << dtype_name(a.dtype()) << " and " << dtype_name(b.dtype())
                                             << "); promote before the kernel");
  AMPGRAD_CHECK(takes_dtype(a.dtype(), [&](auto, auto body) { with_binary(k, body); }), name << ": not defined for dtype " << dtype_name(a.dtype()));
}
void check_where(const Tensor& c, const Tensor& a, const Tensor& b) {
  AMPGRAD_CHECK(c.dtype() == kBool, "where: condition must be bool, got " << dtype_name(c.dtype()));
  AMPGRAD_CHECK(a.dtype() == b.dtype(), "where: dtypes differ (" << dtype_name(a.dtype()) << " and " << dtype_name(b.dtype()) << ")");
}
// ---- in-place writes ----
// PyTorch's rules for a tensor written in place: no two of its elements may share memory (an
// expanded view: several threads would write one place), and a source may not partly overlap
// it (the result would depend on the order of the walk). Each write bumps the storage's
// version, which a backward checks the tensors it saved against (autograd::Saved).

// Whether t's elements fill a block of memory with no gaps and no sharing, in some dim order.
static bool is_dense(const Tensor& t) {
  Shape dims;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.shape()[d] != 1) dims.push_back(d);
  std::sort(dims.begin(), dims.end(), [&](int64_t a, int64_t b) { return t.strides()[a] < t.strides()[b]; });
  int64_t expected = 1;
  for (int64_t d : dims) {
    if (t.strides()[d] != expected) return false;
    expected *= t.shape()[d];
  }
  return true;
}

static void check_written(const char* op, const Tensor& dst, const Tensor* src = nullptr) {
  for (int64_t d = 0; d < dst.dim() && dst.numel() > 0; ++d)
    AMPGRAD_CHECK(dst.strides()[d] != 0 || dst.shape()[d] <= 1, op << ": unsupported operation: more than one element of the written-to tensor "
                                                                      "refers to a single memory location (an expanded view); clone() it first");
  // Two dense tensors on one storage whose byte ranges meet, unless they are the same view. (As
  // PyTorch, strided ones are not judged: their ranges may interleave without sharing.)
  if (src && src->numel() > 0 && dst.numel() > 0 && dst.shares_storage(*src) && is_dense(dst) && is_dense(*src)) {
    const int64_t a = dst.storage_offset() * (int64_t)dst.element_size(), a_end = a + dst.numel() * (int64_t)dst.element_size();
    const int64_t b = src->storage_offset() * (int64_t)src->element_size(), b_end = b + src->numel() * (int64_t)src->element_size();
    const bool same_view = a == b && a_end == b_end && dst.strides() == src->strides() && dst.dtype() == src->dtype();
    AMPGRAD_CHECK(same_view || a_end <= b || b_end <= a, op << ": unsupported operation: some elements of the input tensor and the written-to "
                                                            "tensor refer to a single memory location; clone() the input first");
  }
  dst.bump_version();
}

void check_copy_(const Tensor& dst, const Tensor& src) {
  AMPGRAD_CHECK(numel_of(cpu::broadcast_shapes("copy_", dst.shape(), src.shape())) == dst.numel(),
                "copy_: source of shape " << shape_str(src.shape()) << " does not fit destination " << shape_str(dst.shape()));
  check_written("copy_", dst, &src);
}
// Into int64 a number converts only within range (NaN nowhere), as PyTorch's Scalar::to does; a
// factor of an int64 update must be whole, as PyTorch refuses a Float result cast to Long.
void check_fill_(const Tensor& dst, double v) {
  AMPGRAD_CHECK(dst.dtype() != kInt64 || fits_int64(v), "fill_: value " << v << " cannot be converted to type int64 without overflow");
  check_written("fill_", dst);
}
void check_add_(const Tensor& y, const Tensor& x, double alpha) {
  AMPGRAD_CHECK(y.dtype() == x.dtype(), "add_: dtypes differ (" << dtype_name(y.dtype()) << " and " << dtype_name(x.dtype()) << ")");
  AMPGRAD_CHECK(y.dtype() != kInt64 || is_int64(alpha), "add_: result type Float can't be cast to the desired output type Long (alpha " << alpha << ")");
  AMPGRAD_CHECK(y.dtype() != kBool, "add_: not defined for dtype bool");
  AMPGRAD_CHECK(cpu::broadcast_shapes("add_", y.shape(), x.shape()) == y.shape(),
                "add_: shape " << shape_str(x.shape()) << " cannot be added in place into " << shape_str(y.shape()));
  check_written("add_", y, &x);
}
void check_mul_(const Tensor& y, double f) {
  AMPGRAD_CHECK(y.dtype() != kBool, "mul_: not defined for dtype bool");
  AMPGRAD_CHECK(y.dtype() != kInt64 || is_int64(f), "mul_: result type Float can't be cast to the desired output type Long (factor " << f << ")");
  check_written("mul_", y);
}
void check_sum(const Tensor&, const Shape&, bool) {}  // any dtype; the dims are the backend's to check
void check_max_dim(const Tensor& x, int64_t dim, bool keepdim, bool is_min) {
  const char* op = is_min ? "min" : "max";
  const Shape red = cpu::normalize_dims(op, {dim}, x.dim());  // empty for a 0-d x, its one element
  AMPGRAD_CHECK(x.numel() > 0 && (red.empty() || x.shape()[red[0]] > 0), op << ": cannot reduce an empty dimension of shape " << shape_str(x.shape()));
}

// PyTorch's rules for the index of gather / scatter_add into a tensor of `shape`: int64, of the
// same rank, nowhere larger than the tensor except along `dim`. Its values are the backends' to
// check, where they are read.
static void check_index(const char* op, const Shape& shape, int64_t dim, const Tensor& index) {
  AMPGRAD_CHECK(!shape.empty(), op << ": needs at least one dim");
  dim = cpu::normalize_dims(op, {dim}, (int64_t)shape.size())[0];
  AMPGRAD_CHECK(index.dtype() == kInt64, op << ": index must be int64, got " << dtype_name(index.dtype()));
  AMPGRAD_CHECK(index.dim() == (int64_t)shape.size(), op << ": index of shape " << shape_str(index.shape()) << " must have the rank of " << shape_str(shape));
  for (int64_t d = 0; d < index.dim(); ++d)
    AMPGRAD_CHECK(d == dim || index.shape()[d] <= shape[d], op << ": index of shape " << shape_str(index.shape()) << " is larger than "
                                                               << shape_str(shape) << " in dim " << d);
}
void check_gather(const Tensor& x, int64_t dim, const Tensor& idx) { check_index("gather", x.shape(), dim, idx); }
void check_scatter_add(const Shape& shape, int64_t dim, const Tensor& idx, const Tensor& src) {
  AMPGRAD_CHECK(src.dtype() != kBool, "scatter_add: not defined for dtype bool");
  check_index("scatter_add", shape, dim, idx);
  AMPGRAD_CHECK(src.shape() == idx.shape(), "scatter_add: src " << shape_str(src.shape()) << " and index " << shape_str(idx.shape()) << " differ");
}
// index_select / index_add's index: a 1-D (or 0-d) int64 list of slices of a tensor of `shape`
// along `dim`. Its values are the backends' to check, where they are read.
static int64_t check_slice_index(const char* op, const Shape& shape, int64_t dim, const Tensor& index) {
  AMPGRAD_CHECK(!shape.empty(), op << ": needs at least one dim");
  dim = cpu::normalize_dims(op, {dim}, (int64_t)shape.size())[0];
  AMPGRAD_CHECK(index.dtype() == kInt64, op << ": index must be int64, got " << dtype_name(index.dtype()));
  AMPGRAD_CHECK(index.dim() <= 1, op << ": index must be 1-D, got " << shape_str(index.shape()));
  return dim;
}
void check_index_select(const Tensor& x, int64_t dim, const Tensor& idx) { check_slice_index("index_select", x.shape(), dim, idx); }
void check_index_add(const Shape& shape, int64_t dim, const Tensor& idx, const Tensor& src) {
  AMPGRAD_CHECK(src.dtype() != kBool, "index_add: not defined for dtype bool");
  const int64_t d = check_slice_index("index_add", shape, dim, idx);
  Shape want = shape;
  want[d] = idx.numel();
  AMPGRAD_CHECK(src.shape() == want, "index_add: src " << shape_str(src.shape()) << " must be " << shape_str(want) << " (" << idx.numel()
                                                       << " slices of " << shape_str(shape) << " along dim " << d << ")");
}
// The backends may assume matching 2-D or 3-D operands.
void check_gemm(const Tensor& a, const Tensor& b, const Tensor& bias, DType out_dtype) {
  AMPGRAD_CHECK(a.dtype() == b.dtype(), "gemm: dtypes differ (" << dtype_name(a.dtype()) << " and " << dtype_name(b.dtype()) << ")");
  require_floating("gemm", a.dtype());
  AMPGRAD_CHECK(out_dtype == a.dtype() || (is_half(a.dtype()) && out_dtype == kFloat32),
                "gemm: cannot write " << dtype_name(a.dtype()) << " operands' product as " << dtype_name(out_dtype)
                                      << ": out_dtype must be theirs, or float32 for float16 and bfloat16");
  AMPGRAD_CHECK(a.dim() == b.dim() && (a.dim() == 2 || a.dim() == 3) && a.shape()[a.dim() - 1] == b.shape()[b.dim() - 2] &&
                    (a.dim() == 2 || a.shape()[0] == b.shape()[0]),
                "gemm: cannot multiply shapes " << shape_str(a.shape()) << " and " << shape_str(b.shape()));
  AMPGRAD_CHECK(!bias.defined() || (bias.dtype() == a.dtype() && bias.dim() == 1 && bias.size(0) == b.size(-1)),
                "gemm: a bias must be one " << dtype_name(a.dtype()) << " value per output column (" << b.size(-1) << "), got "
                                            << dtype_name(bias.dtype()) << " " << shape_str(bias.shape()));
}
void check_abs_max(const Tensor& x) { require_floating("abs_max", x.dtype()); }
void check_scaled_cast(const Tensor& x, const Tensor& scale, DType dtype) {
  const char* op = "scaled_cast";
  AMPGRAD_CHECK(is_storage_only(dtype), op << ": the target must be a storage-only dtype, got " << dtype_name(dtype));
  require_floating(op, x.dtype());
  AMPGRAD_CHECK(scale.dtype() == kFloat32 && scale.dim() == 0,
                op << ": the scale must be a 0-d float32 tensor, got " << dtype_name(scale.dtype()) << " " << shape_str(scale.shape()));
}
void check_softmax_lastdim(const Tensor& x, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  AMPGRAD_CHECK(x.dim() >= 1, op << ": needs at least one dim");
  require_floating(op, x.dtype());
}
// Attention's scores (B, L, S) come in the math dtype of P's: float64 for float64, else float32.
void check_attention_softmax(const Tensor& s, double scale, bool causal, DType out_dtype) {
  AMPGRAD_CHECK(is_floating_point(out_dtype) && !is_storage_only(out_dtype) && s.dim() == 3 && s.dtype() == (out_dtype == kFloat64 ? kFloat64 : kFloat32),
                "attention_softmax: cannot write " << dtype_name(out_dtype) << " weights from " << dtype_name(s.dtype()) << " scores " << shape_str(s.shape()));
}
void check_attention_softmax_backward(const Tensor& p, const Tensor& dp, double scale, bool causal) {
  AMPGRAD_CHECK(p.dim() == 3 && dp.shape() == p.shape() && is_floating_point(p.dtype()) && dp.dtype() == (p.dtype() == kFloat64 ? kFloat64 : kFloat32),
                "attention_softmax_backward: expected weights (B, L, S) and their gradient in float32 (float64 for float64), got "
                    << dtype_name(p.dtype()) << " " << shape_str(p.shape()) << " and " << dtype_name(dp.dtype()) << " " << shape_str(dp.shape()));
}
void check_cross_entropy_backward(const Tensor& logp, const Tensor& index, const Tensor& kept, const Tensor& coef, const Tensor& hit,
                                         const Tensor& spread, const Tensor& scale, DType dtype) {
  const char* op = "cross_entropy_backward";
  AMPGRAD_CHECK(logp.dim() == 2 && (logp.dtype() == kFloat32 || logp.dtype() == kFloat64),
                op << ": expected (N, C) float32 or float64 log-probabilities, got " << dtype_name(logp.dtype()) << " " << shape_str(logp.shape()));
  const int64_t N = logp.size(0), C = logp.size(1);
  const auto check = [&](const Tensor& t, const char* name, DType dt, std::initializer_list<Shape> shapes) {
    if (t.dtype() == dt && std::find(shapes.begin(), shapes.end(), t.shape()) != shapes.end()) return;
    std::string expected;
    for (const Shape& s : shapes) expected += (expected.empty() ? "" : " or ") + shape_str(s);
    AMPGRAD_CHECK(false, op << ": " << name << " must be " << expected << " " << dtype_name(dt) << ", got " << shape_str(t.shape()) << " "
                            << dtype_name(t.dtype()));
  };
  check(index, "index", kInt64, {{N}});
  check(kept, "kept", kBool, {{N}});
  check(coef, "coef", logp.dtype(), {{N, 1}});
  check(hit, "hit", logp.dtype(), {{N, 1}});
  check(scale, "scale", logp.dtype(), {{N, 1}, {1, 1}});
  if (spread.defined()) check(spread, "spread", logp.dtype(), {{1, C}, {1, 1}, {}});
  AMPGRAD_CHECK(is_floating_point(dtype) && !is_storage_only(dtype) && logp.dtype() == (dtype == kFloat64 ? kFloat64 : kFloat32),
                op << ": cannot write the gradient as " << dtype_name(dtype) << " from " << dtype_name(logp.dtype())
                   << " log-probabilities (float64 comes from float64; float32, float16 and bfloat16 from float32)");
}

// Layer norm's rows: x (R, D) floating; weight and bias (D) in x's math dtype, which is returned;
// the backward's g like x, and mean and rstd (R) as the forward made them. The backends may
// assume all of it.
static DType check_layer_norm_params(const Tensor& x, const Tensor& w, const Tensor& b) {
  AMPGRAD_CHECK(x.dim() == 2, "layer_norm: expected rows (R, D), got shape " << shape_str(x.shape()));
  require_floating("layer_norm", x.dtype());
  const DType math = is_half(x.dtype()) ? kFloat32 : x.dtype();
  for (const Tensor* p : {&w, &b})
    AMPGRAD_CHECK(!p->defined() || (p->shape() == Shape{x.size(1)} && p->dtype() == math),
                  "layer_norm: weight/bias must be (" << x.size(1) << ") " << dtype_name(math) << " for a " << dtype_name(x.dtype())
                                                      << " input, got " << shape_str(p->shape()) << " " << dtype_name(p->dtype()));
  return math;
}
void check_layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  AMPGRAD_CHECK(eps >= 0, "layer_norm: eps must be >= 0, got " << eps);  // a negative eps makes rstd NaN
  check_layer_norm_params(x, w, b);
}
void check_layer_norm_backward(const Tensor& g, const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& w) {
  const DType math = check_layer_norm_params(x, w, {});
  AMPGRAD_CHECK(g.shape() == x.shape() && g.dtype() == x.dtype(), "layer_norm_backward: gradient " << shape_str(g.shape()) << " "
                    << dtype_name(g.dtype()) << " does not match input " << shape_str(x.shape()) << " " << dtype_name(x.dtype()));
  for (const Tensor* t : {&mean, &rstd})
    AMPGRAD_CHECK(t->shape() == Shape{x.size(0)} && t->dtype() == math && t->is_contiguous(),
                  "layer_norm_backward: mean and rstd must be contiguous (" << x.size(0) << ") " << dtype_name(math));
}

// The image primitives take (N, C, H, W) tensors and a window that fits them at least once
// (stride >= 1, padding >= 0); the backends may assume both.
static void check_conv(const Shape& x_shape, int64_t kh, int64_t kw, int64_t s, int64_t p) {
  AMPGRAD_CHECK(x_shape.size() == 4, "conv2d: expected an (N, C, H, W) tensor, got shape " << shape_str(x_shape));
  AMPGRAD_CHECK(window_fits(x_shape[2], kh, s, p) && window_fits(x_shape[3], kw, s, p),
                "conv2d: kernel " << kh << "x" << kw << " with stride " << s << " and padding " << p << " does not fit input " << shape_str(x_shape));
  int64_t cols = 1;  // im2col's (N·Ho·Wo, C·kh·kw) elements, counted without overflow
  for (int64_t d : {x_shape[0], x_shape[1], kh, kw, window_out_size(x_shape[2], kh, s, p), window_out_size(x_shape[3], kw, s, p)})
    AMPGRAD_CHECK(!__builtin_mul_overflow(cols, d, &cols), "conv2d: padding " << p << " makes input " << shape_str(x_shape) << "'s columns too many to count");
}
void check_im2col(const Tensor& x, int64_t kh, int64_t kw, int64_t s, int64_t p) { check_conv(x.shape(), kh, kw, s, p); }
void check_col2im(const Tensor& cols, const Shape& x_shape, int64_t kh, int64_t kw, int64_t s, int64_t p) {
  AMPGRAD_CHECK(cols.dtype() != kBool, "conv2d: not defined for dtype bool");
  check_conv(x_shape, kh, kw, s, p);
  const Shape cols_shape{x_shape[0] * window_out_size(x_shape[2], kh, s, p) * window_out_size(x_shape[3], kw, s, p), x_shape[1] * kh * kw};
  AMPGRAD_CHECK(cols.shape() == cols_shape, "conv2d: columns of shape " << shape_str(cols.shape()) << " do not match image "
                                                                       << shape_str(x_shape) << " (expected " << shape_str(cols_shape) << ")");
}
void check_max_pool2d(const Tensor& x, int64_t k, int64_t s) {
  AMPGRAD_CHECK(x.dim() == 4, "max_pool2d: expected an (N, C, H, W) tensor, got shape " << shape_str(x.shape()));
  AMPGRAD_CHECK(window_fits(x.shape()[2], k, s, 0) && window_fits(x.shape()[3], k, s, 0),
                "max_pool2d: kernel " << k << " with stride " << s << " does not fit input " << shape_str(x.shape()));
}
}  // namespace ampgrad::kernels
