// float8.cpp — to_float8's two passes over a tensor (autograd/float8.h), the primitives abs_max
// and scaled_cast: its largest magnitude, then the scaled, saturating cast into a float8 type.
// The per-element rules are tensor/float8.h's, which the CUDA kernels run too; composed of ops,
// the same narrowing took five passes and four temporaries.
#include <algorithm>
#include <cstring>
#include <vector>

#include "tensor/cpu/half_convert.h"
#include "tensor/cpu/loops.h"
#include "tensor/float8.h"
#include "tensor/kernels.h"

namespace ampgrad::cpu {
using namespace ampgrad::kernels;

// f(values, i, m) over x[begin, end) in float32 runs, values[k] being x[i + k]: a float32 x in
// place; a 16-bit one widened a tile at a time by half_convert.h's vectorised conversion (a
// tile stays in L1), float64 rounded likewise. Both loops below then vectorise over floats.
template <class T, class F> static void float_runs(const T* x, int64_t begin, int64_t end, F f) {
  if constexpr (std::is_same_v<T, float>) {
    f(x + begin, begin, end - begin);
  } else {
    constexpr int64_t kTile = 512;
    float tile[kTile];
    for (int64_t i = begin; i < end; i += kTile) {
      const int64_t m = std::min(kTile, end - i);
      if constexpr (std::is_same_v<T, double>) std::copy(x + i, x + i + m, tile);
      else convert_contiguous(tile, x + i, m);
      f(tile, i, m);
    }
  }
}

Tensor abs_max(const Tensor& x_in) {
  const Tensor x = contiguous_copy(x_in);
  // A max is exact in any order: each block's on whichever thread, then the blocks'.
  constexpr int64_t kBlock = 4096;
  const int64_t n = x.numel(), blocks = (n + kBlock - 1) / kBlock;
  std::vector<uint32_t> block_max(blocks, 0);
  dispatch_floating("abs_max", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = (const T*)x.raw_data();
    parallel_for(blocks, kBlock, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        uint32_t m = 0;
        float_runs(p, b * kBlock, std::min(n, (b + 1) * kBlock), [&](const float* v, int64_t, int64_t len) {
          uint32_t run = 0;  // a local, which the compiler keeps in registers: the loop vectorises
          for (int64_t k = 0; k < len; ++k) run = std::max(run, abs_bits(v[k]));
          m = std::max(m, run);
        });
        block_max[b] = m;
      }
    });
  });
  uint32_t m = 0;
  for (uint32_t b : block_max) m = std::max(m, b);
  Tensor out = empty({}, kFloat32);
  std::memcpy(out.raw_data(), &m, sizeof m);  // the bits of |x| are those of the float32 value
  return out;
}

Tensor scaled_cast(const Tensor& x_in, const Tensor& scale, DType float8_dtype) {
  const Tensor x = contiguous_copy(x_in);
  Tensor out = empty(x.shape(), float8_dtype);
  const float s = *scale.data_ptr<float>();
  dispatch_floating("to_float8", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = (const T*)x.raw_data();
    dispatch_with_storage(float8_dtype, [&](auto ftag) {
      using F8 = typename decltype(ftag)::type;
      if constexpr (std::is_same_v<F8, float8_e4m3fn> || std::is_same_v<F8, float8_e5m2>) {
        F8* o = (F8*)out.raw_data();
        parallel_for(x.numel(), 1, [&](int64_t begin, int64_t end) {
          float_runs(p, begin, end, [&](const float* v, int64_t i, int64_t len) {
            for (int64_t k = 0; k < len; ++k) o[i + k] = ampgrad::scale_to_float8<F8>(v[k], s);
          });
        });
      }
    });
  });
  return out;
}

}  // namespace ampgrad::cpu
