// training_checkpoint.cpp — the file layout of a training checkpoint, both ways.
#include "training_checkpoint.h"

#include <cstdlib>
#include <iomanip>
#include <sstream>

namespace ampgrad::examples {

std::string exact(double value) {
  std::ostringstream s;
  s << std::setprecision(17) << value;
  return s.str();
}

void save_training_checkpoint(const std::string& path, const nn::Module& model, const optim::Optimizer& opt, const amp::GradScaler& scaler,
                              std::map<std::string, std::string> meta) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [k, t] : model.state_dict()) tensors.emplace_back("model." + k, t);
  const optim::OptimizerState os = opt.state_dict();
  for (auto& [k, t] : os.tensors) tensors.emplace_back("optimizer." + k, t);
  for (auto& [k, v] : os.scalars) meta["optimizer." + k] = exact(v);
  for (auto& [k, v] : scaler.state_dict()) meta["scaler." + k] = exact(v);
  data::save_safetensors(path, tensors, meta);
}

TrainingCheckpoint::TrainingCheckpoint(std::string path) : path_(std::move(path)), file_(data::load_safetensors(path_)) {}

const std::string& TrainingCheckpoint::meta(const std::string& key) const {
  auto it = file_.metadata.find(key);
  AMPGRAD_CHECK(it != file_.metadata.end(), path_ << ": checkpoint metadata has no '" << key << "'");
  return it->second;
}

double TrainingCheckpoint::number(const std::string& key) const {
  const std::string& text = meta(key);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  AMPGRAD_CHECK(!text.empty() && *end == '\0', path_ << ": checkpoint metadata '" << key << "' is '" << text << "', not a number");
  return v;
}

// A key "<prefix>rest" -> "rest"; empty if the key has another prefix.
static std::string after(const std::string& key, const std::string& prefix) {
  return key.rfind(prefix, 0) == 0 ? key.substr(prefix.size()) : std::string();
}

void TrainingCheckpoint::restore(nn::Module& model, optim::Optimizer& opt, amp::GradScaler& scaler, std::ostream& log) const {
  nn::StateDict model_sd;
  optim::OptimizerState os;
  for (auto& [k, t] : file_.tensors) {
    if (std::string name = after(k, "model."); !name.empty()) model_sd.emplace_back(name, t);
    else if (std::string name = after(k, "optimizer."); !name.empty()) os.tensors.emplace_back(name, t);
  }
  std::map<std::string, double> scaler_sd;
  for (auto& [k, v] : file_.metadata) {
    if (std::string name = after(k, "optimizer."); !name.empty()) os.scalars[name] = number(k);
    if (std::string name = after(k, "scaler."); !name.empty()) scaler_sd[name] = number(k);
  }
  model.load_state_dict(model_sd);
  const std::map<std::string, double> given = opt.state_dict().scalars;
  opt.load_state_dict(os);
  for (const auto& [k, v] : opt.state_dict().scalars)
    if (auto it = given.find(k); it != given.end() && it->second != v)
      log << "note: " << path_ << " sets the optimizer's " << k << " to " << v << " (this run's flags gave " << it->second << ")\n";
  if (scaler.is_enabled() && !scaler_sd.empty()) scaler.load_state_dict(scaler_sd);
}

}  // namespace ampgrad::examples
