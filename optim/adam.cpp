// adam.cpp — Adam/AdamW's option checks, and the CPU loop over adam_update (update.h) with
// the bias corrections of each parameter's step worked out in double first.
#include "optim/adam.h"

#include <cmath>

#include "optim/update.h"

namespace ampgrad::optim {

Adam::Adam(std::vector<Tensor> params, const AdamOptions& o, bool decoupled)
    : Optimizer(std::move(params), o.lr), options_(o), decoupled_(decoupled) {
  const auto [b1, b2] = o.betas;
  AMPGRAD_CHECK(o.lr >= 0 && o.eps >= 0 && o.weight_decay >= 0, "Adam: lr, eps and weight_decay must be >= 0");
  AMPGRAD_CHECK(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1, "Adam: betas must be in [0, 1), got (" << b1 << ", " << b2 << ")");
}

void Adam::step() {
  const double b1 = options_.betas.first, b2 = options_.betas.second;
  for_each_param(decoupled_ ? "AdamW" : "Adam", [&](float* p, const float* g, int64_t n, ParamState& st) {
    const double t = double(st.step);
    const AdamScalars s{float(lr()), float(b1), float(b2), float(options_.eps), float(options_.weight_decay), decoupled_,
                        float(lr() / (1 - std::pow(b1, t))), float(std::sqrt(1 - std::pow(b2, t)))};
    float* m = st.buffers.at("exp_avg").data_ptr<float>();
    float* v = st.buffers.at("exp_avg_sq").data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) adam_update(p[i], g[i], m[i], v[i], s);
  });
}

}  // namespace ampgrad::optim
