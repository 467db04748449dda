// op_support.h — what every op file of autograd/ uses: the three steps of an op (autocast,
// kernel, record) and their names, brought into namespace ampgrad. Included by autograd/*.cpp
// only; the public API is autograd/ops.h.
#pragma once
#include "autograd/autocast.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"

namespace ampgrad {
using amp::Op;
using autograd::autocast;
using autograd::grads;
using autograd::Needs;
using autograd::record;
}  // namespace ampgrad
