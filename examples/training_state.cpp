// training_state.cpp — the file layout of a training state, both ways.
#include "training_state.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "tensor/checked_int.h"

namespace ampgrad::examples {

std::string exact(double value) {
  char text[32];  // the shortest round trip of a double is at most 24 characters
  return std::string(text, std::to_chars(text, text + sizeof text, value).ptr);
}

void save_training_state(const std::string& path, const nn::Module& model, const optim::Optimizer& opt, const amp::GradScaler& scaler,
                              const optim::LRScheduler* schedule, std::map<std::string, std::string> meta) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [k, t] : model.state_dict()) tensors.emplace_back("model." + k, t);
  const optim::OptimizerState os = opt.state_dict();
  for (auto& [k, t] : os.tensors) tensors.emplace_back("optimizer." + k, t);
  for (auto& [k, v] : os.scalars) meta["optimizer." + k] = exact(v);
  for (auto& [k, v] : scaler.state_dict()) meta["scaler." + k] = exact(v);
  if (schedule)
    for (auto& [k, v] : schedule->state_dict()) meta["scheduler." + k] = exact(v);
  data::save_safetensors(path, tensors, meta);
}

TrainingState::TrainingState(std::string path) : path_(std::move(path)), file_(data::load_safetensors(path_)) {}

const std::string& TrainingState::meta(const std::string& key) const {
  auto it = file_.metadata.find(key);
  AMPGRAD_CHECK(it != file_.metadata.end(), path_ << ": metadata has no '" << key << "'");
  return it->second;
}

double TrainingState::number(const std::string& key) const {
  const std::string& text = meta(key);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  AMPGRAD_CHECK(!text.empty() && *end == '\0', path_ << ": metadata '" << key << "' is '" << text << "', not a number");
  return v;
}

int64_t TrainingState::integer(const std::string& key, int64_t lo, int64_t hi) const {
  return checked_int64(number(key), path_ + ": metadata '" + key + "'", lo, hi);
}

Generator::State TrainingState::generator(const std::string& key) const {
  try {
    return Generator::State::from_string(meta(key));
  } catch (const Error& e) {
    throw Error(path_ + ": metadata '" + key + "': " + e.what());
  }
}

std::map<std::string, double> TrainingState::numbers_under(const std::string& prefix) const {
  std::map<std::string, double> out;
  for (auto& [k, v] : file_.metadata)
    if (k.rfind(prefix, 0) == 0) out[k.substr(prefix.size())] = number(k);
  return out;
}

void TrainingState::warn_if_changed(const std::map<std::string, std::string>& settings, std::ostream& log) const {
  for (auto& [k, v] : settings)
    if (has(k) && meta(k) != v)
      log << "warning: " << path_ << " was trained with " << k << "=" << meta(k) << ", this run uses " << k << "=" << v
          << ": the run differs from an uninterrupted one\n";
}

// In the log, each value that loading changed and `noted` accepts: "<what><key> to <new> (this
// run's flags gave <old>)".
template <class Noted>
static void note_changes(const std::string& path, const std::string& what, const std::map<std::string, double>& before,
                         const std::map<std::string, double>& after, Noted noted, std::ostream& log) {
  for (const auto& [k, v] : after)
    if (auto it = before.find(k); it != before.end() && it->second != v && noted(k))
      log << "note: " << path << " sets the " << what << k << " to " << v << " (this run's flags gave " << it->second << ")\n";
}

// The first element of a floating tensor that is inf or NaN, or -1.
static int64_t first_non_finite(const Tensor& t) {
  if (!t.is_floating_point()) return -1;
  const std::vector<double> values = to_vector<double>(t.to(kFloat64));
  const auto it = std::find_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); });
  return it == values.end() ? -1 : it - values.begin();
}

