// tensor.h — Storage, TensorImpl and the Tensor handle.
// A Tensor is a shared handle to (storage, shape, strides, offset, dtype); views share storage.
// This file knows no graphs: the differentiable methods declared at the bottom (to, reshape,
// sum, backward, ...) are defined in autograd/, which is where every op records its backward.
//
//   Tensor w = randn({3, 2}).requires_grad_();
//   Tensor y = matmul(ones({4, 3}), w).sum();
//   y.backward();                      // w.grad() == column sums of ones: all 4
#pragma once
#include <cstring>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/error.h"

namespace ampgrad {

namespace autograd { struct Node; }
using Shape = std::vector<int64_t>;

// Owns one allocation on one device; freed through the device's allocator.
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  uint64_t version = 0;  // counts in-place writes, so autograd can tell a saved tensor was overwritten
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape, strides;  // strides in elements
  int64_t offset = 0;    // in elements
  DType dtype = kFloat32;
  bool is_view = false;  // shares storage with the tensor it was made from
  // Autograd state; only autograd/ reads or writes it.
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad = nullptr;  // (initialised, so a designated initializer may leave them out)
  std::shared_ptr<autograd::Node> grad_fn = nullptr;
};

// What a creation function makes: a dtype, a device, requires_grad. "No dtype chosen" is kept
// apart from float32, so each function fills in its own default: float32 for zeros or randn,
// the element type for from_vector, int64 for randint, as PyTorch's factory functions do.
//   from_vector(std::vector<int64_t>{1, 2}, {2}, TensorOptions().device(d))  // int64 on d
struct TensorOptions {
  std::optional<DType> dtype_;
  Device device_ = Device::cpu();
  bool requires_grad_ = false;
  TensorOptions() = default;
  TensorOptions(DType t) : dtype_(t) {}
  TensorOptions(Device d) : device_(d) {}
  TensorOptions dtype(DType t) const { auto o = *this; o.dtype_ = t; return o; }
  TensorOptions device(Device d) const { auto o = *this; o.device_ = d; return o; }
  TensorOptions requires_grad(bool r = true) const { auto o = *this; o.requires_grad_ = r; return o; }
  DType dtype_or(DType fallback) const { return dtype_.value_or(fallback); }
};

Shape contiguous_strides(const Shape& shape);
int64_t numel_of(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& sizes() const { return impl().shape; }
  int64_t size(int64_t dim) const;  // negative dims count from the end
  const Shape& strides() const { return impl().strides; }
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return (int64_t)impl().shape.size(); }
  int64_t numel() const { return numel_of(impl().shape); }
  int64_t storage_offset() const { return impl().offset; }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device; }
  size_t element_size() const { return itemsize(dtype()); }
  bool is_contiguous() const;
  bool is_floating_point() const { return ampgrad::is_floating_point(dtype()); }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  bool shares_storage(const Tensor& o) const { return impl().storage == o.impl().storage; }
  // In-place writes (Tensor::add_ and its kin, an optimizer's step) bump the version of the
  // storage, which every view of it shares; a backward checks the tensors it saved against it.
  uint64_t version() const { return impl().storage->version; }
  void bump_version() const { ++impl().storage->version; }

  // Raw element pointer (offset applied). T must match dtype(); raises otherwise.
  template <class T> T* data_ptr() const {
    AMPGRAD_CHECK(dtype_of<T>() == dtype(), "data_ptr: tensor has dtype " << dtype_name(dtype())
                                              << ", asked for " << dtype_name(dtype_of<T>()));
    return static_cast<T*>(raw_data());
  }
  void* raw_data() const;
  // The single value of a one-element tensor, converted to T (copied from the device).
  template <class T> T item() const;

  // A view with the given geometry over the same storage. Not differentiable: autograd's
  // view ops (reshape, transpose, narrow, ...) call this and record their own backward.
  Tensor as_strided(Shape shape, Shape strides, int64_t offset) const;

  TensorImpl& impl() const {
    AMPGRAD_CHECK(impl_, "operation on an undefined tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // ---- autograd state (defined in autograd/tensor_methods.cpp) ----
  bool requires_grad() const;
  Tensor& requires_grad_(bool requires_grad = true);
  Tensor grad() const;            // undefined until a backward reaches this leaf
  void set_grad(const Tensor& g);  // undefined tensor clears it
  bool is_leaf() const;
  std::shared_ptr<autograd::Node> grad_fn() const;
  // retain_graph defaults to create_graph, as in PyTorch; create_graph records the backward
  // itself, so the gradients (and .grad) can be differentiated again.
  void backward(const Tensor& gradient = {}, std::optional<bool> retain_graph = std::nullopt, bool create_graph = false) const;
  Tensor detach() const;  // same storage, no history

  // ---- differentiable methods (defined in autograd/, forwarding to the free functions) ----
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor reshape(const Shape& shape) const;
  Tensor view(const Shape& shape) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor permute(const Shape& dims) const;
  Tensor t() const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& shape) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(std::optional<int64_t> dim = {}) const;
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor sum(const Shape& dims = {}, bool keepdim = false) const;
  Tensor mean(const Shape& dims = {}, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  Tensor argmax(std::optional<int64_t> dim = {}, bool keepdim = false) const;
  Tensor matmul(const Tensor& other) const;
  Tensor pow(double exponent) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor abs() const;
  Tensor neg() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;

  // ---- in-place updates (optimizers, initialisers): refused where autograd would need the
  // old values, i.e. on a tensor that requires grad while grad mode is on ----
  Tensor& zero_();
  Tensor& fill_(double value);
  Tensor& copy_(const Tensor& src);  // broadcasts and casts src into this
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& mul_(double factor);

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);  // like PyTorch's repr
std::string to_string(const Tensor& t);

// ---- creation ----
Tensor empty(const Shape& shape, TensorOptions opts = {});
Tensor zeros(const Shape& shape, TensorOptions opts = {});
Tensor ones(const Shape& shape, TensorOptions opts = {});
Tensor full(const Shape& shape, double value, TensorOptions opts = {});
Tensor scalar_tensor(double value, TensorOptions opts = {});  // 0-d
Tensor arange(double start, double end, double step = 1, TensorOptions opts = {});
Tensor arange(int64_t end, TensorOptions opts = {});  // int64 unless opts choose a dtype
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
// Copies `values` into a new tensor of the given shape, converted to opts' dtype if it names one.
template <class T> Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions opts = {});
template <class T> Tensor from_vector(const std::vector<T>& values) { return from_vector(values, {(int64_t)values.size()}); }
Tensor from_blob(const void* data, const Shape& shape, DType dtype, TensorOptions opts = {});  // copies
template <class T> std::vector<T> to_vector(const Tensor& t);  // row-major values, converted to T

}  // namespace ampgrad
