// shape.cpp — views (reshape, transpose, narrow, expand, ...), copies, cat/stack and to();
// index_select and the index ops a backward uses are indexing.cpp's.
// A view is the same storage with new shape/strides (Tensor::as_strided); its backward maps
// the gradient back to the input's geometry. The cast itself is autograd/cast.cpp's.
#include <algorithm>
#include <numeric>

#include "autograd/op_support.h"

namespace ampgrad {

static int64_t wrap(const char* op, int64_t dim, int64_t ndim) {
  int64_t d = dim < 0 ? dim + ndim : dim;
  AMPGRAD_CHECK(d >= 0 && d < ndim, op << ": dim " << dim << " out of range for a " << ndim << "-d tensor");
  return d;
}

// Fills in a -1 and checks the element count.
static Shape infer_shape(const char* op, const Shape& shape, int64_t numel, const Shape& from) {
  Shape s = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      AMPGRAD_CHECK(infer < 0, op << ": only one dimension can be -1 in " << shape_str(shape));
      infer = (int64_t)i;
    } else {
      AMPGRAD_CHECK(s[i] >= 0 && !__builtin_mul_overflow(known, s[i], &known), op << ": invalid shape " << shape_str(shape));
    }
  }
  if (infer >= 0) {
    AMPGRAD_CHECK(known != 0 && numel % known == 0, op << ": shape " << shape_str(shape) << " is invalid for input of shape " << shape_str(from));
    s[infer] = numel / known;
  }
  AMPGRAD_CHECK(numel_of(s) == numel, op << ": shape " << shape_str(shape) << " is invalid for input of shape " << shape_str(from));
  return s;
}

// Strides that view x as `shape` without a copy, if they exist (PyTorch's computeStride):
// each run of new dims must subdivide a run of old dims that is contiguous in memory.
static std::optional<Shape> view_strides(const Tensor& x, const Shape& shape) {
  if (x.numel() == 0 || x.is_contiguous()) return contiguous_strides(shape);
  const Shape &os = x.shape(), &ost = x.strides();
  Shape st(shape.size());
  int64_t view_d = (int64_t)shape.size() - 1, chunk = 1, tensor_numel = 1;
  int64_t chunk_base_stride = ost.back();
  for (int64_t d = (int64_t)os.size() - 1; d >= 0; --d) {
    tensor_numel *= os[d];
    if (d == 0 || (os[d - 1] != 1 && ost[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (chunk < tensor_numel || shape[view_d] == 1)) {
        st[view_d] = chunk * chunk_base_stride;
        chunk *= shape[view_d];
        --view_d;
      }
      if (chunk != tensor_numel) return std::nullopt;
      if (d > 0) { chunk_base_stride = ost[d - 1]; tensor_numel = 1; chunk = 1; }
    }
  }
  if (view_d != -1) return std::nullopt;
  return st;
}

// x seen through `shape` with `strides` over the same storage; the gradient is reshaped back.
static Tensor view_as_strided(const char* name, const Tensor& x, const Shape& shape, const Shape& strides) {
  Tensor out = x.as_strided(shape, strides, x.storage_offset());
  record(name, out, {x}, [in_shape = x.shape()](const Tensor& g, const Needs&) { return grads(g.reshape(in_shape)); });
  return out;
}

Tensor view(const Tensor& x_in, const Shape& shape_in) {
  auto [x] = cast_inputs(Op::view, x_in);
  Shape shape = infer_shape("view", shape_in, x.numel(), x.shape());
  auto st = view_strides(x, shape);
  AMPGRAD_CHECK(st, "view: a tensor of shape " << shape_str(x.shape()) << " and strides " << shape_str(x.strides())
                         << " cannot be viewed as " << shape_str(shape) << " without a copy; use reshape");
  return view_as_strided("view", x, shape, *st);
}

// A view when the strides allow one, else a view of a contiguous copy.
Tensor reshape(const Tensor& x_in, const Shape& shape_in) {
  auto [x] = cast_inputs(Op::reshape, x_in);
  Shape shape = infer_shape("reshape", shape_in, x.numel(), x.shape());
  if (auto st = view_strides(x, shape)) return view_as_strided("reshape", x, shape, *st);
  Tensor c = contiguous(x);
  return view_as_strided("reshape", c, shape, contiguous_strides(shape));
}

Tensor flatten(const Tensor& x_in, int64_t start, int64_t end) {
  auto [x] = cast_inputs(Op::flatten, x_in);
  if (x.dim() == 0) return reshape(x, {1});
  start = wrap("flatten", start, x.dim());
  end = wrap("flatten", end, x.dim());
  AMPGRAD_CHECK(start <= end, "flatten: start_dim " << start << " comes after end_dim " << end);
  Shape s(x.shape().begin(), x.shape().begin() + start);
  s.push_back(std::accumulate(x.shape().begin() + start, x.shape().begin() + end + 1, int64_t(1), std::multiplies<>()));
  s.insert(s.end(), x.shape().begin() + end + 1, x.shape().end());
  return reshape(x, s);
}

Tensor permute(const Tensor& x_in, const Shape& dims) {
  auto [x] = cast_inputs(Op::permute, x_in);
  AMPGRAD_CHECK((int64_t)dims.size() == x.dim(), "permute: " << dims.size() << " dims given for a " << x.dim() << "-d tensor");
  Shape shape, strides, inverse(dims.size());
  std::vector<bool> seen(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap("permute", dims[i], x.dim());
    AMPGRAD_CHECK(!seen[d], "permute: dim " << d << " repeats in " << shape_str(dims));
    seen[d] = true;
    shape.push_back(x.shape()[d]);
    strides.push_back(x.strides()[d]);
    inverse[d] = (int64_t)i;
  }
  Tensor out = x.as_strided(shape, strides, x.storage_offset());
  record("permute", out, {x}, [inverse](const Tensor& g, const Needs&) { return grads(g.permute(inverse)); });
  return out;
}

Tensor transpose(const Tensor& x_in, int64_t d0, int64_t d1) {
  auto [x] = cast_inputs(Op::transpose, x_in);
  if (x.dim() == 0) {  // as in PyTorch, a 0-d tensor takes dims 0 and -1, and is its own transpose
    for (int64_t d : {d0, d1}) AMPGRAD_CHECK(d == 0 || d == -1, "transpose: dim " << d << " out of range for a 0-d tensor");
    return x;
  }
  Shape dims(x.dim());
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[wrap("transpose", d0, x.dim())], dims[wrap("transpose", d1, x.dim())]);
  return permute(x, dims);
}

