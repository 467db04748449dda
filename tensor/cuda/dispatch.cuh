// dispatch.cuh — dtypes on the device: DType -> C++ type, the "opmath" type arithmetic runs in,
// and the one conversion every store goes through. The device twin of tensor/dtype.h's
// dispatch and opmath_t; it leaves out names, sizes and promotion (host matters, in dtype.h).
//
//   dispatch(dtype, [&](auto tag) { using T = typename decltype(tag)::type; my_kernel<T><<<...>>>(...); });
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "tensor/cuda/runtime.h"
#include "tensor/dtype_enum.h"
#include "tensor/float8.h"
#include "tensor/scalar_math.h"

namespace ampgrad::cuda {

template <class T> struct type_tag { using type = T; };

// Calls f(type_tag<T>{}) with the device type of `t`: __half and __nv_bfloat16 hold the same
// bits as Eigen::half and Eigen::bfloat16, so a tensor's bytes are read as these unchanged.
template <class F> void dispatch(DType t, F&& f) {
  switch (t) {
    case DType::Float32: return f(type_tag<float>{});
    case DType::Float64: return f(type_tag<double>{});
    case DType::Float16: return f(type_tag<__half>{});
    case DType::BFloat16: return f(type_tag<__nv_bfloat16>{});
    case DType::Int64: return f(type_tag<int64_t>{});
    case DType::Bool: return f(type_tag<bool>{});
    case DType::Float8_e4m3fn:
    case DType::Float8_e5m2: break;
  }
  refuse_storage_only(t);
}

// Same, with the storage-only (float8) types too: for the copy and fill kernels, which hold
// their values without computing on them.
template <class F> void dispatch_with_storage(DType t, F&& f) {
  if (t == DType::Float8_e4m3fn) return f(type_tag<float8_e4m3fn>{});
  if (t == DType::Float8_e5m2) return f(type_tag<float8_e5m2>{});
  dispatch(t, std::forward<F>(f));
}

// Floating types only, for kernels the C++ side has already refused other dtypes
// (require_floating), so nothing else is compiled for them.
template <class F> void dispatch_floating(DType t, F&& f) {
  switch (t) {
    case DType::Float64: return f(type_tag<double>{});
    case DType::Float16: return f(type_tag<__half>{});
    case DType::BFloat16: return f(type_tag<__nv_bfloat16>{});
    default: return f(type_tag<float>{});
  }
}

// "opmath": half types compute in float32; bool computes as int64, as on the CPU.
template <class T> struct opmath { using type = T; };
template <> struct opmath<__half> { using type = float; };
template <> struct opmath<__nv_bfloat16> { using type = float; };
template <> struct opmath<bool> { using type = int64_t; };
template <> struct opmath<float8_e4m3fn> { using type = float; };
template <> struct opmath<float8_e5m2> { using type = float; };
template <class T> using opmath_t = typename opmath<T>::type;

// The store conversion. Half types round once, to nearest even, from float — also from double
// and int64, which go through float first exactly as Eigen::half(x) does on the CPU, so both
// backends produce the same bits. A NaN becomes the sign plus the quiet NaN the CPU writes
// (0x7E00 / 0x7FC0) where CUDA's intrinsics would give 0x7FFF. Everything else is a plain C++
// conversion (the float8 types' is tensor/float8.h's, the CPU's own).
template <class T, class A> __host__ __device__ inline T cast(A a) {
  if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
    const float f = static_cast<float>(a);
    if (f != f) {
      unsigned int bits;
      memcpy(&bits, &f, sizeof bits);
      const unsigned short sign = (bits >> 16) & 0x8000;
      if constexpr (std::is_same_v<T, __half>) return __ushort_as_half(sign | 0x7E00);
      else return __ushort_as_bfloat16(sign | 0x7FC0);
    }
    if constexpr (std::is_same_v<T, __half>) return __float2half_rn(f);
    else return __float2bfloat16_rn(f);
  } else if constexpr (std::is_same_v<T, int64_t> && std::is_floating_point_v<A>) {
    return math::to_int64(a);  // NaN and out-of-range as the CPU casts them
  } else {
    return static_cast<T>(a);
  }
}

// The load conversion: a stored element into its opmath type (half -> float is exact), bit for
// bit as the CPU widens it. A bfloat16 is the top half of a float: a shift, written out because
// sm_90 converts with cvt.f32.bf16, whose NaNs are not specified to keep their bits. A float16
// NaN keeps its sign and payload and comes out quiet, as the CPU's F16C gives it (CUDA's own
// conversion gives one positive NaN, 0x7FFFFFFF).
__host__ __device__ inline float bits_to_float(unsigned int f) {
  float out;
  memcpy(&out, &f, sizeof out);
  return out;
}
template <class T> __host__ __device__ inline opmath_t<T> load(T v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return bits_to_float((unsigned int)__bfloat16_as_ushort(v) << 16);
  } else if constexpr (std::is_same_v<T, __half>) {
    const unsigned short b = __half_as_ushort(v);
    if ((b & 0x7C00) == 0x7C00 && (b & 0x03FF) != 0)
      return bits_to_float((unsigned int)(b & 0x8000) << 16 | 0x7FC00000u | (unsigned int)(b & 0x03FF) << 13);
    return __half2float(v);
  } else {
    return static_cast<opmath_t<T>>(v);
  }
}

}  // namespace ampgrad::cuda
