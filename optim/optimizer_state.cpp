// optimizer_state.cpp — Optimizer::state_dict and load_state_dict: the groups' options and lrs
// and each parameter's step count and buffers, as PyTorch's state_dict lays them out
// (optimizer.h), loaded strictly: a wrong, missing or unexpected key is an Error naming it, and
// the optimizer is left as it was.
#include <algorithm>
#include <optional>

#include "optim/optimizer.h"
#include "tensor/checked_int.h"

namespace ampgrad::optim {

static std::string group_prefix(size_t g) { return "param_groups." + std::to_string(g) + "."; }

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  for (size_t g = 0; g < num_param_groups(); ++g) {
    for (const auto& [key, value] : options_state(g)) out.scalars[group_prefix(g) + key] = value;
    out.scalars[group_prefix(g) + "lr"] = lrs_[g];
    out.scalars[group_prefix(g) + "num_params"] = double(param_group(g).size());
  }
  for (size_t i = 0; i < state_.size(); ++i) {
    // A host read per parameter on a GPU: fine for a saved state. A count of 0 is a state whose
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
