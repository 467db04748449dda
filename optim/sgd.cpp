// sgd.cpp — SGD's option checks and its CPU loop over sgd_update (update.h).
#include "optim/sgd.h"

#include "optim/update.h"

namespace ampgrad::optim {

SGD::SGD(std::vector<Tensor> params, SGDOptions o) : Optimizer(std::move(params), o.lr), options_(o) {
  AMPGRAD_CHECK(o.lr >= 0 && o.momentum >= 0 && o.weight_decay >= 0,
                "SGD: lr, momentum and weight_decay must be >= 0, got " << o.lr << ", " << o.momentum << ", " << o.weight_decay);
  AMPGRAD_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), "SGD: Nesterov momentum requires momentum > 0 and zero dampening");
}

// The momentum buffer exists only when there is momentum, as in PyTorch.
std::vector<std::string> SGD::buffer_names() const {
  if (options_.momentum == 0) return {};
  return {"momentum_buffer"};
}

void SGD::step() {
  const SGDOptions& o = options_;
  for_each_param("SGD", [&](float* p, const float* g, int64_t n, ParamState& st) {
    const SGDScalars s{float(lr()), float(o.momentum), float(o.dampening), float(o.weight_decay), o.nesterov, st.step == 1};
    float* buf = o.momentum == 0 ? nullptr : st.buffers.at("momentum_buffer").data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) sgd_update(p[i], g[i], buf ? buf + i : nullptr, s);
  });
}

}  // namespace ampgrad::optim
