// activation.h — the activation modules: one per op of tensor/ops.def whose line names a Module
// (ReLU, LeakyReLU, GELU (exact erf form), SiLU, Tanh, Sigmoid), then Dropout and Flatten.
// Each forwards to the autograd op of its name with the scalar arguments its line declares,
// given to the constructor in order (the rest keep their defaults) and printed as PyTorch
// prints them; Dropout alone reads the train/eval mode.
//
//   auto act = std::make_shared<nn::LeakyReLU>(0.2);
//   std::cout << *act;       // LeakyReLU(negative_slope=0.2)
//   auto drop = std::make_shared<nn::Dropout>(0.5);
//   drop->forward(x);        // train mode: about half zeroed, survivors doubled
//   drop->eval();
//   drop->forward(x);        // eval mode: x itself
#pragma once
#include <array>
#include <ostream>
#include <tuple>

#include "autograd/ops.h"
#include "nn/module.h"

namespace ampgrad::nn {

// An activation: `op`, an autograd op Tensor(const Tensor&, double...), with one value per scalar
// argument, named as in ops.def (`args`, public like Dropout's p).
struct ArgValue { const char* name; double value; };
template <class Op> class Activation;
template <class... D> class Activation<Tensor(const Tensor&, D...)> : public Module {
 public:
  template <class... V> requires(sizeof...(V) <= sizeof...(D))
  Activation(const char* name, Tensor (*op)(const Tensor&, D...), std::array<ArgValue, sizeof...(D)> args, V... values)
      : name(name), op(op), args(args) {
    size_t i = 0;
    ((this->args[i++].value = double(values)), ...);
  }
  Tensor forward(const Tensor& x) override { return std::apply([&](const auto&... a) { return op(x, a.value...); }, args); }
  friend std::ostream& operator<<(std::ostream& os, const Activation& m) {
    os << m.name << "(";
    for (size_t i = 0; i < m.args.size(); ++i) os << (i ? ", " : "") << m.args[i].name << "=" << m.args[i].value;
    return os << ")";
  }

  const char* name;
  Tensor (*op)(const Tensor&, D...);
  std::array<ArgValue, sizeof...(D)> args;
};

// class LeakyReLU : public Activation<...> { ... its op with negative_slope ... }, and so on:
// generated, so an activation is one line of ops.def
#define ARG(type, name, ...) {#name __VA_OPT__(, __VA_ARGS__)},
#define UNARY(name, cuda, cpu, args, ...) __VA_OPT__(                                                        \
  class __VA_ARGS__ : public Activation<decltype(ampgrad::name)> {                                        \
   public:                                                                                                 \
    template <class... V> explicit __VA_ARGS__(V... values) : Activation(#__VA_ARGS__, ampgrad::name, {{AMPGRAD_ARGS args}}, values...) {} \
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
