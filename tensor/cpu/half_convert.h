// half_convert.h — vectorised float32 <-> float16/bfloat16 conversion of contiguous arrays.
// Every autocast cast and every half GEMM's widening runs through here, so it must be fast
// and bit-identical to the scalar Eigen::half / Eigen::bfloat16 conversions (round to nearest
// even; a test compares them on ties, subnormals, overflow and inf). Eigen 3.4 does not
// vectorise these casts itself.
#pragma once
#include <array>
#include <cfloat>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#if (defined(__F16C__) && defined(__AVX__)) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "tensor/dtype.h"

namespace ampgrad::cpu {

// bfloat16 is the top half of a float32: widening is a shift, narrowing rounds the dropped
// 16 bits to nearest even. Plain integer loops, which the compiler vectorises.
inline void bf16_to_float(float* dst, const bfloat16* src, int64_t n) {
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u = uint32_t(s[i]) << 16;
    std::memcpy(&dst[i], &u, 4);
  }
}
inline void float_to_bf16_loop(uint16_t* d, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &src[i], 4);
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    d[i] = nan ? uint16_t((u & 0x80000000u) ? 0xffc0u : 0x7fc0u) : uint16_t(rounded);  // NaN: a quiet NaN, as Eigen
  }
}
#ifdef __AVX512F__
// AVX512-BF16's vcvtneps2bf16 rounds to nearest even as the loop does, in about half its time, but
// reads a subnormal as zero and keeps a NaN's payload: a chunk holding either takes the loop.
__attribute__((target("avx512bf16,avx512vl"))) inline void float_to_bf16_avx512(uint16_t* d, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(src + i), a = _mm512_abs_ps(v);
    if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) | (_mm512_cmp_ps_mask(a, _mm512_set1_ps(FLT_MIN), _CMP_LT_OQ) &
                                                   _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_NEQ_OQ)))
      float_to_bf16_loop(d + i, src + i, 16);
    else
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
  }
  float_to_bf16_loop(d + i, src + i, n - i);
}
#endif
inline void float_to_bf16(bfloat16* dst, const float* src, int64_t n) {
  uint16_t* d = reinterpret_cast<uint16_t*>(dst);
#ifdef __AVX512F__
  static const bool has_bf16 = __builtin_cpu_supports("avx512bf16");
  if (has_bf16) return float_to_bf16_avx512(d, src, n);
#endif
  float_to_bf16_loop(d, src, n);
}

inline void half_to_float(float* dst, const half* src, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
  for (; i < n; ++i) dst[i] = float(src[i]);
}
inline void float_to_half(half* dst, const float* src, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(src + i);
    // F16C carries a NaN's payload into the half; the scalar conversion (and CUDA's store)
    // writes the sign and one quiet NaN. The rare chunk holding a NaN takes the scalar path.
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
      for (int64_t k = i; k < i + 8; ++k) dst[k] = half(src[k]);
      continue;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
#endif
  for (; i < n; ++i) dst[i] = half(src[i]);
}

// A storage-only type's code (dtype.h) has 256 values: widening looks each up in a table made by
// the type's scalar conversion, so the bits are the same (a scaled GEMM widens its operands here).
template <class D, class S> void widen_by_table(D* dst, const S* src, int64_t n) {
  static_assert(sizeof(S) == 1);
  static const std::array<D, 256> table = [] {
    std::array<D, 256> t;
    for (int c = 0; c < 256; ++c) t[c] = static_cast<D>(static_cast<float>(S::from_bits(uint8_t(c))));
    return t;
  }();
  for (int64_t i = 0; i < n; ++i) dst[i] = table[src[i].bits];
}

// Scratch for widened runs, aligned to the widest vector (64 bytes under AVX-512) as a tensor's
// storage is (allocator.cpp). From malloc it was 16-byte aligned, now and then not 32: a Zen 4
// runs a 512-bit load or store as two 256-bit halves, each then split across cache lines, and a
// 16-bit attention softmax ran up to 1.2x slower, a bfloat16 row sum 1.1x, as the heap placed it.
template <class A> using WidenedBuffer = std::vector<A, Eigen::aligned_allocator<A>>;

// dst[i] = src[i] for contiguous arrays: the four float32 <-> 16-bit pairs above, and a
// storage-only type to any floating compute type.
template <class D, class S>
constexpr bool has_convert_contiguous = (std::is_same_v<D, float> && (std::is_same_v<S, half> || std::is_same_v<S, bfloat16>)) ||
                                        (std::is_same_v<S, float> && (std::is_same_v<D, half> || std::is_same_v<D, bfloat16>)) ||
                                        (is_storage_only_type<S> && std::is_floating_point_v<opmath_t<D>> && !is_storage_only_type<D>);
template <class D, class S> void convert_contiguous(D* dst, const S* src, int64_t n) {
  static_assert(has_convert_contiguous<D, S>);
  if constexpr (is_storage_only_type<S>) widen_by_table(dst, src, n);
  else if constexpr (std::is_same_v<D, float> && std::is_same_v<S, half>) half_to_float(dst, src, n);
  else if constexpr (std::is_same_v<D, half>) float_to_half(dst, src, n);
  else if constexpr (std::is_same_v<D, float>) bf16_to_float(dst, src, n);
  else float_to_bf16(dst, src, n);
}

}  // namespace ampgrad::cpu