// The optimizers' options as their flags bound them (--momentum in [0, 1], ...); every one finite.
static void check_optimizer_options(const std::string& path, const std::map<std::string, double>& scalars) {
  const std::pair<const char*, double> at_most_one[] = {{".momentum", 1}, {".dampening", 1}, {".beta1", 1}, {".beta2", 1}};
  for (const auto& [k, v] : scalars) {
    AMPGRAD_CHECK(std::isfinite(v), path << ": metadata 'optimizer." << k << "' is " << v << ", not a finite number");
    for (const auto& [suffix, hi] : at_most_one)
      if (k.ends_with(suffix) || k == suffix + 1)  // "param_groups.0.momentum", or a one-group file's "momentum"
        AMPGRAD_CHECK(v >= 0 && v <= hi, path << ": metadata 'optimizer." << k << "' is " << v << ", outside [0, " << hi << "]");
  }
}

void TrainingState::restore(nn::Module& model, optim::Optimizer& opt, amp::GradScaler& scaler, optim::LRScheduler* schedule,
                                 std::ostream& log) const {
  nn::StateDict model_sd;
  optim::OptimizerState os = {numbers_under("optimizer."), {}};
  check_optimizer_options(path_, os.scalars);
  std::map<std::string, DType> model_dtypes;
  for (auto& [k, t] : model.state_dict()) model_dtypes[k] = t.dtype();
  for (auto& [k, t] : file_.tensors) {
    const int64_t bad = first_non_finite(t);
    AMPGRAD_CHECK(bad < 0, path_ << ": tensor '" << k << "' holds " << to_vector<double>(t.to(kFloat64))[size_t(bad)] << " at element " << bad
                                 << ": a saved state to resume from must be finite");
    if (k.starts_with("model.")) {
      const auto own = model_dtypes.find(k.substr(6));
      AMPGRAD_CHECK(own == model_dtypes.end() || own->second == t.dtype(),
                    path_ << ": tensor '" << k << "' is " << dtype_name(t.dtype()) << ", the model's is " << dtype_name(own->second));
      model_sd.emplace_back(k.substr(6), t);
    } else {
      AMPGRAD_CHECK(k.starts_with("optimizer."), path_ << ": tensor '" << k << "' is under no key a training state holds (model., optimizer.)");
      os.tensors.emplace_back(k.substr(10), t);
    }
  }
  model.load_state_dict(model_sd);
  const std::map<std::string, double> given = opt.state_dict().scalars;
  opt.load_state_dict(os);
  // With a schedule the live rates are its to set (this fresh run's already scaled by it): its
  // base rates say what the flags asked for, and its epoch count is progress, not a setting.
  auto is_live_lr = [](const std::string& k) { return k.size() > 3 && k.compare(k.size() - 3, 3, ".lr") == 0; };
  note_changes(path_, "optimizer's ", given, opt.state_dict().scalars, [&](const std::string& k) { return !(schedule && is_live_lr(k)); }, log);
  if (schedule) {
    const std::map<std::string, double> given_schedule = schedule->state_dict();
    schedule->load_state_dict(numbers_under("scheduler."));
    note_changes(path_, "schedule's ", given_schedule, schedule->state_dict(), [](const std::string& k) { return k != "last_epoch"; }, log);
  }
  const std::map<std::string, double> scaler_sd = numbers_under("scaler.");
  if (scaler_sd.count("scale")) {
    const float scale = float(scaler_sd.at("scale"));  // what the scaler holds
    AMPGRAD_CHECK(scale > 0 && std::isfinite(scale), path_ << ": metadata 'scaler.scale' is " << scaler_sd.at("scale")
                                                           << ", which is " << scale << " in float32: a loss scale must be > 0 and finite");
  }
  if (scaler.is_enabled() && !scaler_sd.empty()) scaler.load_state_dict(scaler_sd);
  else if (scaler.is_enabled())
    log << "note: " << path_ << " holds no GradScaler state (it was saved without one): this run's scaler starts afresh at scale "
        << scaler.get_scale() << "\n";
  else if (!scaler_sd.empty()) {
    log << "note: " << path_ << " holds a GradScaler state";
    if (scaler_sd.count("scale")) log << " (scale " << scaler_sd.at("scale") << ")";
    log << ", which this run, without a scaler, leaves unused\n";
  }
}

}  // namespace ampgrad::examples
