// bf16_gemm.h — bfloat16 GEMMs on oneDNN, the library PyTorch's CPU bfloat16 runs on. Built
// when CMake finds oneDNN (AMPGRAD_ONEDNN=AUTO|ON|OFF); tensor/cpu/matmul.cpp calls it first for
// a bfloat16 GEMM and widens the operands to float32 itself when it declines.
#pragma once
#include <string>

#include "tensor/tensor.h"

namespace ampgrad::cpu::onednn {

// out = a · b for bfloat16 a (M, K) or (B, M, K) and b (K, N) or (B, K, N), the shapes kernels::gemm
// checked; out is a new contiguous (M, N) or (B, M, N), bfloat16 or float32 (the sums
// unrounded). Returns false, having written nothing, on a CPU without bfloat16 dot products
// (AVX512-BF16 or AMX), where oneDNN's kernels would emulate them more slowly than widening, or
// for a layout oneDNN does not take.
bool bf16_gemm(const Tensor& a, const Tensor& b, const Tensor& out);

// The oneDNN kernel a bfloat16 GEMM runs on this CPU ("brg:avx512_core_bf16" on AVX512-BF16),
// or "" where bf16_gemm declines them all.
std::string bf16_gemm_kernel();

}  // namespace ampgrad::cpu::onednn
