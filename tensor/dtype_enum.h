// dtype_enum.h — the DType enum alone, with no Eigen: CUDA sources (nvcc) include this, and
// meet the half types as __half / __nv_bfloat16, which share Eigen::half's and
// Eigen::bfloat16's bits. Everything else about dtypes is in dtype.h.
#pragma once
#include <cstdint>

namespace ampgrad {

enum class DType : uint8_t { Float32, Float64, Float16, BFloat16, Int64, Bool };
inline constexpr DType kFloat32 = DType::Float32, kFloat64 = DType::Float64,
                       kFloat16 = DType::Float16, kBFloat16 = DType::BFloat16,
                       kInt64 = DType::Int64, kBool = DType::Bool;

}  // namespace ampgrad
