// dtype.cpp — names, sizes and the promotion lattice of the dtypes.
#include "tensor/dtype.h"

#include "tensor/error.h"

namespace ampgrad {

size_t itemsize(DType t) {
  return dispatch_with_storage(t, [](auto tag) { return sizeof(typename decltype(tag)::type); });
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
    case DType::Float8_e4m3fn: return "float8_e4m3fn";
    case DType::Float8_e5m2: return "float8_e5m2";
  }
  return "?";
}

bool is_floating_point(DType t) { return t != DType::Int64 && t != DType::Bool; }
bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

void require_floating(const char* op, DType t) {
  AMPGRAD_CHECK(is_floating_point(t) && !is_storage_only(t), op << ": expected a floating dtype, got " << dtype_name(t));
}

const char* storage_only_note(DType) { return "float8 tensors hold data for scaled_mm"; }

void refuse_storage_only(DType t) {
  throw Error(std::string("a ") + dtype_name(t) + " tensor holds data for scaled_mm; other ops take it converted to a compute dtype (.to(kFloat32))");
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  AMPGRAD_CHECK(!is_storage_only(a) && !is_storage_only(b), "promote_types: promotion of " << dtype_name(a) << " with " << dtype_name(b)
                                                << " is not supported (as in PyTorch, a float8 type promotes with nothing)");
  bool fa = is_floating_point(a), fb = is_floating_point(b);
  if (fa != fb) return fa ? a : b;                  // int + float -> float
  if (!fa) return DType::Int64;                      // bool + int64 -> int64
  if (a == DType::Float64 || b == DType::Float64) return DType::Float64;
  return DType::Float32;                             // f16+f32, bf16+f32, f16+bf16
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace ampgrad
