// creation.cpp — making tensors (empty, full, zeros, ones, arange, from_blob, from_vector) and
// reading them back to the host (to_vector, item), for every dtype the library stores.
#include <cmath>
#include <cstring>

#include "tensor/kernels.h"
#include "tensor/tensor.h"

namespace ampgrad {

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

// The length is worked out in double and checked before any int64 or allocation is made of it;
// the values are written into a float64 tensor, so a length too large for memory is the
// allocator's named refusal.
Tensor arange(double start, double end, double step, TensorOptions o) {
  const double count = std::ceil((end - start) / step);
  AMPGRAD_CHECK(std::isfinite(start) && std::isfinite(end) && step != 0 && count >= 0 && count < 0x1p62,
                "arange: cannot go from " << start << " to " << end << " in steps of " << step);
  Tensor v = empty({int64_t(count)}, kFloat64), out = empty(v.shape(), o.dtype(o.dtype_or(kFloat32)));
  double* p = v.data_ptr<double>();
  for (int64_t i = 0; i < v.numel(); ++i) p[i] = start + i * step;
  kernels::copy_(out, v);  // the kernel: out may be a leaf that requires grad
  return out;
}
Tensor arange(int64_t end, TensorOptions o) { return arange(0.0, (double)end, 1.0, o.dtype(o.dtype_or(kInt64))); }

Tensor from_blob(const void* data, const Shape& shape, DType dtype, TensorOptions o) {
  Tensor host = empty(shape, TensorOptions(dtype));
  AMPGRAD_CHECK(data || host.numel() == 0, "from_blob: data is null for shape " << shape_str(shape));
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

}  // namespace ampgrad
