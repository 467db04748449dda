// optimizer.cpp — the base: the parameter groups and their lrs, zero_grad, the bookkeeping of a
// step (checks, state creation, step counts, the found_inf flag, then the CPU loop or a fused
// CUDA launch per group), and the (de)serialisation of the groups and the per-parameter state.
#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <optional>

#include "tensor/checked_int.h"
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
void Optimizer::set_lr(size_t group, double lr) { lrs_[check_group(group)] = lr; }

void Optimizer::set_lr(double lr) { std::fill(lrs_.begin(), lrs_.end(), lr); }

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

static std::string group_prefix(size_t g) { return "param_groups." + std::to_string(g) + "."; }

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  for (size_t g = 0; g < num_param_groups(); ++g) {
    for (const auto& [key, value] : options_state(g)) out.scalars[group_prefix(g) + key] = value;
    out.scalars[group_prefix(g) + "lr"] = lrs_[g];
    out.scalars[group_prefix(g) + "num_params"] = double(param_group(g).size());
  }
  for (size_t i = 0; i < state_.size(); ++i) {
    // A host read per parameter on a GPU: fine for a checkpoint. A count of 0 is a state whose
    // first step the GradScaler skipped, the same as no state.
    const int64_t step = state_[i].step.defined() ? state_[i].step.item<int64_t>() : 0;
    if (step == 0) continue;
    const std::string prefix = "state." + std::to_string(i) + ".";
    out.scalars[prefix + "step"] = double(step);
    for (const auto& [name, buf] : state_[i].buffers) out.tensors.emplace_back(prefix + name, buf);
  }
  return out;
}

// "<head><i>.<field>" (head "state." or "param_groups.") -> (i, field), for i < count; nullopt otherwise.
static std::optional<std::pair<size_t, std::string>> parse_indexed_key(const std::string& key, const std::string& head, size_t count) {
  if (key.rfind(head, 0) != 0) return std::nullopt;
  const size_t dot = key.find('.', head.size());
  if (dot == std::string::npos || dot == head.size()) return std::nullopt;
  const std::string index = key.substr(head.size(), dot - head.size());
  if (!std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; }) || index.size() > 9) return std::nullopt;
  const size_t i = std::stoul(index);
  if (i >= count) return std::nullopt;
  return std::make_pair(i, key.substr(dot + 1));
}

// A one-group state from before parameter groups: its "lr" and options had no prefix and its
// group size went unrecorded.
static OptimizerState with_group_keys(const OptimizerState& in, size_t num_params) {
  OptimizerState out = {{}, in.tensors};
  for (const auto& [key, value] : in.scalars) out.scalars[key.rfind("state.", 0) == 0 ? key : group_prefix(0) + key] = value;
  out.scalars[group_prefix(0) + "num_params"] = double(num_params);
  return out;
}

void Optimizer::load_state_dict(const OptimizerState& given) {
  const bool one_group_form = given.scalars.count("lr") > 0;
  AMPGRAD_CHECK(!one_group_form || num_param_groups() == 1, "Optimizer::load_state_dict: the state is of the form from before parameter "
                                                            "groups ('lr' without 'param_groups.'), which holds one group; this optimizer has "
                                                                << num_param_groups());
  const OptimizerState in = one_group_form ? with_group_keys(given, params_.size()) : given;
  // The groups must match one for one, as in PyTorch: the state numbers the parameters in order.
  size_t groups_in_state = 0;
  for (const auto& [key, value] : in.scalars)
    if (auto parsed = parse_indexed_key(key, "param_groups.", SIZE_MAX); parsed && parsed->second == "num_params") ++groups_in_state;
  AMPGRAD_CHECK(groups_in_state == num_param_groups(), "Optimizer::load_state_dict: the state has " << groups_in_state
                                                        << " parameter groups, this optimizer " << num_param_groups());
  for (size_t g = 0; g < num_param_groups(); ++g) {
    const std::string key = group_prefix(g) + "num_params";
    AMPGRAD_CHECK(in.scalars.count(key), "Optimizer::load_state_dict: missing key '" << key << "'");
    AMPGRAD_CHECK(in.scalars.at(key) == double(param_group(g).size()), "Optimizer::load_state_dict: '" << key << "' is " << in.scalars.at(key)
                                                                       << ", this optimizer's group " << g << " has " << param_group(g).size()
                                                                       << " parameters");
  }
  // The options first: which buffers a state holds may depend on them (SGD's momentum). Should
  // a later check fail, the constructor's come back.
  std::vector<std::map<std::string, double>> previous;
  for (size_t g = 0; g < num_param_groups(); ++g) previous.push_back(options_state(g));
  try {
    for (size_t g = 0; g < num_param_groups(); ++g) {
      std::map<std::string, double> options = previous[g];
      for (auto& [name, value] : options) {
        auto it = in.scalars.find(group_prefix(g) + name);
        AMPGRAD_CHECK(it != in.scalars.end(), "Optimizer::load_state_dict: missing key '" << group_prefix(g) << name << "'");
        value = it->second;
      }
      load_options(g, options);
    }
    load_state(in);
  } catch (...) {
    for (size_t g = 0; g < num_param_groups(); ++g) load_options(g, previous[g]);
    throw;
  }
}

