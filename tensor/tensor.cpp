// tensor.cpp — storage allocation, geometry, creation, host copies and printing.
#include "tensor/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "tensor/cpu/allocator.h"
#include "tensor/kernels.h"
#ifdef AMPGRAD_WITH_CUDA
#include "tensor/cuda/runtime.h"
#endif

namespace ampgrad {

const char* device_type_name(DeviceType t) { return t == DeviceType::CPU ? "cpu" : "cuda"; }

#ifndef AMPGRAD_WITH_CUDA
namespace cuda {  // without the backend: no devices (tensor/cuda/runtime.cpp otherwise)
bool is_available() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() { return "no CUDA device: ampgrad was built without the CUDA backend"; }
std::string device_name(int device) { throw Error("cuda::device_name(" + std::to_string(device) + "): " + unavailable_reason()); }
}  // namespace cuda
#endif

Storage::Storage(size_t n, Device d) : nbytes(n), device(d) {
  if (d.is_cuda()) {
#ifdef AMPGRAD_WITH_CUDA
    data = cuda::allocate(n, d.index);
    return;
#else
    AMPGRAD_CHECK(false, "cannot allocate on " << d.str() << ": ampgrad was built without the CUDA backend");
#endif
  }
  data = cpu::allocate(n);  // 64-byte aligned: a cache line, and enough for any vector load
}
Storage::~Storage() {
#ifdef AMPGRAD_WITH_CUDA
  if (device.is_cuda()) {
    cuda::deallocate(data, device.index);
    return;
  }
#endif
  cpu::deallocate(data, nbytes);
}

// Sizes multiply with an overflow check: a shape read from a file may be anything. Counting a 0
// as 1 in numel_of refuses [0, 2^62, 2^62] too, whose strides would overflow though it holds
// no element; a shape that passes has strides and byte counts that fit.
static int64_t size_product(int64_t a, int64_t b, const Shape& shape) {
  int64_t product;
  AMPGRAD_CHECK(!__builtin_mul_overflow(a, b, &product), "shape " << shape_str(shape) << ": its sizes multiply past int64's range");
  return product;
}
Shape contiguous_strides(const Shape& shape) {
  Shape s(shape.size());
  int64_t acc = 1;
  for (int64_t i = (int64_t)shape.size() - 1; i >= 0; --i) {
    s[i] = acc;
    if (i > 0) acc = size_product(acc, shape[i], shape);
  }
  return s;
}
int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  bool no_elements = false;
  for (int64_t d : shape) {
    no_elements |= d == 0;
    n = size_product(n, d == 0 ? 1 : d, shape);
  }
  return no_elements ? 0 : n;
}

static int64_t wrap_dim(int64_t dim, int64_t ndim) {
  int64_t d = dim < 0 ? dim + ndim : dim;
  AMPGRAD_CHECK(d >= 0 && d < ndim, "dimension " << dim << " out of range for a tensor of " << ndim << " dims");
  return d;
}
int64_t Tensor::size(int64_t dim) const { return shape()[wrap_dim(dim, this->dim())]; }
int64_t Tensor::stride(int64_t dim) const { return strides()[wrap_dim(dim, this->dim())]; }

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // no elements, no layout: as PyTorch says
  int64_t expected = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    if (shape()[i] == 1) continue;
    if (strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  return static_cast<char*>(impl().storage->data) + impl().offset * (int64_t)element_size();
}

Tensor Tensor::as_strided(Shape shape, Shape strides, int64_t offset) const {
  return Tensor(std::make_shared<TensorImpl>(
      TensorImpl{.storage = impl().storage, .shape = std::move(shape), .strides = std::move(strides), .offset = offset, .dtype = dtype(), .is_view = true}));
}

template <class T> std::vector<T> to_vector(const Tensor& t) {
  Tensor host = empty(t.shape(), TensorOptions(dtype_of<T>()));
  kernels::copy_(host, t);
  const T* p = host.data_ptr<T>();
  return std::vector<T>(p, p + host.numel());
}
template <class T> T Tensor::item() const {
  AMPGRAD_CHECK(numel() == 1, "item: a tensor with " << numel() << " elements cannot be converted to a scalar");
  return dispatch_with_storage(dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    return static_cast<T>(static_cast<opmath_t<S>>(to_vector<S>(*this)[0]));
  });
}

