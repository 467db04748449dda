// init.cpp — the initialisers: each works out a bound from the weight's fans, then fills.
#include "nn/init.h"

#include <cmath>

#include "autograd/grad_mode.h"

namespace ampgrad::nn::init {

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& w) {
  AMPGRAD_CHECK(w.dim() >= 2, "init: fan in and fan out need a weight of >= 2 dims, got shape " << shape_str(w.shape()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < w.dim(); ++d) receptive *= w.size(d);
  return {w.size(1) * receptive, w.size(0) * receptive};
}

Tensor uniform_(Tensor t, double low, double high, Generator* gen) {
  NoGradGuard no_grad;
  return ampgrad::uniform_(t, low, high, gen);
}
Tensor normal_(Tensor t, double mean, double std, Generator* gen) {
  NoGradGuard no_grad;
  return ampgrad::normal_(t, mean, std, gen);
}
Tensor zeros_(Tensor t) {
  NoGradGuard no_grad;
  return t.zero_();
}
Tensor ones_(Tensor t) {
  NoGradGuard no_grad;
  return t.fill_(1.0);
}

Tensor kaiming_uniform_(Tensor t, double a, Generator* gen) {
  const double gain = std::sqrt(2.0 / (1 + a * a));
  const double bound = gain * std::sqrt(3.0 / fan_in_and_fan_out(t).first);
  return init::uniform_(t, -bound, bound, gen);
}

Tensor xavier_uniform_(Tensor t, double gain, Generator* gen) {
  auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  const double bound = gain * std::sqrt(6.0 / double(fan_in + fan_out));
  return init::uniform_(t, -bound, bound, gen);
}

void linear_default_(Tensor weight, Tensor bias, Generator* gen) {
  kaiming_uniform_(weight, std::sqrt(5.0), gen);
  if (!bias.defined()) return;
  const int64_t fan_in = fan_in_and_fan_out(weight).first;
  const double bound = fan_in > 0 ? 1 / std::sqrt(double(fan_in)) : 0;
  init::uniform_(bias, -bound, bound, gen);
}

}  // namespace ampgrad::nn::init