// Zeros of x's geometry with g written into the region that narrow(dim, start, len) selects;
// its own backward is that narrow.
static Tensor pad_back(const Tensor& g, const Shape& shape, int64_t dim, int64_t start) {
  Tensor full = zeros(shape, TensorOptions(g.dtype()).device(g.device()));
  kernels::copy_(full.as_strided(g.shape(), full.strides(), start * full.strides()[dim]), g);
  record("narrow_backward", full, {g}, [dim, start, length = g.shape()[dim]](const Tensor& gg, const Needs&) {
    return grads(gg.narrow(dim, start, length));
  });
  return full;
}

Tensor narrow(const Tensor& x_in, int64_t dim, int64_t start, int64_t length) {
  auto [x] = cast_inputs(Op::narrow, x_in);
  dim = wrap("narrow", dim, x.dim());
  if (start < 0) start += x.shape()[dim];
  AMPGRAD_CHECK(start >= 0 && length >= 0 && length <= x.shape()[dim] - start,  // start + length might overflow
                "narrow: start " << start << " + length " << length << " exceeds dim " << dim << " of shape " << shape_str(x.shape()));
  Shape shape = x.shape();
  shape[dim] = length;
  Tensor out = x.as_strided(shape, x.strides(), x.storage_offset() + start * x.strides()[dim]);
  record("narrow", out, {x}, [in_shape = x.shape(), dim, start](const Tensor& g, const Needs&) {
    return grads(pad_back(g, in_shape, dim, start));
  });
  return out;
}

Tensor select(const Tensor& x_in, int64_t dim, int64_t index) {
  auto [x] = cast_inputs(Op::select, x_in);
  dim = wrap("select", dim, x.dim());
  AMPGRAD_CHECK(index >= -x.shape()[dim] && index < x.shape()[dim], "select: index " << index << " out of range for dim " << dim << " of size " << x.shape()[dim]);
  return squeeze(narrow(x, dim, index < 0 ? index + x.shape()[dim] : index, 1), dim);
}

Tensor expand(const Tensor& x_in, const Shape& shape_in) {
  auto [x] = cast_inputs(Op::expand, x_in);
  AMPGRAD_CHECK((int64_t)shape_in.size() >= x.dim(), "expand: cannot expand shape " << shape_str(x.shape()) << " to " << shape_str(shape_in));
  const size_t lead = shape_in.size() - x.dim();
  Shape shape(shape_in.size()), strides(shape_in.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t have = i < lead ? 1 : x.shape()[i - lead];
    AMPGRAD_CHECK(shape_in[i] >= -1 && (shape_in[i] != -1 || i >= lead), "expand: invalid size " << shape_in[i] << " in " << shape_str(shape_in));
    shape[i] = shape_in[i] == -1 ? have : shape_in[i];
    AMPGRAD_CHECK(have == shape[i] || have == 1, "expand: cannot expand shape " << shape_str(x.shape()) << " to " << shape_str(shape_in));
    if (i >= lead && have == shape[i]) strides[i] = x.strides()[i - lead];
  }
  Tensor out = x.as_strided(shape, strides, x.storage_offset());
  // the engine sums a gradient back to the input's shape: undoing the broadcast is its job
  record("expand", out, {x}, [](const Tensor& g, const Needs&) { return grads(g); });
  return out;
}

