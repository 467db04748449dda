// reduce.cpp — CPU reductions (sum, max/min with indices), gather/scatter along one dim, and
// index_select/index_add of whole slices.
// A reduction moves the reduced dims last (a view) and reduces rows of length R: a sum reads them
// in place where the view allows (row_runs), max/min and other views from a contiguous copy; when
// the reduced dims are already leading in a contiguous tensor, a sum adds whole rows into an
// accumulator instead (the bias-gradient case).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

#include "tensor/cpu/half_convert.h"
#include "tensor/cpu/loops.h"
#include "tensor/kernels.h"

namespace ampgrad::cpu {
using namespace ampgrad::kernels;

// A run of n contiguous elements as opmath values: float16/bfloat16 runs are widened in one
// vectorised pass into buf (half_convert.h), a scalar conversion per element being several
// times slower; other types are read where they are, or converted one by one (bool).
template <class T> static const opmath_t<T>* as_opmath(const T* src, int64_t n, WidenedBuffer<opmath_t<T>>& buf) {
  if constexpr (std::is_same_v<opmath_t<T>, T>) return src;
  buf.resize(n);
  if constexpr (has_convert_contiguous<opmath_t<T>, T>) convert_contiguous(buf.data(), src, n);
  else std::copy(src, src + n, buf.begin());
  return buf.data();
}

// accumulator type: double for float32/float64 sums, float for half, int64 for integers
template <class T> using acc_t = std::conditional_t<std::is_floating_point_v<opmath_t<T>>, std::conditional_t<std::is_same_v<opmath_t<T>, float> && !std::is_same_v<T, float>, float, double>, int64_t>;

Shape normalize_dims(const char* op, const Shape& dims, int64_t ndim) {
  Shape out;
  for (int64_t d : dims) {
    int64_t w = d < 0 ? d + std::max<int64_t>(ndim, 1) : d;  // a 0-d tensor takes dim 0 or -1, as in PyTorch
    AMPGRAD_CHECK(w >= 0 && w < std::max<int64_t>(ndim, 1), op << ": dim " << d << " out of range for " << ndim << "-d tensor");
    AMPGRAD_CHECK(std::find(out.begin(), out.end(), w) == out.end(), op << ": dim " << w << " appears more than once in " << shape_str(dims));
    if (ndim > 0) out.push_back(w);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Splits x's dims into kept and reduced, returning (x viewed as [kept..., reduced...], out shape).
std::pair<Tensor, Shape> move_reduced_last(const Tensor& x, const Shape& red, bool keepdim) {
  Shape perm, pshape, pstrides, out_shape;
  for (int64_t d = 0; d < x.dim(); ++d) {
    bool r = std::binary_search(red.begin(), red.end(), d);
    if (!r) perm.push_back(d);
    if (!r) out_shape.push_back(x.shape()[d]);
    else if (keepdim) out_shape.push_back(1);
  }
  for (int64_t d : red) perm.push_back(d);
  for (int64_t d : perm) { pshape.push_back(x.shape()[d]); pstrides.push_back(x.strides()[d]); }
  return {x.as_strided(pshape, pstrides, x.storage_offset()), out_shape};
}

// Row r of a view [kept..., reduced...] as `runs` runs of `run` contiguous elements, `run_stride`
// apart, from r · row_stride: in place where the kept dims nest into one stride and the reduced
// ones into an outer stride around a contiguous run (batch norm's channel sums of (N, C, H, W):
// a row is N planes, C planes apart), else in a contiguous copy. Either way in the row's order.
struct RowRuns {
  Tensor base;
  int64_t row_stride, runs, run, run_stride;
};
static RowRuns row_runs(const Tensor& moved, int64_t kept, int64_t R) {
  auto nest = [&](int64_t from, int64_t to) {  // (size, stride) of dims [from, to), size 1 dropped, nested ones merged
    std::vector<std::pair<int64_t, int64_t>> d;
    for (int64_t i = from; i < to; ++i) {
      const int64_t size = moved.shape()[i], stride = moved.strides()[i];
      if (size == 1) continue;
      if (!d.empty() && d.back().second == stride * size) d.back() = {d.back().first * size, stride};
      else d.emplace_back(size, stride);
    }
    return d;
  };
  const auto k = nest(0, kept), r = nest(kept, moved.dim());
  if (k.size() > 1 || r.size() > 2 || (!r.empty() && r.back().second != 1)) return {contiguous_copy(moved), R, 1, R, 0};
  const bool outer = r.size() == 2;
  return {moved, k.empty() ? 0 : k[0].second, outer ? r[0].first : 1, r.empty() ? 1 : r.back().first, outer ? r[0].second : 0};
}

Tensor sum(const Tensor& x_in, const Shape& dims_in, bool keepdim) {
  Shape red = dims_in.empty() ? Shape() : normalize_dims("sum", dims_in, x_in.dim());
  if (dims_in.empty()) { red.resize(x_in.dim()); std::iota(red.begin(), red.end(), 0); }
  // A reduced dim of stride 0 (an expand) repeats one slice: it is summed once and multiplied by
  // the repeats, never read (or copied) repeat by repeat: zeros({1}).expand({1 << 40}).sum() is quick.
  Shape shape = x_in.shape();
  int64_t repeats = 1;
  for (int64_t d : red)
    if (x_in.strides()[d] == 0 && shape[d] > 1) repeats *= std::exchange(shape[d], 1);
  const Tensor x = x_in.as_strided(shape, x_in.strides(), x_in.storage_offset());
  auto [moved, out_shape] = move_reduced_last(x, red, keepdim);
  int64_t R = 1;
  for (int64_t d : red) R *= x.shape()[d];
  const int64_t rows = R == 0 ? numel_of(out_shape) : x.numel() / R;
  DType out_dtype = x.is_floating_point() ? x.dtype() : kInt64;
  Tensor out = empty(out_shape, out_dtype);
  dispatch(x.dtype(), [&, &moved = moved](auto tag) {  // init-capture: clang before 16 cannot capture a structured binding
    using T = typename decltype(tag)::type;
    using Acc = acc_t<T>;
    using O = std::conditional_t<std::is_floating_point_v<opmath_t<T>>, T, int64_t>;
    O* o = out.data_ptr<O>();
    bool leading = x.is_contiguous() && !red.empty() && red.back() == (int64_t)red.size() - 1;
    if (leading && rows > 1) {  // out[j] = sum_i x[i, j]: accumulate whole rows, no transpose
      const T* p = (const T*)x.raw_data();
      parallel_for(rows, R, [&](int64_t begin, int64_t end) {  // threads take columns
        const int64_t n = end - begin;
        std::vector<Acc> acc(n, Acc(0));
        WidenedBuffer<opmath_t<T>> buf;
        for (int64_t i = 0; i < R; ++i) {
          const opmath_t<T>* row = as_opmath(p + i * rows + begin, n, buf);
          for (int64_t j = 0; j < n; ++j) acc[j] += Acc(row[j]);
        }
        for (int64_t j = 0; j < n; ++j) o[begin + j] = O(opmath_t<O>(acc[j] * Acc(repeats)));
      });
      return;
    }
    const RowRuns in = row_runs(moved, moved.dim() - (int64_t)red.size(), R);
    const T* p = (const T*)in.base.raw_data();
    // Each row is summed in order, one add waiting on the last: kRows rows side by side keep kRows
    // adds in flight, each row's sum unchanged (batch norm's channel sums); rows left over go one at
    // a time. A chunk bounds the 16-bit rows' widened copies (kRows × 1,024 floats).
    constexpr int64_t kRows = 8, kChunk = 1024;
    using Buffers = WidenedBuffer<opmath_t<T>>[kRows];  // a thread's, reused row after row
    auto sum_rows = [&](Buffers& buf, int64_t r0, auto lanes) {
      Acc acc[lanes] = {};
      for (int64_t j = 0; j < in.runs; ++j)
        for (int64_t i0 = 0; i0 < in.run; i0 += kChunk) {
          const int64_t n = std::min(kChunk, in.run - i0);
          const opmath_t<T>* row[lanes];
          for (int64_t k = 0; k < lanes; ++k) row[k] = as_opmath(p + (r0 + k) * in.row_stride + j * in.run_stride + i0, n, buf[k]);
          for (int64_t i = 0; i < n; ++i)
            for (int64_t k = 0; k < lanes; ++k) acc[k] += Acc(row[k][i]);
        }
      for (int64_t k = 0; k < lanes; ++k) o[r0 + k] = O(opmath_t<O>(acc[k] * Acc(repeats)));
    };
    parallel_for(rows, R, [&](int64_t begin, int64_t end) {
      Buffers buf;
      int64_t r = begin;
      for (; r + kRows <= end; r += kRows) sum_rows(buf, r, std::integral_constant<int64_t, kRows>{});
      for (; r < end; ++r) sum_rows(buf, r, std::integral_constant<int64_t, 1>{});
    });
  });
  return out;
}

std::pair<Tensor, Tensor> max_dim(const Tensor& x, int64_t dim, bool keepdim, bool is_min) {
  const char* op = is_min ? "min" : "max";
  Shape red = normalize_dims(op, {dim}, x.dim());  // empty only for a 0-d x
  auto [moved, out_shape] = move_reduced_last(x, red, keepdim);
  const int64_t R = x.dim() == 0 ? 1 : x.shape()[red[0]], rows = x.numel() / R;
  Tensor values = empty(out_shape, x.dtype()), indices = empty(out_shape, kInt64);
  int64_t* idx = indices.data_ptr<int64_t>();
  dispatch(x.dtype(), [&, &moved = moved](auto tag) {  // init-capture, as in sum
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    Tensor c = contiguous_copy(moved);
    const T* p = (const T*)c.raw_data();
    T* v = (T*)values.raw_data();
    parallel_for(rows, R, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* row = p + r * R;
        int64_t best = 0;
        for (int64_t i = 1; i < R; ++i) {
          A a = A(row[i]), b = A(row[best]);
          if (b != b) break;  // NaN wins and stays, as in PyTorch
          if (a != a || (is_min ? a < b : a > b)) best = i;
        }
        v[r] = row[best];
        idx[r] = best;
      }
    });
  });
  return {values, indices};
}

// Walks index (int64, the rank of `shape`: checked in tensor/kernels.cpp) and calls f(flat
// position in index, flat position in a contiguous tensor of `shape` with the dim coordinate
// replaced by the index), checking each index value on the way. Along the last dim of an index
// as long as `shape` in every other dim (max pooling's backward, a loss's gather), row r of the
// index reads or writes row r alone: the index is checked whole first, then rows go to the
// threads, each walked in order as before.
template <class F> static void walk_index(const char* op, const Shape& shape, int64_t dim, const Tensor& index, F f) {
  Tensor ic = contiguous_copy(index);
  const int64_t* ip = ic.data_ptr<int64_t>();
  const int64_t last = int64_t(shape.size()) - 1;
  if (dim == last && std::equal(shape.begin(), shape.end() - 1, index.shape().begin())) {
    const int64_t n = index.shape()[last], size = shape[last];
    const auto [lo, hi] = std::minmax_element(ip, ip + ic.numel());
    AMPGRAD_CHECK(ic.numel() == 0 || (*lo >= 0 && *hi < size),
                  op << ": index " << (*lo < 0 ? *lo : *hi) << " is out of bounds for dim " << dim << " of size " << size);
    if (n > 0)
      parallel_for(ic.numel() / n, n, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r)
          for (int64_t j = 0; j < n; ++j) f(r * n + j, r * size + ip[r * n + j]);
      });
    return;
  }
  Shape strides = contiguous_strides(shape), coord(shape.size(), 0);
  for (int64_t k = 0; k < ic.numel(); ++k) {
    int64_t i = ip[k], pos = 0;
    AMPGRAD_CHECK(i >= 0 && i < shape[dim], op << ": index " << i << " is out of bounds for dim " << dim << " of size " << shape[dim]);
    for (size_t d = 0; d < shape.size(); ++d) pos += ((int64_t)d == dim ? i : coord[d]) * strides[d];
    f(k, pos);
    for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
      if (++coord[d] < index.shape()[d]) break;
      coord[d] = 0;
    }
  }
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  dim = normalize_dims("gather", {dim}, x.dim())[0];
  Tensor xc = contiguous_copy(x), out = empty(index.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = (const T*)xc.raw_data();
    T* o = (T*)out.raw_data();
    walk_index("gather", x.shape(), dim, index, [&](int64_t k, int64_t pos) { o[k] = p[pos]; });
  });
  return out;
}

