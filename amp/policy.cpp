// policy.cpp — the table, built from tensor/ops.def (its one screen of data), and its printing.
// CUDA rows follow PyTorch's CUDA lists (sum/softmax/log_softmax/exp/log/pow/layer_norm/
// group_norm and the losses in fp32); CPU rows follow PyTorch's CPU lists, which keep only the losses in fp32.
#include "amp/policy.h"

#include <iomanip>
#include <ostream>

namespace ampgrad::amp {

// The rows, from tensor/ops.def, by the same expansion as the enum: row i is op i. A policy there
// that is not a CastPolicy fails here, naming its op.
static constexpr std::array<PolicyRow, kNumOps> kTable{{
#define OP(name, cuda, cpu) {#name, CastPolicy::cuda, CastPolicy::cpu},
#include "tensor/ops.def"
}};

const PolicyRow& policy_row(Op op) { return kTable[size_t(op)]; }
CastPolicy cast_policy(Op op, DeviceType d) { return d == DeviceType::CUDA ? policy_row(op).cuda : policy_row(op).cpu; }

const char* policy_name(CastPolicy c) {
  switch (c) {
    case CastPolicy::lower_precision: return "lower_precision";
    case CastPolicy::fp32: return "fp32";
    case CastPolicy::promote: return "promote";
    case CastPolicy::input_dtype: return "input_dtype";
    case CastPolicy::banned: return "banned";
  }
  return "?";
}

// PyTorch's CUDA autocast refuses binary_cross_entropy: its input is usually a sigmoid's output,
// and a 16-bit sigmoid rounds every logit past ~8 (float16) or ~6 (bfloat16) to exactly 1, where a
// log then gives -inf; casting that rounded input up to float32 cannot bring the lost digits back.
const char* why_banned(Op op) {
  if (op == Op::binary_cross_entropy)
    return "binary_cross_entropy is unsafe to autocast: a 16-bit sigmoid before it rounds large logits to exactly 0 or 1. Pass "
           "the logits to binary_cross_entropy_with_logits instead, which autocast runs in float32 (PyTorch refuses it likewise)";
  return "this op is unsafe to autocast";
}

void print_policy_table(std::ostream& os) {
  os << std::left << std::setw(34) << "op" << std::setw(18) << "cuda" << "cpu\n";
  for (const PolicyRow& r : kTable)
    os << std::setw(34) << r.name << std::setw(18) << policy_name(r.cuda) << policy_name(r.cpu) << "\n";
}

}  // namespace ampgrad::amp
