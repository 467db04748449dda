// optimizer.cpp — the base: zero_grad, the bookkeeping of a step (checks, state creation, step
// counts, the found_inf flag, then the CPU loop or the fused CUDA launch), and the
// (de)serialisation of per-parameter state.
#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>
#ifdef AMPGRAD_WITH_CUDA
#include "tensor/cuda/runtime.h"  // DeviceGuard
#endif

namespace ampgrad::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr, const char* name)
    : params_(std::move(params)), state_(params_.size()), lr_(lr), name_(name) {
  AMPGRAD_CHECK(!params_.empty(), "Optimizer: got an empty parameter list");
  for (size_t i = 0; i < params_.size(); ++i)
    AMPGRAD_CHECK(params_[i].defined() && params_[i].is_leaf(), "Optimizer: parameter " << i << " is undefined or not a leaf tensor");
}

void Optimizer::zero_grad(bool set_to_none) {
  for (Tensor& p : params_) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) p.set_grad(Tensor());
    else g.zero_();
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

  const std::vector<std::string> names = buffer_names();
  for (size_t i : active) {
    ParamState& st = state_[i];
    if (st.step.defined()) continue;
    st.step = zeros({}, TensorOptions(kInt64).device(device));
    for (const std::string& name : names) st.buffers[name] = zeros(params_[i].shape(), TensorOptions(kFloat32).device(device));
  }
#ifdef AMPGRAD_WITH_CUDA
  if (device.is_cuda()) {
    AMPGRAD_CHECK(names.size() <= std::size(FusedParam{}.buffer), name_ << ": the fused CUDA step carries at most 2 buffers per parameter");
    std::vector<FusedParam> fused;
    for (size_t i : active) {
      ParamState& st = state_[i];
      FusedParam f{params_[i].data_ptr<float>(), grads[i].data_ptr<float>(), {nullptr, nullptr}, st.step.data_ptr<int64_t>(), params_[i].numel()};
      for (size_t k = 0; k < names.size(); ++k) f.buffer[k] = st.buffers.at(names[k]).data_ptr<float>();
      fused.push_back(f);
    }
    cuda::DeviceGuard guard(device.index);
    return update_cuda(fused, flag_on_device ? found_inf.data_ptr<float>() : nullptr);
  }
#endif
  for (size_t i : active) {
    ParamState& st = state_[i];
    const int64_t step = ++*st.step.data_ptr<int64_t>();
    update_cpu(params_[i].data_ptr<float>(), grads[i].data_ptr<float>(), params_[i].numel(), step, st);
  }
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState out = {options_state(), {}};
  out.scalars["lr"] = lr_;
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

// "state.<i>.<field>" -> (i, field), for i a valid parameter index; nullopt otherwise.
static std::optional<std::pair<size_t, std::string>> parse_state_key(const std::string& key, size_t num_params) {
  const std::string head = "state.";
  if (key.rfind(head, 0) != 0) return std::nullopt;
  const size_t dot = key.find('.', head.size());
  if (dot == std::string::npos || dot == head.size()) return std::nullopt;
  const std::string index = key.substr(head.size(), dot - head.size());
  if (!std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; }) || index.size() > 9) return std::nullopt;
  const size_t i = std::stoul(index);
  if (i >= num_params) return std::nullopt;
  return std::make_pair(i, key.substr(dot + 1));
}

void Optimizer::load_state_dict(const OptimizerState& in) {
  // The options first: which buffers a state holds may depend on them (SGD's momentum). Should
  // a later check fail, the constructor's come back.
  const std::map<std::string, double> previous = options_state();
  std::map<std::string, double> options = previous;
  for (auto& [key, value] : options) {
    auto it = in.scalars.find(key);
    AMPGRAD_CHECK(it != in.scalars.end(), "Optimizer::load_state_dict: missing key '" << key << "'");
    value = it->second;
  }
  load_options(options);
  try {
    load_state(in);
  } catch (...) {
    load_options(previous);
    throw;
  }
}

void Optimizer::load_state(const OptimizerState& in) {
  const std::vector<std::string> names = buffer_names();
  const std::map<std::string, double> options = options_state();
  auto unexpected = [](const std::string& key) { return "Optimizer::load_state_dict: unexpected key '" + key + "'"; };
  std::vector<ParamState> state(params_.size());
  std::vector<int64_t> steps(params_.size(), 0);

  AMPGRAD_CHECK(in.scalars.count("lr"), "Optimizer::load_state_dict: missing key 'lr'");
  AMPGRAD_CHECK(in.scalars.at("lr") >= 0, "Optimizer::load_state_dict: 'lr' must be >= 0, got " << in.scalars.at("lr"));
  for (const auto& [key, value] : in.scalars) {
    if (key == "lr" || options.count(key)) continue;
    auto parsed = parse_state_key(key, params_.size());
    AMPGRAD_CHECK(parsed && parsed->second == "step", unexpected(key));
    AMPGRAD_CHECK(value >= 1 && value == std::floor(value), "Optimizer::load_state_dict: '" << key << "' must be a count >= 1, got " << value);
    steps[parsed->first] = int64_t(value);
  }
  for (const auto& [key, t] : in.tensors) {
    auto parsed = parse_state_key(key, params_.size());
    AMPGRAD_CHECK(parsed && std::count(names.begin(), names.end(), parsed->second), unexpected(key));
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
    for (const std::string& name : names)
      AMPGRAD_CHECK(steps[i] == 0 || state[i].buffers.count(name), "Optimizer::load_state_dict: missing key '" << prefix << name << "'");
    if (steps[i] > 0) state[i].step = full({}, double(steps[i]), TensorOptions(kInt64).device(params_[i].device()));
  }
  state_ = std::move(state);
  lr_ = in.scalars.at("lr");
}

}  // namespace ampgrad::optim
