// module.h — Module, the base of every layer: named parameters, buffers and submodules, walked
// recursively with dotted names ("fc1.weight"), train/eval, dtype/device moves and a strict
// state_dict. No layer math here (linear.h, conv.h, ...) and no file format (checkpointing).
//
//   struct Net : nn::Module {
//     std::shared_ptr<nn::Linear> fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 2));
//     Tensor forward(const Tensor& x) override { return fc1->forward(x); }
//   };
//   auto net = std::make_shared<Net>();
//   net->named_parameters();           // {"fc1.weight", (2, 4)}, {"fc1.bias", (2)}
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace ampgrad::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using StateDict = NamedTensors;  // parameters and buffers, in registration order

class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& x) = 0;

  // Registration. The returned handle shares the registered tensor: a layer keeps it as a
  // member (weight, bias) and every later change (to(), load_state_dict) reaches it.
  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor register_buffer(const std::string& name, Tensor t);
  template <class M> std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    check_new_name(name);
    AMPGRAD_CHECK(m, "register_module: '" << name << "' is null");
    children_.emplace_back(name, m);
    return m;
  }

  // Recursive, in registration order: a module's own entries first, then each child's; a tensor
  // shared by two places once, under its first name (state_dict keeps every name).
  std::vector<Tensor> parameters() const;
  NamedTensors named_parameters() const;
  NamedTensors named_buffers() const;
  std::vector<std::shared_ptr<Module>> children() const;  // direct submodules only

  void train(bool on = true);  // recursive
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();  // sets every parameter's grad undefined

  // Converts parameters and buffers (and their grads) where they are. Every handle to a
  // parameter, such as the list an optimizer holds, sees the new dtype/device. to(DType)
  // touches floating tensors only, as in PyTorch: an int64 buffer stays int64.
  void to(DType dtype);
  void to(Device device);

  StateDict state_dict() const;  // parameters and buffers, detached (sharing storage)
  // Copies values into the registered tensors. Strict: any missing key, unexpected key or
  // shape mismatch is an Error naming every offending key, and nothing is copied then.
  void load_state_dict(const StateDict& dict);

 private:
  void check_new_name(const std::string& name) const;
  NamedTensors collect(bool params, bool buffers, const std::string& prefix = "") const;

  NamedTensors params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace ampgrad::nn
