// optimizer.cpp — the base: checked access to float32 parameter data, zero_grad, and the
// (de)serialisation of per-parameter state.
#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace ampgrad::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), state_(params_.size()), lr_(lr) {
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

// Raw float32 access for the CPU loop. The optimizer updates float32 master weights; under
// AMP only the autocast copies are 16-bit, so another dtype here is a mistake worth stopping.
static float* float32_data(const char* optimizer, const char* what, size_t i, const Tensor& t) {
  AMPGRAD_CHECK(t.dtype() == kFloat32, optimizer << ": " << what << " " << i << " is " << dtype_name(t.dtype())
                                                 << "; optimizers update float32 master weights (keep the model in float32 and use autocast)");
  AMPGRAD_CHECK(t.is_contiguous(), optimizer << ": " << what << " " << i << " is not contiguous");
  AMPGRAD_CHECK(t.device().is_cpu(), optimizer << ": " << what << " " << i << " is on " << t.device().str()
                                               << "; only the CPU update loop is built (optim/update.h holds the math a device kernel shares)");
  return t.data_ptr<float>();
}

void Optimizer::for_each_param(const char* optimizer, const UpdateFn& update) {
  const std::vector<std::string> names = buffer_names();
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    Tensor g = p.grad().contiguous();
    float* pd = float32_data(optimizer, "parameter", i, p);
    const float* gd = float32_data(optimizer, "gradient of parameter", i, g);
    ParamState& st = state_[i];
    if (st.step == 0)
      for (const std::string& name : names) st.buffers[name] = zeros(p.shape(), TensorOptions(kFloat32).device(p.device()));
    ++st.step;
    update(pd, gd, p.numel(), st);
  }
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  out.scalars["lr"] = lr_;
  for (size_t i = 0; i < state_.size(); ++i) {
    if (state_[i].step == 0) continue;
    const std::string prefix = "state." + std::to_string(i) + ".";
    out.scalars[prefix + "step"] = double(state_[i].step);
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
  const std::vector<std::string> names = buffer_names();
  auto unexpected = [](const std::string& key) { return "Optimizer::load_state_dict: unexpected key '" + key + "'"; };
  std::vector<ParamState> state(params_.size());

  AMPGRAD_CHECK(in.scalars.count("lr"), "Optimizer::load_state_dict: missing key 'lr'");
  for (const auto& [key, value] : in.scalars) {
    if (key == "lr") continue;
    auto parsed = parse_state_key(key, params_.size());
    AMPGRAD_CHECK(parsed && parsed->second == "step", unexpected(key));
    AMPGRAD_CHECK(value >= 1 && value == std::floor(value), "Optimizer::load_state_dict: '" << key << "' must be a count >= 1, got " << value);
    state[parsed->first].step = int64_t(value);
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
    AMPGRAD_CHECK(state[i].step > 0 || state[i].buffers.empty(), "Optimizer::load_state_dict: missing key '" << prefix << "step'");
    for (const std::string& name : names)
      AMPGRAD_CHECK(state[i].step == 0 || state[i].buffers.count(name), "Optimizer::load_state_dict: missing key '" << prefix << name << "'");
  }
  state_ = std::move(state);
  lr_ = in.scalars.at("lr");
}

}  // namespace ampgrad::optim
