// module.cpp — Module's registry: registration checks, the one recursive walk every listing
// uses, dtype/device moves, and strict state_dict loading.
#include "nn/module.h"

#include <functional>
#include <map>
#include <set>
#include <unordered_set>

#include "autograd/grad_mode.h"

namespace ampgrad::nn {

void Module::check_new_name(const std::string& name) const {
  AMPGRAD_CHECK(!name.empty() && name.find('.') == std::string::npos,
                "Module: name '" << name << "' must be non-empty and contain no '.' (dots join nested names)");
  auto taken = [&](const auto& list) {
    for (const auto& entry : list)
      if (entry.first == name) return true;
    return false;
  };
  AMPGRAD_CHECK(!taken(params_) && !taken(buffers_) && !taken(children_), "Module: name '" << name << "' is already registered");
}

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_new_name(name);
  AMPGRAD_CHECK(t.defined() && t.is_leaf(), "register_parameter: '" << name << "' must be a defined leaf tensor (pass t.detach())");
  t.requires_grad_(requires_grad);
  params_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  check_new_name(name);
  AMPGRAD_CHECK(t.defined(), "register_buffer: '" << name << "' is undefined");
  buffers_.emplace_back(name, t);
  return t;
}

// Pre-order: own parameters, own buffers, then each child's under "child_name.". This is
// PyTorch's state_dict order, and named_parameters() is the same walk with buffers left out.
NamedTensors Module::collect(bool params, bool buffers, const std::string& prefix) const {
  NamedTensors out;
  if (params)
    for (const auto& [name, t] : params_) out.emplace_back(prefix + name, t);
  if (buffers)
    for (const auto& [name, t] : buffers_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_)
    for (auto& entry : child->collect(params, buffers, prefix + name + ".")) out.push_back(std::move(entry));
  return out;
}

// A tensor reached twice (a module used in two places) is listed once, under its first name, as
// by PyTorch's remove_duplicate: an optimizer given it twice would take two steps each time.
static NamedTensors first_of_each(const NamedTensors& all) {
  NamedTensors out;
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& [name, t] : all)
    if (seen.insert(t.impl_ptr().get()).second) out.emplace_back(name, t);
  return out;
}

NamedTensors Module::named_parameters() const { return first_of_each(collect(true, false)); }
NamedTensors Module::named_buffers() const { return first_of_each(collect(false, true)); }
std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}
std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [name, child] : children_) out.push_back(child);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (Tensor& p : parameters()) p.set_grad(Tensor());
}

// PyTorch's set_data: t's TensorImpl takes over `value`'s data and geometry, so every handle
// to t sees the new values, while t's autograd state (requires_grad, no history) stays.
static void set_data(const Tensor& t, const Tensor& value) {
  TensorImpl& dst = t.impl();
  const TensorImpl& src = value.impl();
  dst.storage = src.storage;
  dst.shape = src.shape;
  dst.strides = src.strides;
  dst.offset = src.offset;
  dst.dtype = src.dtype;
  dst.is_view = src.is_view;
}

// Applies `convert` to every parameter and buffer accepted by `applies`, and to its grad.
static void convert_all(NamedTensors tensors, const std::function<bool(const Tensor&)>& applies,
                        const std::function<Tensor(const Tensor&)>& convert) {
  NoGradGuard no_grad;
  for (auto& [name, t] : tensors) {
    if (!applies(t)) continue;
    Tensor grad = t.grad();
    set_data(t, convert(t.detach()));
    if (grad.defined()) t.set_grad(convert(grad));
  }
}

void Module::to(DType dtype) {
  AMPGRAD_CHECK(!is_storage_only(dtype), "Module::to: " << dtype_name(dtype) << " holds no parameters (" << storage_only_note(dtype) << ")");
  AMPGRAD_CHECK(is_floating_point(dtype), "Module::to only accepts floating point dtypes, but got desired dtype=" << dtype_name(dtype));
  convert_all(collect(true, true), [&](const Tensor& t) { return t.is_floating_point() && t.dtype() != dtype; },
              [&](const Tensor& t) { return t.to(dtype); });
}

void Module::to(Device device) {
  convert_all(collect(true, true), [&](const Tensor& t) { return t.device() != device; }, [&](const Tensor& t) { return t.to(device); });
}

StateDict Module::state_dict() const {
  StateDict out = collect(true, true);
  for (auto& [name, t] : out) t = t.detach();
  return out;
}

void Module::load_state_dict(const StateDict& dict) {
  NamedTensors own = collect(true, true);
  std::map<std::string, Tensor> given(dict.begin(), dict.end());
  std::set<std::string> known;
  std::string problems;  // every problem, so one failed load shows the whole mismatch
  for (const auto& [name, t] : own) {
    known.insert(name);
    auto it = given.find(name);
    if (it == given.end()) problems += "\n  missing key '" + name + "'";
    else if (it->second.shape() != t.shape())
      problems += "\n  size mismatch for '" + name + "': the state_dict has " + shape_str(it->second.shape()) + ", the model " + shape_str(t.shape());
  }
  for (const auto& [name, t] : dict)
    if (!known.count(name)) problems += "\n  unexpected key '" + name + "'";
  AMPGRAD_CHECK(problems.empty(), "load_state_dict: the state dict does not match the module:" << problems);

  NoGradGuard no_grad;  // copy_ into parameters is an update the graph must not see
  for (auto& [name, t] : own) t.copy_(given.at(name));
}

}  // namespace ampgrad::nn
