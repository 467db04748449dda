// dtype_enum.h — the DType enum alone, with no Eigen: CUDA sources (nvcc) include this, and
// meet the half types as __half / __nv_bfloat16, which share Eigen::half's and
// Eigen::bfloat16's bits. Everything else about dtypes is in dtype.h.
#pragma once
#include <cstdint>

namespace ampgrad {

// The six compute dtypes, then the two float8 storage dtypes (tensor/float8.h, the FP8 edge).
enum class DType : uint8_t { Float32, Float64, Float16, BFloat16, Int64, Bool, Float8_e4m3fn, Float8_e5m2 };
inline constexpr DType kFloat32 = DType::Float32, kFloat64 = DType::Float64,
                       kFloat16 = DType::Float16, kBFloat16 = DType::BFloat16,
                       kInt64 = DType::Int64, kBool = DType::Bool,
                       kFloat8_e4m3fn = DType::Float8_e4m3fn, kFloat8_e5m2 = DType::Float8_e5m2;
inline constexpr bool is_float8(DType t) { return t == DType::Float8_e4m3fn || t == DType::Float8_e5m2; }

// A storage-only dtype holds values that are copied, converted and viewed, never computed on
// (the float8 types: data for a scaled GEMM). The core refuses one by this property alone: no
// compute kernel, promotion, gradient or autocast cast takes it.
inline constexpr bool is_storage_only(DType t) { return is_float8(t); }

// The error for a storage-only tensor reaching a compute kernel's dispatch. tensor/kernels.cpp
// refuses one earlier, naming the op; this is the backstop, on both backends.
[[noreturn]] void refuse_storage_only(DType t);

}  // namespace ampgrad
