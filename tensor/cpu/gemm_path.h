// gemm_path.h — which path a 16-bit GEMM takes on this CPU, and the line a 16-bit run prints to
// say so. The rule is from the CPU's features, not timed, so a rerun takes the same path and
// gives the same bits: bfloat16 goes to oneDNN (onednn/bf16_gemm.h) on AMX tiles, and on AMD's
// AVX512-BF16 (Zen 4 and 5), where its dot products beat float32's FMA; on Intel's AVX512-BF16
// without AMX they run at about half float32's rate (docs/results.md), so there, and on CPUs
// without the instruction, the operands are widened to float32 (matmul.cpp). float16 is always
// widened: no kernel here multiplies float16 natively.
#pragma once
#include <string>

#include "tensor/dtype.h"

namespace ampgrad::cpu {

enum class Bf16Path { amx, dot_product, widened };
struct CpuFeatures {
  bool amx = false;          // AMX-BF16 tiles the OS lets this process use
  bool avx512_bf16 = false;  // vdpbf16ps
  bool amd = false;
};
constexpr Bf16Path bf16_path(CpuFeatures f) {
  return f.amx ? Bf16Path::amx : f.avx512_bf16 && f.amd ? Bf16Path::dot_product : Bf16Path::widened;
}

// One line for the start of a run under autocast to `dtype` on the CPU: the path its GEMMs take
// here and what to expect of its speed, e.g. "bf16 GEMMs on AMX tiles through oneDNN ...".
std::string gemm_path_note(DType dtype);

}  // namespace ampgrad::cpu