void Optimizer::load_state(const OptimizerState& in) {
  auto unexpected = [](const std::string& key) { return "Optimizer::load_state_dict: unexpected key '" + key + "'"; };
  std::vector<ParamState> state(params_.size());
  std::vector<int64_t> steps(params_.size(), 0);
  std::vector<double> lrs(num_param_groups());

  for (size_t g = 0; g < num_param_groups(); ++g) {
    const std::string key = group_prefix(g) + "lr";
    AMPGRAD_CHECK(in.scalars.count(key), "Optimizer::load_state_dict: missing key '" << key << "'");
    lrs[g] = in.scalars.at(key);
    AMPGRAD_CHECK(lrs[g] >= 0, "Optimizer::load_state_dict: '" << key << "' must be >= 0, got " << lrs[g]);
  }
  for (const auto& [key, value] : in.scalars) {
    if (auto group = parse_indexed_key(key, "param_groups.", num_param_groups())) {
      const auto& [g, field] = *group;
      AMPGRAD_CHECK(field == "lr" || field == "num_params" || options_state(g).count(field), unexpected(key));
      continue;
    }
    auto parsed = parse_indexed_key(key, "state.", params_.size());
    AMPGRAD_CHECK(parsed && parsed->second == "step", unexpected(key));
    steps[parsed->first] = checked_int64(value, "Optimizer::load_state_dict: '" + key + "'", 1);
  }
  for (const auto& [key, t] : in.tensors) {
    auto parsed = parse_indexed_key(key, "state.", params_.size());
    AMPGRAD_CHECK(parsed, unexpected(key));
    const std::vector<std::string> names = buffer_names(group_of(parsed->first));
    AMPGRAD_CHECK(std::count(names.begin(), names.end(), parsed->second), unexpected(key));
    const Tensor& p = params_[parsed->first];
    AMPGRAD_CHECK(t.defined() && t.dtype() == kFloat32 && t.shape() == p.shape(),
                  "Optimizer::load_state_dict: '" << key << "' is " << (t.defined() ? shape_str(t.shape()) + " " + dtype_name(t.dtype()) : "undefined")
                                                  << ", expected " << shape_str(p.shape()) << " float32 to match parameter " << parsed->first);
    Tensor buf = empty(p.shape(), TensorOptions(kFloat32).device(p.device()));
    buf.copy_(t);  // a private copy: step() updates it in place
    state[parsed->first].buffers[parsed->second] = buf;
  }
  // A stepped parameter needs all its buffers; buffers need the step count that goes with them.
  for (size_t i = 0; i < state.size(); ++i) {
    const std::string prefix = "state." + std::to_string(i) + ".";
    AMPGRAD_CHECK(steps[i] > 0 || state[i].buffers.empty(), "Optimizer::load_state_dict: missing key '" << prefix << "step'");
    for (const std::string& name : buffer_names(group_of(i)))
      AMPGRAD_CHECK(steps[i] == 0 || state[i].buffers.count(name), "Optimizer::load_state_dict: missing key '" << prefix << name << "'");
    if (steps[i] > 0) state[i].step = full({}, double(steps[i]), TensorOptions(kInt64).device(params_[i].device()));
  }
  state_ = std::move(state);
  lrs_ = lrs;
}

}  // namespace ampgrad::optim