Tensor empty(const Shape& shape, TensorOptions o) {
  for (int64_t d : shape) AMPGRAD_CHECK(d >= 0, "empty: negative dimension in shape " << shape_str(shape));
  const DType dtype = o.dtype_or(kFloat32);
  const int64_t nbytes = size_product(numel_of(shape), int64_t(itemsize(dtype)), shape);
  Tensor t(std::make_shared<TensorImpl>(
      TensorImpl{.storage = std::make_shared<Storage>(nbytes, o.device_), .shape = shape, .strides = contiguous_strides(shape), .dtype = dtype}));
  if (o.requires_grad_) t.requires_grad_();
  return t;
}
Tensor full(const Shape& shape, double value, TensorOptions o) {
  Tensor t = empty(shape, o);
  kernels::fill_(t, value);  // the kernel, not Tensor::fill_: a leaf that requires grad may be filled here
  return t;
}
Tensor zeros(const Shape& shape, TensorOptions o) { return full(shape, 0.0, o); }
Tensor ones(const Shape& shape, TensorOptions o) { return full(shape, 1.0, o); }
Tensor scalar_tensor(double value, TensorOptions o) { return full({}, value, o); }
static TensorOptions like(const Tensor& t) { return TensorOptions(t.dtype()).device(t.device()); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), like(t)); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), like(t)); }
Tensor full_like(const Tensor& t, double v) { return full(t.shape(), v, like(t)); }

Tensor arange(double start, double end, double step, TensorOptions o) {
  AMPGRAD_CHECK(step != 0 && (end - start) / step >= 0, "arange: cannot go from " << start << " to " << end << " in steps of " << step);
  int64_t n = (int64_t)std::ceil((end - start) / step);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + i * step;
  return from_vector(v, {n}, o.dtype(o.dtype_or(kFloat32)));
}
Tensor arange(int64_t end, TensorOptions o) { return arange(0.0, (double)end, 1.0, o.dtype(o.dtype_or(kInt64))); }

Tensor from_blob(const void* data, const Shape& shape, DType dtype, TensorOptions o) {
  Tensor host = empty(shape, TensorOptions(dtype));
  if (host.numel() > 0) std::memcpy(host.raw_data(), data, host.numel() * itemsize(dtype));  // an empty vector's data may be null
  o = o.dtype(o.dtype_or(dtype));  // no dtype chosen: the data's own
  if (o.dtype_ == dtype && o.device_.is_cpu()) return o.requires_grad_ ? host.requires_grad_() : host;
  Tensor out = empty(shape, o);
  kernels::copy_(out, host);
  return out;
}

template <class T> Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions o) {
  AMPGRAD_CHECK((int64_t)values.size() == numel_of(shape), "from_vector: " << values.size() << " values cannot fill shape " << shape_str(shape));
  if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> packs bits; unpack first
    std::vector<uint8_t> bytes(values.begin(), values.end());
    return from_blob(bytes.data(), shape, kBool, o);
  } else {
    return from_blob(values.data(), shape, dtype_of<T>(), o);
  }
}

#define AMPGRAD_INSTANTIATE(T)                                                           \
  template Tensor from_vector<T>(const std::vector<T>&, const Shape&, TensorOptions);    \
  template T Tensor::item<T>() const;                                                    \
  template std::vector<T> to_vector<T>(const Tensor&);
AMPGRAD_INSTANTIATE(float)
AMPGRAD_INSTANTIATE(double)
AMPGRAD_INSTANTIATE(half)
AMPGRAD_INSTANTIATE(bfloat16)
AMPGRAD_INSTANTIATE(int64_t)
AMPGRAD_INSTANTIATE(bool)
#undef AMPGRAD_INSTANTIATE

