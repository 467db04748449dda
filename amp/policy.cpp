// policy.cpp — the table itself. One row per op; a missing or misplaced row fails to compile.
// CUDA rows follow PyTorch's CUDA lists (sum/softmax/log_softmax/exp/log/pow/layer_norm/
// group_norm and the losses in fp32); CPU rows follow PyTorch's CPU lists, which keep only the losses in fp32.
#include "amp/policy.h"

#include <iomanip>
#include <ostream>

namespace ampgrad::amp {

namespace {
constexpr Cast LP = Cast::lower_precision, F32 = Cast::fp32, PRO = Cast::promote, IN = Cast::input_dtype, BAN = Cast::banned;

constexpr std::array<PolicyRow, kNumOps> kTable{{
    //  op                     name            cuda  cpu
    // lower precision: GEMMs
    {Op::matmul,          "matmul",          LP,  LP},
    {Op::linear,          "linear",          LP,  LP},
    {Op::conv2d,          "conv2d",          LP,  LP},
    // elementwise
    {Op::add,             "add",             IN,  IN},
    {Op::sub,             "sub",             IN,  IN},
    {Op::mul,             "mul",             IN,  IN},
    {Op::div,             "div",             IN,  IN},
    {Op::neg,             "neg",             IN,  IN},
    {Op::pow,             "pow",             F32, IN},
    {Op::exp,             "exp",             F32, IN},
    {Op::log,             "log",             F32, IN},
    {Op::log1p,           "log1p",           F32, IN},
    {Op::sqrt,            "sqrt",            IN,  IN},
    {Op::abs,             "abs",             IN,  IN},
    {Op::tanh,            "tanh",            IN,  IN},
    {Op::sigmoid,         "sigmoid",         IN,  IN},
    {Op::relu,            "relu",            IN,  IN},
    {Op::gelu,            "gelu",            IN,  IN},
    {Op::clamp,           "clamp",           IN,  IN},
    {Op::where,           "where",           PRO, PRO},
    {Op::eq,              "eq",              IN,  IN},
    {Op::ne,              "ne",              IN,  IN},
    {Op::lt,              "lt",              IN,  IN},
    {Op::le,              "le",              IN,  IN},
    {Op::gt,              "gt",              IN,  IN},
    {Op::ge,              "ge",              IN,  IN},
    // reductions
    {Op::sum,             "sum",             F32, IN},
    {Op::mean,            "mean",            F32, IN},
    {Op::max,             "max",             IN,  IN},
    {Op::min,             "min",             IN,  IN},
    {Op::argmax,          "argmax",          IN,  IN},
    // shape, views, copies, casts
    {Op::reshape,         "reshape",         IN,  IN},
    {Op::view,            "view",            IN,  IN},
    {Op::flatten,         "flatten",         IN,  IN},
    {Op::transpose,       "transpose",       IN,  IN},
    {Op::permute,         "permute",         IN,  IN},
    {Op::narrow,          "narrow",          IN,  IN},
    {Op::select,          "select",          IN,  IN},
    {Op::index_select,    "index_select",    IN,  IN},
    {Op::expand,          "expand",          IN,  IN},
    {Op::unsqueeze,       "unsqueeze",       IN,  IN},
    {Op::squeeze,         "squeeze",         IN,  IN},
    {Op::contiguous,      "contiguous",      IN,  IN},
    {Op::clone,           "clone",           IN,  IN},
    {Op::cat,             "cat",             PRO, PRO},
    {Op::stack,           "stack",           PRO, PRO},
    {Op::to,              "to",              IN,  IN},
    // neural-network ops
    {Op::softmax,         "softmax",         F32, IN},
    {Op::log_softmax,     "log_softmax",     F32, IN},
    {Op::cross_entropy,   "cross_entropy",   F32, F32},
    {Op::nll_loss,        "nll_loss",        F32, F32},
    {Op::mse_loss,        "mse_loss",        F32, F32},
    {Op::binary_cross_entropy, "binary_cross_entropy", BAN, F32},
    {Op::binary_cross_entropy_with_logits, "binary_cross_entropy_with_logits", F32, F32},
    {Op::max_pool2d,      "max_pool2d",      IN,  IN},
    {Op::layer_norm,      "layer_norm",      F32, IN},
    {Op::batch_norm,      "batch_norm",      IN,  IN},
    {Op::group_norm,      "group_norm",      F32, IN},
    {Op::dropout,         "dropout",         IN,  IN},
    {Op::embedding,       "embedding",       IN,  IN},
}};

constexpr bool table_is_complete() {
  for (size_t i = 0; i < kNumOps; ++i)
    if (size_t(kTable[i].op) != i || kTable[i].name == nullptr) return false;
  return true;
}
static_assert(table_is_complete(), "every amp::Op needs exactly one row, in enum order");
}  // namespace

const std::array<PolicyRow, kNumOps>& policy_table() { return kTable; }
const PolicyRow& policy(Op op) { return kTable[size_t(op)]; }
Cast category(Op op, DeviceType d) { return d == DeviceType::CUDA ? policy(op).cuda : policy(op).cpu; }

const char* cast_name(Cast c) {
  switch (c) {
    case Cast::lower_precision: return "lower_precision";
    case Cast::fp32: return "fp32";
    case Cast::promote: return "promote";
    case Cast::input_dtype: return "input_dtype";
    case Cast::banned: return "banned";
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
    os << std::setw(34) << r.name << std::setw(18) << cast_name(r.cuda) << cast_name(r.cpu) << "\n";
}

}  // namespace ampgrad::amp
