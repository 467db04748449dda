// tensor_methods.cpp — the Tensor methods that need autograd: gradient state, backward, and
// the method forms of the ops (x.sum() is sum(x)). In-place updates live here too, since they
// must refuse to modify values a recorded graph may still need.
#include <iostream>
#include <mutex>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"

namespace ampgrad {

bool Tensor::requires_grad() const { return impl().requires_grad; }
Tensor& Tensor::requires_grad_(bool r) {
  AMPGRAD_CHECK(!r || (is_floating_point() && !is_storage_only(dtype())),
                "requires_grad_: only floating tensors of a compute dtype can require gradients, got " << dtype_name(dtype()));
  AMPGRAD_CHECK(r || is_leaf(), "requires_grad_: cannot turn off gradients of a non-leaf tensor; use detach()");
  impl().requires_grad = r;
  return *this;
}
Tensor Tensor::grad() const { return Tensor(impl().grad); }
void Tensor::set_grad(const Tensor& g) {
  AMPGRAD_CHECK(!g.defined() || (g.shape() == shape() && g.dtype() == dtype()),
                "set_grad: gradient " << shape_str(g.shape()) << " " << dtype_name(g.dtype()) << " does not match tensor " << shape_str(shape()) << " " << dtype_name(dtype()));
  impl().grad = g.impl_ptr();
}
bool Tensor::is_leaf() const { return impl().grad_fn == nullptr; }
std::shared_ptr<autograd::Node> Tensor::grad_fn() const { return impl().grad_fn; }

// As PyTorch, once: a .grad made with create_graph holds a graph that holds its leaf.
static void warn_create_graph_cycle() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::cerr << "ampgrad: warning: backward(create_graph=true) puts a graph in each leaf's .grad that refers back to the leaf, a "
                 "reference cycle: set the grads undefined when done (zero_grad()), or take the gradients with autograd::grad\n";
  });
}

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph, bool create_graph) const {
  AMPGRAD_CHECK(requires_grad(), "backward: tensor does not require grad and has no grad_fn");
  if (create_graph) warn_create_graph_cycle();
  autograd::run_backward({*this}, {autograd::root_gradient("backward", *this, gradient, create_graph)}, retain_graph.value_or(create_graph), {},
                         create_graph);
}

Tensor Tensor::detach() const {
  Tensor d = as_strided(shape(), strides(), storage_offset());
  d.impl().is_view = impl().is_view;  // the same tensor, not a view of it
  return d;
}

Tensor Tensor::to(DType t) const { return ampgrad::to(*this, t); }
Tensor Tensor::to(Device d) const { return ampgrad::to(*this, d); }
Tensor Tensor::reshape(const Shape& s) const { return ampgrad::reshape(*this, s); }
Tensor Tensor::view(const Shape& s) const { return ampgrad::view(*this, s); }
Tensor Tensor::flatten(int64_t a, int64_t b) const { return ampgrad::flatten(*this, a, b); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return ampgrad::transpose(*this, a, b); }
Tensor Tensor::permute(const Shape& d) const { return ampgrad::permute(*this, d); }
Tensor Tensor::t() const {
  AMPGRAD_CHECK(dim() <= 2, "t: expects a tensor with <= 2 dims, got " << dim());
  return dim() < 2 ? *this : ampgrad::transpose(*this, 0, 1);
}
Tensor Tensor::narrow(int64_t d, int64_t s, int64_t l) const { return ampgrad::narrow(*this, d, s, l); }
Tensor Tensor::index_select(int64_t d, const Tensor& index) const { return ampgrad::index_select(*this, d, index); }
Tensor Tensor::select(int64_t d, int64_t i) const { return ampgrad::select(*this, d, i); }
Tensor Tensor::expand(const Shape& s) const { return ampgrad::expand(*this, s); }
Tensor Tensor::unsqueeze(int64_t d) const { return ampgrad::unsqueeze(*this, d); }
Tensor Tensor::squeeze(std::optional<int64_t> d) const { return ampgrad::squeeze(*this, d); }
Tensor Tensor::contiguous() const { return ampgrad::contiguous(*this); }
Tensor Tensor::clone() const { return ampgrad::clone(*this); }
Tensor Tensor::sum(const Shape& d, bool k) const { return ampgrad::sum(*this, d, k); }
Tensor Tensor::mean(const Shape& d, bool k) const { return ampgrad::mean(*this, d, k); }
Tensor Tensor::max() const { return ampgrad::max(*this); }
Tensor Tensor::min() const { return ampgrad::min(*this); }
Tensor Tensor::argmax(std::optional<int64_t> d, bool k) const { return ampgrad::argmax(*this, d, k); }
Tensor Tensor::matmul(const Tensor& o) const { return ampgrad::matmul(*this, o); }
Tensor Tensor::pow(double e) const { return ampgrad::pow(*this, e); }
Tensor Tensor::exp() const { return ampgrad::exp(*this); }
Tensor Tensor::log() const { return ampgrad::log(*this); }
Tensor Tensor::sqrt() const { return ampgrad::sqrt(*this); }
Tensor Tensor::abs() const { return ampgrad::abs(*this); }
Tensor Tensor::neg() const { return ampgrad::neg(*this); }
Tensor Tensor::tanh() const { return ampgrad::tanh(*this); }
Tensor Tensor::sigmoid() const { return ampgrad::sigmoid(*this); }
Tensor Tensor::relu() const { return ampgrad::relu(*this); }

// In-place updates are for optimizers and initialisers: they are not differentiable, so they are
// refused wherever a graph may be recorded through the tensor. (The kernels bump the storage's
// version: a backward that saved this tensor, autograd::Saved, then refuses to read it.)
static void check_inplace(const char* op, const Tensor& t) {
  AMPGRAD_CHECK(!(is_grad_enabled() && t.requires_grad()),
                op << ": a tensor that requires grad cannot be modified in place while grad mode is on; wrap the update in NoGradGuard");
}
Tensor& Tensor::zero_() { return fill_(0.0); }
Tensor& Tensor::fill_(double v) { check_inplace("fill_", *this); kernels::fill_(*this, v); return *this; }
Tensor& Tensor::copy_(const Tensor& src) { check_inplace("copy_", *this); kernels::copy_(*this, src); return *this; }
Tensor& Tensor::add_(const Tensor& o, double alpha) {
  check_inplace("add_", *this);
  AMPGRAD_CHECK(is_floating_point() || !o.is_floating_point(), "add_: result type " << dtype_name(o.dtype()) << " can't be cast to the desired output type " << dtype_name(dtype()));
  kernels::add_(*this, o.dtype() == dtype() ? o : o.detach().to(dtype()), alpha);
  return *this;
}
Tensor& Tensor::mul_(double f) { check_inplace("mul_", *this); kernels::mul_(*this, f); return *this; }

}  // namespace ampgrad