// ---- printing, in PyTorch's style: tensor([[1.0000, 2.0000]], dtype=float16) ----
namespace {
struct Formatter {
  bool is_float, integral = true, sci = false;
  int width = 1;
  explicit Formatter(const std::vector<double>& v, bool fp) : is_float(fp) {
    double amax = 0, amin_nz = INFINITY;
    for (double x : v) {
      if (!std::isfinite(x)) continue;
      if (x != std::round(x)) integral = false;
      amax = std::max(amax, std::abs(x));
      if (x != 0) amin_nz = std::min(amin_nz, std::abs(x));
    }
    // torch/_tensor_str.py's rule, over the finite nonzero values
    sci = is_float && amin_nz < INFINITY && (amax / amin_nz > 1000 || amax > 1e8 || (!integral && amin_nz < 1e-4));
    for (double x : v)  // as PyTorch: a float column is as wide as its finite nonzero values
      if (!is_float || (std::isfinite(x) && x != 0)) width = std::max<int>(width, (int)str(x).size());
  }
  std::string str(double x) const {
    std::ostringstream os;
    if (!is_float) os << (int64_t)x;
    else if (std::isnan(x)) os << "nan";
    else if (std::isinf(x)) os << (x > 0 ? "inf" : "-inf");
    else if (sci) os << std::scientific << std::setprecision(4) << x;
    else if (integral) os << (int64_t)x << ".";
    else os << std::fixed << std::setprecision(4) << x;
    return os.str();
  }
};
// What a summarised print shows (the first and last 3 along every dim longer than 6): all that
// PyTorch's formatter measures widths and picks scientific notation from.
std::vector<double> shown(const std::vector<double>& v, const Shape& shape) {
  std::vector<double> out;
  Shape idx(shape.size(), 0);
  for (double x : v) {
    bool keep = true;
    for (size_t d = 0; d < shape.size() && keep; ++d) keep = shape[d] <= 6 || idx[d] < 3 || idx[d] >= shape[d] - 3;
    if (keep) out.push_back(x);
    for (int64_t d = (int64_t)shape.size() - 1; d >= 0 && ++idx[d] == shape[d]; --d) idx[d] = 0;
  }
  return out;
}
constexpr int kLineWidth = 80;  // torch's PRINT_OPTS.linewidth

// One tensor (or, below the first dim, one slice of it) at column `indent`, as
// torch/_tensor_str.py writes it: rows of the last dim wrap at the line width, and slices are
// separated by as many newlines as they have dims.
void print_rec(std::ostream& os, const std::vector<double>& v, const Shape& shape, size_t d, int64_t off,
               const Formatter& f, int indent, bool summarize, bool is_bool) {
  if (shape.empty()) { os << f.str(v[0]); return; }
  const int64_t n = shape[d];
  const bool elided = summarize && n > 6;  // the first and last 3, and "..." between
  if (d + 1 == shape.size()) {
    std::vector<std::string> items;
    for (int64_t i = 0; i < n; ++i) {
      if (elided && i == 3) {
        items.push_back(" ...");
        i = n - 3;
      }
      const double x = v[off + i];
      const std::string s = is_bool ? (x != 0 ? "True" : "False") : f.str(x);
      items.push_back(std::string(std::max<int>(0, f.width - (int)s.size()), ' ') + s);
    }
    const size_t per_line = std::max(1, (kLineWidth - indent) / (f.width + 2));  // ", " after each
    os << "[";
    for (size_t i = 0; i < items.size(); ++i)
      os << (i == 0 ? "" : i % per_line ? ", " : ",\n" + std::string(indent + 1, ' ')) << items[i];
    os << "]";
    return;
  }
  int64_t inner = 1;
  for (size_t k = d + 1; k < shape.size(); ++k) inner *= shape[k];
  const std::string between = "," + std::string(shape.size() - d - 1, '\n') + std::string(indent + 1, ' ');
  os << "[";
  for (int64_t i = 0; i < n; ++i) {
    if (elided && i == 3) {
      os << "..." << between;
      i = n - 3;
    }
    print_rec(os, v, shape, d + 1, off + i * inner, f, indent + 1, summarize, is_bool);
    if (i + 1 < n) os << between;
  }
  os << "]";
}

// "tensor(" + body, then ", device=...", ", dtype=..." and the like, each on a line of its own
// (at `indent`) where it would pass the line width: torch/_tensor_str.py's _add_suffixes, its
// line-length arithmetic included.
std::string with_suffixes(const std::string& body, const std::vector<std::string>& suffixes, int indent) {
  std::string out = body;
  const size_t newline = body.rfind('\n');
  int64_t last_line = newline == std::string::npos ? int64_t(body.size()) + 2 : int64_t(body.size() - newline) + 1;
  for (const std::string& s : suffixes) {
    if (last_line + int64_t(s.size()) + 2 > kLineWidth) {
      out += ",\n" + std::string(indent, ' ') + s;
      last_line = indent + int64_t(s.size());
    } else {
      out += ", " + s;
      last_line += int64_t(s.size()) + 2;
    }
  }
  return out + ")";
}
}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  std::vector<double> v = to_vector<double>(t);
  bool is_bool = t.dtype() == kBool;
  const bool summarize = t.numel() > 1000;
  const std::vector<double> measured = summarize ? shown(v, t.shape()) : v;
  Formatter f(measured, t.is_floating_point());
  if (is_bool) f.width = std::any_of(measured.begin(), measured.end(), [](double x) { return x == 0; }) ? 5 : 4;
  const std::string prefix = "tensor(";
  std::ostringstream body;
  body << prefix;
  std::vector<std::string> suffixes;  // in PyTorch's order
  if (!t.device().is_cpu()) suffixes.push_back("device='" + t.device().str() + "'");
  if (t.numel() == 0) {  // no elements to show the shape or the dtype by, so both are named
    body << "[]";
    if (t.dim() != 1) {
      std::ostringstream size;
      size << "size=(";
      for (int64_t d = 0; d < t.dim(); ++d) size << (d ? ", " : "") << t.size(d);
      suffixes.push_back(size.str() + ")");
    }
    if (t.dtype() != kFloat32) suffixes.push_back(std::string("dtype=") + dtype_name(t.dtype()));
  } else {
    print_rec(body, v, t.shape(), 0, 0, f, int(prefix.size()), summarize, is_bool);
    if (t.dtype() != kFloat32 && t.dtype() != kInt64 && t.dtype() != kBool) suffixes.push_back(std::string("dtype=") + dtype_name(t.dtype()));
  }
  if (t.requires_grad()) suffixes.push_back("requires_grad=True");
  return os << with_suffixes(body.str(), suffixes, int(prefix.size()));
}
std::string to_string(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

}  // namespace ampgrad
