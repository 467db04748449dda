// update.h — the per-element update rules of SGD and Adam/AdamW, written once as scalar
// functions of float32 values, so the CPU loops (sgd.cpp, adam.cpp) and a CUDA kernel run the
// same arithmetic. The per-step scalars (1 − β, bias corrections) are worked out in double first.
// No loops, tensors or state here.
//
//   for (int64_t i = 0; i < n; ++i) sgd_update(p[i], g[i], &buf[i], s);
#pragma once
#include <cmath>
#include <cstdint>

#include "tensor/host_device.h"

namespace ampgrad::optim {

struct SGDScalars {
  float lr, momentum, dampening, weight_decay;
  bool nesterov;
  bool first_step;  // the momentum buffer starts as the gradient itself
};

// torch.optim.SGD on one element. momentum_buffer is null when momentum == 0.
//   g ← g + wd·p
//   buf ← g on the first step, else momentum·buf + (1 − dampening)·g
//   g ← g + momentum·buf (nesterov) or buf
//   p ← p − lr·g
AMPGRAD_HD inline void sgd_update(float& p, float g, float* momentum_buffer, const SGDScalars& s) {
  g += s.weight_decay * p;
  if (momentum_buffer) {
    float& buf = *momentum_buffer;
    buf = s.first_step ? g : s.momentum * buf + (1 - s.dampening) * g;
    g = s.nesterov ? g + s.momentum * buf : buf;
  }
  p -= s.lr * g;
}

struct AdamScalars {
  float beta1, beta2, eps, weight_decay;
  float one_minus_beta1, one_minus_beta2;  // 1 − β, rounded once: 1 − 0.999f would be 0.00099998713
  bool decoupled;                // AdamW: decay the weight itself, not through the gradient
  float weight_factor;           // AdamW: 1 − lr·wd
  float step_size;               // lr / (1 − β1^t)
  float bias_correction2_sqrt;   // √(1 − β2^t)
};

// Adam's options, and the scalars of its step t (from 1) worked out from them in double and
// rounded once. The CPU loop calls this with the step count it keeps; the CUDA kernel with the
// count it reads on the device (a step the GradScaler skipped does not advance it).
struct AdamHyperparams {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;
};
AMPGRAD_HD inline AdamScalars adam_scalars(const AdamHyperparams& h, int64_t t) {
  return {float(h.beta1), float(h.beta2), float(h.eps), float(h.weight_decay), float(1 - h.beta1), float(1 - h.beta2), h.decoupled,
          float(1 - h.lr * h.weight_decay), float(h.lr / (1 - std::pow(h.beta1, double(t)))),
          float(std::sqrt(1 - std::pow(h.beta2, double(t))))};
}

// torch.optim.Adam / AdamW on one element, at step t (from 1):
//   Adam:  g ← g + wd·p                AdamW:  p ← p·(1 − lr·wd)
//   m ← β1·m + (1 − β1)·g;   v ← β2·v + (1 − β2)·g²
//   p ← p − lr/(1 − β1^t) · m / (√v / √(1 − β2^t) + eps)
AMPGRAD_HD inline void adam_update(float& p, float g, float& m, float& v, const AdamScalars& s) {
  if (s.decoupled) p *= s.weight_factor;
  else g += s.weight_decay * p;
  m = s.beta1 * m + s.one_minus_beta1 * g;
  v = s.beta2 * v + s.one_minus_beta2 * g * g;
  p -= s.step_size * m / (std::sqrt(v) / s.bias_correction2_sqrt + s.eps);
}

}  // namespace ampgrad::optim