Tensor unsqueeze(const Tensor& x_in, int64_t dim) {
  auto [x] = cast_inputs(Op::unsqueeze, x_in);
  dim = wrap("unsqueeze", dim, x.dim() + 1);
  Shape shape = x.shape(), strides = x.strides();
  shape.insert(shape.begin() + dim, 1);
  strides.insert(strides.begin() + dim, dim < x.dim() ? x.strides()[dim] * x.shape()[dim] : 1);
  return view_as_strided("unsqueeze", x, shape, strides);
}

Tensor squeeze(const Tensor& x_in, std::optional<int64_t> dim) {
  auto [x] = cast_inputs(Op::squeeze, x_in);
  Shape shape, strides;
  const int64_t only = dim ? wrap("squeeze", *dim, std::max<int64_t>(x.dim(), 1)) : -1;  // -1: every size-1 dim
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (x.shape()[d] == 1 && (only < 0 || only == d)) continue;
    shape.push_back(x.shape()[d]);
    strides.push_back(x.strides()[d]);
  }
  return view_as_strided("squeeze", x, shape, strides);
}

static Tensor copy_of(const char* name, const Tensor& x) {
  Tensor out = empty(x.shape(), TensorOptions(x.dtype()).device(x.device()));
  kernels::copy_(out, x);
  record(name, out, {x}, [](const Tensor& g, const Needs&) { return grads(g); });
  return out;
}

Tensor contiguous(const Tensor& x_in) {
  auto [x] = cast_inputs(Op::contiguous, x_in);
  return x.is_contiguous() ? x : copy_of("contiguous", x);
}

Tensor clone(const Tensor& x_in) {
  auto [x] = cast_inputs(Op::clone, x_in);
  return copy_of("clone", x);
}

Tensor cat(const std::vector<Tensor>& xs_in, int64_t dim) {
  AMPGRAD_CHECK(!xs_in.empty(), "cat: expected a non-empty list of tensors");
  std::vector<Tensor> xs = xs_in;
  autograd::cast_inputs_in_place(Op::cat, xs.data(), xs.size());
  DType t = xs[0].dtype();
  for (const Tensor& x : xs) {
    AMPGRAD_CHECK(x.device() == xs[0].device(), "cat: expected all tensors on one device, got " << xs[0].device().str() << " and " << x.device().str());
    t = promote_types(t, x.dtype());
  }
  for (Tensor& x : xs) x = autograd::cast(x, t);
  dim = wrap("cat", dim, xs[0].dim());
  Shape shape = xs[0].shape();
  shape[dim] = 0;
  for (const Tensor& x : xs) {
    bool ok = x.dim() == (int64_t)shape.size();
    for (int64_t d = 0; ok && d < x.dim(); ++d) ok = d == dim || x.shape()[d] == shape[d];
    AMPGRAD_CHECK(ok, "cat: shapes " << shape_str(xs[0].shape()) << " and " << shape_str(x.shape()) << " differ outside dim " << dim);
    shape[dim] += x.shape()[dim];
  }
  Tensor out = empty(shape, TensorOptions(t).device(xs[0].device()));
  Shape starts, sizes;
  int64_t at = 0;
  for (const Tensor& x : xs) {
    kernels::copy_(out.as_strided(x.shape(), out.strides(), at * out.strides()[dim]), x);
    starts.push_back(at);
    sizes.push_back(x.shape()[dim]);
    at += sizes.back();
  }
  record("cat", out, xs, [starts, sizes, dim](const Tensor& g, const Needs&) {
    autograd::Grads gs;
    for (size_t i = 0; i < starts.size(); ++i) gs.push_back(g.narrow(dim, starts[i], sizes[i]));
    return gs;
  });
  return out;
}

Tensor stack(const std::vector<Tensor>& xs_in, int64_t dim) {
  AMPGRAD_CHECK(!xs_in.empty(), "stack: expected a non-empty list of tensors");
  std::vector<Tensor> xs = xs_in;
  autograd::cast_inputs_in_place(Op::stack, xs.data(), xs.size());
  for (const Tensor& x : xs)
    AMPGRAD_CHECK(x.shape() == xs[0].shape(), "stack: shapes " << shape_str(xs[0].shape()) << " and " << shape_str(x.shape()) << " differ");
  std::vector<Tensor> us;
  int64_t d = wrap("stack", dim, xs[0].dim() + 1);
  for (const Tensor& x : xs) us.push_back(unsqueeze(x, d));
  return cat(us, d);
}

Tensor to(const Tensor& x_in, DType dtype) {
  auto [x] = cast_inputs(Op::to, x_in);
  return autograd::cast(x, dtype);
}

Tensor to(const Tensor& x_in, Device device) {
  auto [x] = cast_inputs(Op::to, x_in);
  if (x.device() == device) return x;
  Tensor out = empty(x.shape(), TensorOptions(x.dtype()).device(device));
  kernels::copy_(out, x);
  record("to", out, {x}, [from = x.device()](const Tensor& g, const Needs&) { return grads(to(g, from)); });
  return out;
}

}  // namespace ampgrad
