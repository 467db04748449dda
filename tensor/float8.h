// float8.h — the two 8-bit floats of FP8 training, as PyTorch's float8_e4m3fn and float8_e5m2,
// written once for both backends. They are storage types: a tensor of them is data for a scaled
// GEMM (autograd/float8.h), converted to float32 to be read. Nothing computes in 8 bits.
//
//               sign  exponent  mantissa  bias   largest finite   smallest subnormal   inf/NaN
//   e4m3fn      1     4         3         7      448              2^-9                 no inf; S.1111.111 is NaN
//   e5m2        1     5         2         15     57344            2^-16                as IEEE: exponent 11111
//
// e4m3fn spends the all-ones exponent on numbers ("fn": finite, NaN only), which buys one more
// binade; e5m2 is float16 with the low 8 bits cut off, so it keeps float16's range and its inf.
//
// Narrowing rounds to nearest, ties to even, as PyTorch's c10::Float8 conversions: a value whose
// rounding passes the largest finite becomes NaN (e4m3fn, which has no inf) or inf (e5m2), and
// NaN stays NaN. The saturating cast FP8 training wants (clamp first) is to_float8's (autograd/float8.h).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "tensor/host_device.h"

namespace ampgrad {

namespace float8_detail {
AMPGRAD_HD inline uint32_t bits_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
AMPGRAD_HD inline float float_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

// E exponent bits, M mantissa bits; has_inf: IEEE's all-ones exponent (e5m2), else fn (e4m3fn).
template <int E, int M, bool has_inf> struct Format {
  static constexpr int bias = (1 << (E - 1)) - 1;
  static constexpr uint8_t nan = 0x7F;                             // e5m2: 0.11111.11; e4m3fn: 0.1111.111
  static constexpr uint8_t overflow = has_inf ? 0x7C : 0x7F;      // inf, or NaN where there is no inf
  static constexpr uint8_t max_code = has_inf ? 0x7B : 0x7E;      // the largest finite
  static constexpr uint32_t min_normal_bits = uint32_t(127 - bias + 1) << 23;  // 2^(1-bias) as float32 bits
  static constexpr float max_finite = float((1 << M) + (max_code & ((1 << M) - 1))) * float(1 << ((max_code >> M) - bias)) / float(1 << M);

  AMPGRAD_HD static float decode(uint8_t c) {
    const uint32_t sign = uint32_t(c & 0x80) << 24;
    const uint32_t exp = (c >> M) & ((1u << E) - 1), mant = c & ((1u << M) - 1);
    if (has_inf ? exp == (1u << E) - 1 : (c & 0x7F) == 0x7F)
      return float_of(sign | (has_inf && mant == 0 ? 0x7F800000u : 0x7FC00000u));
    if (exp == 0) {  // subnormal: mant · 2^(1 - bias - M), exact in float32
      const float v = float(mant) * float_of(uint32_t(127 + 1 - bias - M) << 23);
      return float_of(sign | bits_of(v));
    }
    return float_of(sign | (exp - bias + 127) << 23 | mant << (23 - M));
  }

  // Every case is computed and one is picked, with no branch, so a loop of these vectorises.
  AMPGRAD_HD static uint8_t encode(float f) {
    const uint32_t all = bits_of(f), u = all & 0x7FFFFFFFu;
    const uint8_t sign = uint8_t((all >> 24) & 0x80);
    // Subnormal (or zero): count quanta of 2^(1 - bias - M). The scaling is by a power of two,
    // so exact; rint rounds ties to even. 2^M quanta is the smallest normal, whose code is 2^M.
    // (u is capped there first, so larger values give a small number too, then unused.)
    const float quanta = float_of(u < min_normal_bits ? u : min_normal_bits) * float_of(uint32_t(127 - 1 + bias + M) << 23);
    const uint32_t subnormal = uint32_t(rintf(quanta));
    // Normal: round float32's 23 mantissa bits to M, ties to even; a carry moves into the
    // exponent as it should. Then re-bias the exponent from 127 to bias.
    constexpr int drop = 23 - M;
    const uint32_t rounded = (u + (1u << (drop - 1)) - 1 + ((u >> drop) & 1)) >> drop;
    const uint32_t max_bits = (uint32_t(127 - bias + (max_code >> M)) << M) | (max_code & ((1u << M) - 1));
    const uint32_t normal = rounded > max_bits ? overflow : rounded - (uint32_t(127 - bias) << M);
    return sign | uint8_t(u > 0x7F800000u ? nan : u < min_normal_bits ? subnormal : normal);
  }
};
}  // namespace float8_detail

using Float8E4M3Format = float8_detail::Format<4, 3, false>;
using Float8E5M2Format = float8_detail::Format<5, 2, true>;

// The element types. Conversions are explicit, in and out through float, so no arithmetic
// on them compiles by accident.
template <class Fmt> struct float8_base {
  using format = Fmt;
  uint8_t bits = 0;
  float8_base() = default;
  AMPGRAD_HD explicit float8_base(float f) : bits(Fmt::encode(f)) {}
  AMPGRAD_HD explicit operator float() const { return Fmt::decode(bits); }
  AMPGRAD_HD static float8_base from_bits(uint8_t b) {
    float8_base v;
    v.bits = b;
    return v;
  }
};
using float8_e4m3fn = float8_base<Float8E4M3Format>;
using float8_e5m2 = float8_base<Float8E5M2Format>;

// ---- to_float8's two passes, per element (the abs_max and scaled_cast primitives of both
// backends) ----

// |x| as an unsigned integer. Non-negative floats order as their bits do, and every NaN (its sign
// cleared) lies above +inf, so the integer max of these is the largest magnitude, or a NaN if
// there is one: a max that propagates NaN, exact in any order, with no branch to vectorise.
AMPGRAD_HD inline uint32_t abs_bits(float x) { return float8_detail::bits_of(x) & 0x7FFFFFFFu; }

// The saturating cast: x · scale rounded to float32, clamped to ± F8's largest finite value,
// then rounded to F8. A NaN fails both comparisons and stays NaN; x's own is passed on, so it
// keeps its sign (a product of two NaNs may carry either one's, as the compiler orders them).
template <class F8> AMPGRAD_HD inline F8 scale_to_float8(float x, float scale) {
  constexpr float max = F8::format::max_finite;
  const float v = x * scale;
  return F8(x != x ? x : v < -max ? -max : v > max ? max : v);
}

}  // namespace ampgrad
