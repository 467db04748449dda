// policy.h — THE autocast policy table: every op of the library and, per device type, which
// precision it runs in under autocast. It is data, written in tensor/ops.def (one line per op,
// grouped as PyTorch's aten/src/ATen/autocast_mode.cpp groups its lists): autograd/cast.cpp
// reads it at the start of every op call and casts accordingly; print_policy_table() shows it.
//
//   lower_precision  cast floating inputs to the autocast dtype (f16/bf16): GEMM-shaped ops,
//                    where 16-bit inputs with float32 accumulation are fast and safe
//   fp32             cast 16-bit inputs up to float32: exp/log/reductions/losses, where range
//                    or accumulated rounding error would hurt in 16 bits
//   promote          cast all floating inputs to the widest among them (mixed-input ops)
//   input_dtype      run in whatever dtype arrives (elementwise ops, views, pooling)
//
// float64 and integer tensors are never cast, nor tensors on another device type.
#pragma once
#include <array>
#include <cstdint>
#include <iosfwd>

#include "tensor/device.h"

namespace ampgrad::amp {

// Every op of tensor/ops.def, in its order (kernels that only a backward calls have none).
enum class Op : uint8_t {
#define OP(name, cuda, cpu) name,
#include "tensor/ops.def"
  kCount
};
inline constexpr size_t kNumOps = size_t(Op::kCount);

// An op's cast policy on one device type (above); banned: the op refuses to run under autocast
// there (why_banned says why).
enum class CastPolicy : uint8_t { lower_precision, fp32, promote, input_dtype, banned };

// An op's row of the table: its name and its policy on each device type.
struct PolicyRow {
  const char* name;
  CastPolicy cuda, cpu;
};

const PolicyRow& policy_row(Op op);
CastPolicy cast_policy(Op op, DeviceType device);
const char* policy_name(CastPolicy c);
const char* why_banned(Op op);  // the error a banned op raises, and its way out
void print_policy_table(std::ostream& os);

}  // namespace ampgrad::amp
