// gemm_operand.h — a matrix as a GEMM library reads it in place: row-major (strides (ld, 1)) or
// column-major (strides (1, ld)), so a transposed view such as Wᵀ needs no copy. Eigen's GEMM
// (matmul.cpp) and oneDNN's (onednn/bf16_gemm.cpp) both take their operands this way.
#pragma once
#include <algorithm>
#include <optional>

#include "tensor/tensor.h"

namespace ampgrad::cpu {

struct Operand {
  const void* data;
  int64_t rows, cols, ld;
  bool row_major;
};

// The (rows, cols) slice `batch` of a (B, rows, cols) or (rows, cols) tensor, if it is row- or
// column-major; nullopt if a GEMM would need a copy. The stride of a dim of size 1 is never
// followed, so such a dim takes the one a contiguous tensor would have.
inline std::optional<Operand> as_operand(const Tensor& t, int64_t batch) {
  const int64_t n = t.dim();
  const int64_t r = t.shape()[n - 2], c = t.shape()[n - 1], sr = t.strides()[n - 2], sc = t.strides()[n - 1];
  const char* base = (const char*)t.raw_data() + (n == 3 ? batch * t.strides()[0] * (int64_t)t.element_size() : 0);
  if (sc == 1 || c == 1) return Operand{base, r, c, r == 1 ? std::max<int64_t>(c, 1) : sr, true};
  if (sr == 1 || r == 1) return Operand{base, r, c, c == 1 ? std::max<int64_t>(r, 1) : sc, false};
  return std::nullopt;
}

}  // namespace ampgrad::cpu
