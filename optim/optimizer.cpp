// optimizer.cpp — the base: the parameter groups and their lrs, zero_grad, and the bookkeeping of
// a step (checks, state creation, step counts, the found_inf flag, then the CPU loop or a fused
// CUDA launch per group). Saving and loading that state is optimizer_state.cpp's.
#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "tensor/cpu/parallel.h"
#include "tensor/observer.h"
#ifdef AMPGRAD_WITH_CUDA
#include "tensor/cuda/runtime.h"  // DeviceGuard
#endif

namespace ampgrad::optim {

// Every parameter is checked before the group joins, so a refused group leaves the optimizer as
// it was. A parameter listed twice would take two steps each time.
void Optimizer::add_group(const std::vector<Tensor>& params, double lr) {
  std::vector<Tensor> all = params_;
  for (const Tensor& p : params) {
    const size_t i = all.size();
    AMPGRAD_CHECK(p.defined() && p.is_leaf(), name_ << ": parameter " << i << " is undefined or not a leaf tensor");
    for (size_t j = 0; j < i; ++j)
      AMPGRAD_CHECK(!p.is_same(all[j]), name_ << ": parameter " << i << " is parameter " << j << " again; a parameter may appear once, in one group");
    all.push_back(p);
  }
  params_ = std::move(all);
  group_begin_.push_back(params_.size());
  lrs_.push_back(lr);
  state_.resize(params_.size());
}

void Optimizer::require_params() const { AMPGRAD_CHECK(!params_.empty(), name_ << ": got an empty parameter list"); }

size_t Optimizer::group_of(size_t param) const {
  return size_t(std::upper_bound(group_begin_.begin(), group_begin_.end(), param) - group_begin_.begin()) - 1;
}

size_t Optimizer::check_group(size_t group) const {
  AMPGRAD_CHECK(group < num_param_groups(), name_ << ": no parameter group " << group << " (it has " << num_param_groups() << ")");
  return group;
}

std::span<const Tensor> Optimizer::param_group(size_t group) const {
  check_group(group);
  return std::span<const Tensor>(params_).subspan(group_begin_[group], group_begin_[group + 1] - group_begin_[group]);
}

double Optimizer::lr(size_t group) const { return lrs_[check_group(group)]; }
// A NaN or infinite rate would turn every parameter into NaN (the constructors refuse NaN too).
static double checked_lr(const char* optimizer, double lr) {
  AMPGRAD_CHECK(lr >= 0 && std::isfinite(lr), optimizer << ": set_lr: the learning rate must be finite and >= 0, got " << lr);
  return lr;
}
void Optimizer::set_lr(size_t group, double lr) { lrs_[check_group(group)] = checked_lr(name_, lr); }
void Optimizer::set_lr(double lr) { std::fill(lrs_.begin(), lrs_.end(), checked_lr(name_, lr)); }

void Optimizer::zero_grad(bool set_to_none) {
  for (Tensor& p : params_) {
    Tensor g = p.grad();
    if (set_to_none) p.set_grad(Tensor());
    else if (g.defined()) {
      if (g.requires_grad()) p.set_grad(g = g.detach());  // made with create_graph: its graph goes, as in PyTorch
      g.zero_();
    }
  }
}

// The optimizer updates float32 master weights; under AMP only the autocast copies are 16-bit,
// so another dtype here is a mistake worth stopping.
static void check_float32(const char* optimizer, const char* what, size_t i, const Tensor& t) {
  AMPGRAD_CHECK(t.dtype() == kFloat32, optimizer << ": " << what << " " << i << " is " << dtype_name(t.dtype())
                                                 << "; optimizers update float32 master weights (keep the model in float32 and use autocast)");
  AMPGRAD_CHECK(t.is_contiguous(), optimizer << ": " << what << " " << i << " is not contiguous");
}

void Optimizer::step() { run_step(Tensor()); }

void Optimizer::step_if_finite(const Tensor& found_inf) {
  AMPGRAD_CHECK(found_inf.defined() && found_inf.numel() == 1 && found_inf.dtype() == kFloat32,
                name_ << ": step_if_finite expects a one-element float32 found_inf flag");
  run_step(found_inf);
}

void Optimizer::run_step(const Tensor& found_inf) {
  Span phase("optimizer", SpanKind::phase);  // to a timeline
  std::vector<size_t> active;  // parameters with a gradient
  std::vector<Tensor> grads(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    grads[i] = p.grad().contiguous();
    check_float32(name_, "parameter", i, p);
    check_float32(name_, "gradient of parameter", i, grads[i]);
    if (!active.empty())
      AMPGRAD_CHECK(p.device() == params_[active[0]].device(), name_ << ": parameter " << i << " is on " << p.device().str() << ", parameter "
                                                                     << active[0] << " on " << params_[active[0]].device().str()
                                                                     << "; one optimizer updates parameters on one device");
    active.push_back(i);
  }
  if (active.empty()) return;
  const Device device = params_[active[0]].device();
  // The flag is read on the host unless the kernels can read it where it is: free on the CPU,
  // a sync only if someone hands CPU parameters a GPU flag (or the reverse).
  const bool flag_on_device = device.is_cuda() && found_inf.defined() && found_inf.device() == device;
  if (found_inf.defined() && !flag_on_device && found_inf.item<float>() != 0.f) return;
  // An in-place write like any other: a graph that saved a parameter may no longer read it.
  // (On a GPU the kernels may still skip on found_inf; the version moves regardless.)
  for (size_t i : active) params_[i].bump_version();

  MadeBy named("optimizer state");  // what its blocks are, to a listener naming memory
  for (size_t i : active) {
    ParamState& st = state_[i];
    if (st.step.defined()) continue;
    st.step = zeros({}, TensorOptions(kInt64).device(device));
    for (const std::string& name : buffer_names(group_of(i))) st.buffers[name] = zeros(params_[i].shape(), TensorOptions(kFloat32).device(device));
  }
#ifdef AMPGRAD_WITH_CUDA
  if (device.is_cuda()) {  // one fused launch per group, since the options differ between them
    cuda::DeviceGuard guard(device.index);
    for (size_t g = 0; g < num_param_groups(); ++g) {
      const std::vector<std::string> names = buffer_names(g);
      AMPGRAD_CHECK(names.size() <= std::size(FusedParam{}.buffer), name_ << ": the fused CUDA step carries at most 2 buffers per parameter");
      std::vector<FusedParam> fused;
      for (size_t i = group_begin_[g]; i < group_begin_[g + 1]; ++i) {
        if (!grads[i].defined()) continue;
        ParamState& st = state_[i];
        FusedParam f{params_[i].data_ptr<float>(), grads[i].data_ptr<float>(), {nullptr, nullptr}, st.step.data_ptr<int64_t>(), params_[i].numel()};
        for (size_t k = 0; k < names.size(); ++k) f.buffer[k] = st.buffers.at(names[k]).data_ptr<float>();
        fused.push_back(f);
      }
      if (!fused.empty()) update_cuda(g, fused, flag_on_device ? found_inf.data_ptr<float>() : nullptr);
    }
    return;
  }
#endif
  for (size_t i : active) {
    ParamState& st = state_[i];
    const int64_t step = ++*st.step.data_ptr<int64_t>();
    cpu::parallel_for(params_[i].numel(), 4, [&](int64_t begin, int64_t end) {  // a stretch of the parameter per thread
      update_cpu(group_of(i), params_[i].data_ptr<float>(), grads[i].data_ptr<float>(), begin, end, step, st);
    });
  }
}

}  // namespace ampgrad::optim
