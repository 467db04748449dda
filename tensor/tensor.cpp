// tensor.cpp — storage allocation (CPU or CUDA), a tensor's geometry (sizes, strides, contiguity,
// views) and empty(), the allocation every other creation goes through (creation.cpp); printing
// is print.cpp's.
#include "tensor/tensor.h"

#include "tensor/cpu/allocator.h"
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

// A view reads its own storage only: a size and a non-negative stride per dim, and its last
// element (offset + Σ (size − 1) · stride) inside the bytes the storage was made with.
Tensor Tensor::as_strided(Shape shape, Shape strides, int64_t offset) const {
  int64_t last = offset, step = 0;
  bool fits = shape.size() == strides.size() && offset >= 0, empty = false;
  for (size_t i = 0; fits && i < shape.size(); ++i) {
    fits = shape[i] >= 0 && strides[i] >= 0;
    empty |= shape[i] == 0;
    fits = fits && !__builtin_mul_overflow(std::max<int64_t>(shape[i] - 1, 0), strides[i], &step) && !__builtin_add_overflow(last, step, &last);
  }
  AMPGRAD_CHECK(fits && (empty || (last < INT64_MAX / 16 && (last + 1) * (int64_t)element_size() <= (int64_t)impl().storage->nbytes)),
                "as_strided: sizes " << shape_str(shape) << ", strides " << shape_str(strides) << " and storage offset " << offset
                    << " are out of bounds for a storage of " << impl().storage->nbytes << " bytes");
  return Tensor(std::make_shared<TensorImpl>(
      TensorImpl{.storage = impl().storage, .shape = std::move(shape), .strides = std::move(strides), .offset = offset, .dtype = dtype(), .is_view = true}));
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

}  // namespace ampgrad
