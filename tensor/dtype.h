// dtype.h — the element types, their sizes, PyTorch's promotion rule, and dispatch.
// Half types are Eigen::half / Eigen::bfloat16: the same bits as CUDA's __half and
// __nv_bfloat16, so bytes copy between devices unchanged. The float8 types (tensor/float8.h)
// enter here as storage-only dtypes: their size, name and conversions. No arithmetic lives here.
//
//   DType t = promote_types(kFloat16, kFloat32);          // kFloat32
//   dispatch(t, [&](auto tag) { using T = typename decltype(tag)::type; ... });
#pragma once
#include <Eigen/Core>

#include "tensor/dtype_enum.h"
#include "tensor/float8.h"
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace ampgrad {

using half = Eigen::half;
using bfloat16 = Eigen::bfloat16;

size_t itemsize(DType t);
const char* dtype_name(DType t);  // "float32", "float16", ... as PyTorch prints them
bool is_floating_point(DType t);
bool is_half(DType t);            // float16 or bfloat16: computes in float32, rounds on store

// What a storage-only dtype holds, for the errors that refuse it: "float8 tensors hold data for
// scaled_mm".
const char* storage_only_note(DType t);

// PyTorch's promotion: bool < int64 < floating; among floats the wider wins, and the two
// 16-bit types, which cannot represent each other, meet at float32. A storage-only dtype
// promotes with nothing but itself (an error, as PyTorch's float8).
DType promote_types(DType a, DType b);

template <class T> struct type_tag { using type = T; };

// Calls f(type_tag<T>{}) with the C++ type of `t`, one of the six compute dtypes. Every kernel
// dispatches through here.
template <class F> decltype(auto) dispatch(DType t, F&& f) {
  switch (t) {
    case DType::Float32: return f(type_tag<float>{});
    case DType::Float64: return f(type_tag<double>{});
    case DType::Float16: return f(type_tag<half>{});
    case DType::BFloat16: return f(type_tag<bfloat16>{});
    case DType::Int64: return f(type_tag<int64_t>{});
    case DType::Bool: return f(type_tag<bool>{});
    case DType::Float8_e4m3fn:
    case DType::Float8_e5m2: break;
  }
  refuse_storage_only(t);
}

// Same, with the storage-only types too: for the kernels that hold their values without computing
// on them (copy, which converts into and out of them, and fill), and for itemsize and item().
template <class F> decltype(auto) dispatch_with_storage(DType t, F&& f) {
  if (t == DType::Float8_e4m3fn) return f(type_tag<float8_e4m3fn>{});
  if (t == DType::Float8_e5m2) return f(type_tag<float8_e5m2>{});
  return dispatch(t, std::forward<F>(f));
}

// Same, for floating types only; other dtypes raise an error naming `op`.
void require_floating(const char* op, DType t);
template <class F> decltype(auto) dispatch_floating(const char* op, DType t, F&& f) {
  require_floating(op, t);
  switch (t) {
    case DType::Float64: return f(type_tag<double>{});
    case DType::Float16: return f(type_tag<half>{});
    case DType::BFloat16: return f(type_tag<bfloat16>{});
    default: return f(type_tag<float>{});
  }
}

// "opmath": the type arithmetic is done in. Half types compute in float32.
template <class T> struct opmath { using type = T; };
template <> struct opmath<half> { using type = float; };
template <> struct opmath<bfloat16> { using type = float; };
template <> struct opmath<bool> { using type = int64_t; };
template <> struct opmath<float8_e4m3fn> { using type = float; };
template <> struct opmath<float8_e5m2> { using type = float; };
template <class T> using opmath_t = typename opmath<T>::type;

// The C++ types of the storage-only dtypes: one byte, 256 codes, converted through float.
template <class T> inline constexpr bool is_storage_only_type = std::is_same_v<T, float8_e4m3fn> || std::is_same_v<T, float8_e5m2>;

template <class T> constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return kFloat32;
  else if constexpr (std::is_same_v<T, double>) return kFloat64;
  else if constexpr (std::is_same_v<T, half>) return kFloat16;
  else if constexpr (std::is_same_v<T, bfloat16>) return kBFloat16;
  else if constexpr (std::is_same_v<T, int64_t>) return kInt64;
  else if constexpr (std::is_same_v<T, float8_e4m3fn>) return kFloat8_e4m3fn;
  else if constexpr (std::is_same_v<T, float8_e5m2>) return kFloat8_e5m2;
  else { static_assert(std::is_same_v<T, bool>); return kBool; }
}

}  // namespace ampgrad
