// backends.h — each backend's copy of the primitive list (tensor/primitives.inc), declared in
// its own namespace. tensor/kernels.cpp dispatches to these on the tensors' device. The cuda::
// ones are declared in every build and defined only in one with CUDA (kernels.cpp's on_device).
#pragma once
#include "tensor/kernels.h"

namespace ampgrad::cpu {
#include "tensor/primitives.inc"
}  // namespace ampgrad::cpu

namespace ampgrad::cuda {
#include "tensor/primitives.inc"
}  // namespace ampgrad::cuda
