// adam.cpp — Adam/AdamW's option checks and their saved state form, the CPU loop over
// adam_update (update.h) with the bias corrections of each parameter's step worked out in double
// first (adam_scalars), and the fused CUDA launch (fused.cu), which does the same per parameter
// with the step count it reads there.
#include "optim/adam.h"

namespace ampgrad::optim {

static void check_options(const char* optimizer, const AdamOptions& o) {  // optimizer: "Adam" or "AdamW"
  const auto [b1, b2] = o.betas;
  AMPGRAD_CHECK(o.lr >= 0 && o.eps >= 0 && o.weight_decay >= 0,
                optimizer << ": lr, eps and weight_decay must be >= 0, got " << o.lr << ", " << o.eps << ", " << o.weight_decay);
  AMPGRAD_CHECK(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1, optimizer << ": betas must be in [0, 1), got (" << b1 << ", " << b2 << ")");
}

Adam::Adam(std::vector<ParamGroup<AdamOptions>> groups, bool decoupled)
    : Optimizer(decoupled ? "AdamW" : "Adam"), decoupled_(decoupled) {
  for (const ParamGroup<AdamOptions>& g : groups) add_param_group(g);
  require_params();
}

void Adam::add_param_group(const ParamGroup<AdamOptions>& group) {
  check_options(name(), group.options);
  add_group(group.params, group.options.lr);
  options_.push_back(group.options);
}

std::vector<ParamGroup<AdamOptions>> AdamW::as_adam(const std::vector<ParamGroup<AdamWOptions>>& groups) {
  std::vector<ParamGroup<AdamOptions>> out;
  for (const auto& [params, o] : groups) out.push_back({params, {o.lr, o.betas, o.eps, o.weight_decay}});
  return out;
}

std::map<std::string, double> Adam::options_state(size_t group) const {
  const AdamOptions& o = options_[group];
  return {{"beta1", o.betas.first}, {"beta2", o.betas.second}, {"eps", o.eps}, {"weight_decay", o.weight_decay}};
}

void Adam::load_options(size_t group, const std::map<std::string, double>& m) {
  AdamOptions o = options_[group];
  o.betas = {m.at("beta1"), m.at("beta2")};
  o.eps = m.at("eps");
  o.weight_decay = m.at("weight_decay");
  check_options(name(), o);
  options_[group] = o;
}

AdamHyperparams Adam::hyperparams(size_t group) const {
  const AdamOptions& o = options_[group];
  return {lr(group), o.betas.first, o.betas.second, o.eps, o.weight_decay, decoupled_};
}

void Adam::update_cpu(size_t group, float* p, const float* g, int64_t begin, int64_t end, int64_t step, ParamState& st) {
  const AdamScalars s = adam_scalars(hyperparams(group), step);
  float* m = st.buffers.at("exp_avg").data_ptr<float>();
  float* v = st.buffers.at("exp_avg_sq").data_ptr<float>();
  for (int64_t i = begin; i < end; ++i) adam_update(p[i], g[i], m[i], v[i], s);
}

#ifdef AMPGRAD_WITH_CUDA
void Adam::update_cuda(size_t group, const std::vector<FusedParam>& params, const float* found_inf) {
  cuda::fused_adam_(params, hyperparams(group), found_inf);
}
#endif

}  // namespace ampgrad::optim
