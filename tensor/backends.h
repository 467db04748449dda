// backends.h — each backend's copy of the primitive list (tensor/primitives.inc), declared in
// its own namespace: cpu::gemm, cuda::gemm, ... tensor/kernels.cpp dispatches to these on the
// tensors' device. The cuda:: ones are declared in every build and defined only in one with
// CUDA (kernels.cpp's on_device).
#pragma once
#include "tensor/kernels.h"

namespace ampgrad::cpu {
#define PRIMITIVE(Result, name, params, args) Result name params;
#include "tensor/primitives.inc"
}  // namespace ampgrad::cpu

namespace ampgrad::cuda {
#define PRIMITIVE(Result, name, params, args) Result name params;
#include "tensor/primitives.inc"
}  // namespace ampgrad::cuda
