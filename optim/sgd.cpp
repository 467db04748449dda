// sgd.cpp — SGD's option checks and their saved state form, its CPU loop over sgd_update
// (update.h) and its fused CUDA launch (fused.cu), which runs the same sgd_update.
#include "optim/sgd.h"

namespace ampgrad::optim {

static void check_options(const SGDOptions& o) {
  AMPGRAD_CHECK(o.lr >= 0 && o.momentum >= 0 && o.weight_decay >= 0,
                "SGD: lr, momentum and weight_decay must be >= 0, got " << o.lr << ", " << o.momentum << ", " << o.weight_decay);
  AMPGRAD_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), "SGD: Nesterov momentum requires momentum > 0 and zero dampening");
}

SGD::SGD(std::vector<ParamGroup<SGDOptions>> groups) : Optimizer("SGD") {
  for (const ParamGroup<SGDOptions>& g : groups) add_param_group(g);
  require_params();
}

void SGD::add_param_group(const ParamGroup<SGDOptions>& group) {
  check_options(group.options);
  add_group(group.params, group.options.lr);
  options_.push_back(group.options);
}

std::map<std::string, double> SGD::options_state(size_t group) const {
  const SGDOptions& o = options_[group];
  return {{"momentum", o.momentum}, {"dampening", o.dampening}, {"weight_decay", o.weight_decay}, {"nesterov", o.nesterov}};
}

void SGD::load_options(size_t group, const std::map<std::string, double>& m) {
  SGDOptions o = options_[group];
  o.momentum = m.at("momentum");
  o.dampening = m.at("dampening");
  o.weight_decay = m.at("weight_decay");
  AMPGRAD_CHECK(m.at("nesterov") == 0 || m.at("nesterov") == 1, "SGD: 'nesterov' must be 0 or 1, got " << m.at("nesterov"));
  o.nesterov = m.at("nesterov") == 1;
  check_options(o);
  options_[group] = o;
}

// The momentum buffer exists only when there is momentum, as in PyTorch.
std::vector<std::string> SGD::buffer_names(size_t group) const {
  if (options_[group].momentum == 0) return {};
  return {"momentum_buffer"};
}

SGDScalars SGD::scalars(size_t group, bool first_step) const {
  const SGDOptions& o = options_[group];
  return {float(lr(group)), float(o.momentum), float(o.dampening), float(o.weight_decay), o.nesterov, first_step};
}

void SGD::update_cpu(size_t group, float* p, const float* g, int64_t begin, int64_t end, int64_t step, ParamState& st) {
  const SGDScalars s = scalars(group, step == 1);
  float* buf = options_[group].momentum == 0 ? nullptr : st.buffers.at("momentum_buffer").data_ptr<float>();
  for (int64_t i = begin; i < end; ++i) sgd_update(p[i], g[i], buf ? buf + i : nullptr, s);
}

#ifdef AMPGRAD_WITH_CUDA
void SGD::update_cuda(size_t group, const std::vector<FusedParam>& params, const float* found_inf) {
  cuda::fused_sgd_(params, scalars(group, false), found_inf);  // first_step: per parameter, on the device
}
#endif

}  // namespace ampgrad::optim
