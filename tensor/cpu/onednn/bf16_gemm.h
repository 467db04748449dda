// bf16_gemm.h — bfloat16 GEMMs on oneDNN, the library PyTorch's CPU bfloat16 runs on. Built
// when CMake finds oneDNN (AMPGRAD_ONEDNN=AUTO|ON|OFF); tensor/cpu/matmul.cpp calls it first for
// a bfloat16 GEMM and widens the operands to float32 itself when it declines.
#pragma once
#include <string>

#include "tensor/cpu/gemm_path.h"
#include "tensor/tensor.h"

namespace ampgrad::cpu::onednn {

// out = a · b + bias for bfloat16 a (M, K) or (B, M, K), b (K, N) or (B, K, N) and bias (N) or
// undefined, the shapes kernels::gemm checked; out is a new contiguous (M, N) or (B, M, N),
// bfloat16 (rounded once, the bias added before) or float32 (the sums unrounded). Returns false,
// having written nothing, where widening is this CPU's faster path (gemm_path.h) or for a layout
// oneDNN does not take.
bool bf16_gemm(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out);

// The oneDNN kernel a bfloat16 GEMM runs on this CPU ("brg:avx512_core_amx" on AMX), or "" where
// bf16_gemm declines them all; and the path gemm_path.h's rule chose from oneDNN's ISA.
std::string bf16_gemm_kernel();
Bf16Path bf16_gemm_path();

}  // namespace ampgrad::cpu::onednn