Tensor scatter_add(const Shape& shape, int64_t dim, const Tensor& index, const Tensor& src) {
  dim = normalize_dims("scatter_add", {dim}, (int64_t)shape.size())[0];
  Tensor out = zeros(shape, src.dtype()), sc = contiguous_copy(src);
  dispatch(src.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    const T* s = (const T*)sc.raw_data();
    T* o = (T*)out.raw_data();
    if constexpr (!std::is_same_v<T, bool>)
      walk_index("scatter_add", shape, dim, index, [&](int64_t k, int64_t pos) { o[pos] = T(A(o[pos]) + A(s[k])); });
  });
  return out;
}

// x viewed as (outer, size, inner) around `dim`, and its index's values checked once, before any
// write: index_select and index_add walk whole rows of `inner` elements.
struct Slices {
  int64_t outer = 1, size, inner = 1;
  std::vector<int64_t> index;
};
static Slices slices(const char* op, const Shape& shape, int64_t dim, const Tensor& index) {
  Slices s;
  s.size = shape[dim];
  for (int64_t d = 0; d < dim; ++d) s.outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d) s.inner *= shape[d];
  Tensor ic = contiguous_copy(index);
  s.index.assign(ic.data_ptr<int64_t>(), ic.data_ptr<int64_t>() + ic.numel());
  for (int64_t i : s.index) AMPGRAD_CHECK(i >= 0 && i < s.size, op << ": index " << i << " is out of bounds for dim " << dim << " of size " << s.size);
  return s;
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  dim = normalize_dims("index_select", {dim}, x.dim())[0];
  const Slices s = slices("index_select", x.shape(), dim, index);
  Shape out_shape = x.shape();
  out_shape[dim] = int64_t(s.index.size());
  Tensor out = empty(out_shape, x.dtype());
  if (out.numel() == 0) return out;  // memcpy may not see the null pointers of empty storage
  Tensor xc = contiguous_copy(x);
  const int64_t n = int64_t(s.index.size()), row_bytes = s.inner * x.element_size();
  const char* p = (const char*)xc.raw_data();
  char* o = (char*)out.raw_data();
  for (int64_t a = 0; a < s.outer; ++a)
    for (int64_t j = 0; j < n; ++j) std::memcpy(o + (a * n + j) * row_bytes, p + (a * s.size + s.index[j]) * row_bytes, row_bytes);
  return out;
}

// In index order, one row at a time: a slice named twice gets its two rows added in the same
// order on every run.
Tensor index_add(const Shape& shape, int64_t dim, const Tensor& index, const Tensor& src) {
  dim = normalize_dims("index_add", {dim}, (int64_t)shape.size())[0];
  const Slices s = slices("index_add", shape, dim, index);
  Tensor out = zeros(shape, src.dtype()), sc = contiguous_copy(src);
  const int64_t n = int64_t(s.index.size());
  dispatch(src.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = opmath_t<T>;
    const T* sp = (const T*)sc.raw_data();
    T* o = (T*)out.raw_data();
    if constexpr (!std::is_same_v<T, bool>)
      for (int64_t a = 0; a < s.outer; ++a)
        for (int64_t j = 0; j < n; ++j) {
          T* dst = o + (a * s.size + s.index[j]) * s.inner;
          const T* row = sp + (a * n + j) * s.inner;
          for (int64_t i = 0; i < s.inner; ++i) dst[i] = T(A(dst[i]) + A(row[i]));
        }
  });
  return out;
}

}  // namespace ampgrad::cpu
