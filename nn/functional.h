// functional.h — nn::functional: the stateless forms, so a model can write
// nn::functional::cross_entropy(logits, y) as in PyTorch. These are the autograd ops
// themselves (autograd/ops.h), brought in by name; nothing is wrapped or re-implemented. One is
// composed of them: scaled_dot_product_attention (nn/attention.h). The names follow
// torch.nn.functional's: sigmoid or softmax resolve here and in ampgrad:: as in torch and F,
// matmul or cat only in ampgrad::, and scaled_dot_product_attention only here (torch has no
// torch.scaled_dot_product_attention). Every elementwise op of tensor/ops.def (its UNARY and
// BINARY kinds: relu, tanh, add, ...) comes by the ops.def expansion below, so a new one needs no
// line here. tests/test_pytorch_names.cpp checks both lists, test_opinfo.cpp the expansion.
//
//   namespace F = ampgrad::nn::functional;
//   Tensor loss = F::cross_entropy(F::linear(F::relu(x), w, b), y, {.label_smoothing = 0.1});
#pragma once
#include "autograd/ops.h"
#include "nn/attention.h"

namespace ampgrad::nn::functional {

using ampgrad::batch_norm;
using ampgrad::BCEOptions;
using ampgrad::BCEWithLogitsOptions;
using ampgrad::binary_cross_entropy;
using ampgrad::binary_cross_entropy_with_logits;
using ampgrad::conv2d;
using ampgrad::cross_entropy;
using ampgrad::CrossEntropyOptions;
using ampgrad::dropout;
using ampgrad::embedding;
using ampgrad::group_norm;
using ampgrad::layer_norm;
using ampgrad::linear;
using ampgrad::log_softmax;
using ampgrad::max_pool2d;
using ampgrad::mse_loss;
using ampgrad::nll_loss;
using ampgrad::NLLLossOptions;
using ampgrad::Reduction;
using ampgrad::softmax;
// and every elementwise op of tensor/ops.def (relu, tanh, sigmoid, ..., add, eq, ...)
#define UNARY(name, cuda, cpu, ...) using ampgrad::name;
#define BINARY_KERNEL(name, Functor, cuda, cpu) using ampgrad::name;
#include "tensor/ops.def"

}  // namespace ampgrad::nn::functional
