// backends.h — each backend's copy of the primitive list (tensor/primitives.inc), declared in
// its own namespace. tensor/kernels.cpp dispatches to these on the tensors' device.
#pragma once
#include "tensor/kernels.h"

namespace ampgrad::cpu {
#include "tensor/primitives.inc"
}  // namespace ampgrad::cpu

#ifdef AMPGRAD_WITH_CUDA
namespace ampgrad::cuda {
#include "tensor/primitives.inc"
}  // namespace ampgrad::cuda
#endif
