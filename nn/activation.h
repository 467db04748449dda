// activation.h — the parameter-free modules: one per activation of tensor/ops.def (the op that
// names a Module there: ReLU, GELU (exact erf form), SiLU, Tanh, Sigmoid), then Dropout and Flatten.
// Each forwards to the autograd op of its name; Dropout alone reads the train/eval mode.
//
//   auto drop = std::make_shared<nn::Dropout>(0.5);
//   drop->forward(x);        // train mode: about half zeroed, survivors doubled
//   drop->eval();
//   drop->forward(x);        // eval mode: x itself
#pragma once
#include "autograd/ops.h"
#include "nn/module.h"

namespace ampgrad::nn {

// class ReLU : public Module { ... relu(x) ... }, and so on: generated, so an activation is one line of ops.def
#define UNARY(name, cuda, cpu, ...) __VA_OPT__(class __VA_ARGS__ : public Module { \
   public:                                                                         \
    Tensor forward(const Tensor& x) override { return ampgrad::name(x); }          \
  };)
#include "tensor/ops.def"

// Zeroes each element with probability p and scales the rest by 1/(1 − p), in train mode
// only. `gen` (optional, not owned) seeds the masks apart from the default generator.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, Generator* gen = nullptr) : p(p), gen(gen) {
    AMPGRAD_CHECK(p >= 0 && p <= 1, "Dropout: probability must be in [0, 1], got " << p);
  }
  Tensor forward(const Tensor& x) override { return dropout(x, p, is_training(), gen); }

  double p;
  Generator* gen;
};

// (N, C, H, W) -> (N, C·H·W) with the defaults: merges dims start_dim..end_dim.
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) override { return flatten(x, start_dim, end_dim); }

  int64_t start_dim, end_dim;
};

}  // namespace ampgrad::nn
