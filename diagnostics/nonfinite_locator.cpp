// nonfinite_locator.cpp — the checks (host loops over each output), the naming (a parameter, or
// autocast's cast of one, tells the module) and the report's wording.
#include "diagnostics/nonfinite_locator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <limits>
#include <optional>
#include <sstream>

#include "amp/autocast.h"
#include "autograd/node.h"

namespace ampgrad::amp {

template <class T> static void count_values(const T* p, int64_t n, NonFiniteCount& c) {
  for (int64_t i = 0; i < n; ++i) {
    double v;
    if constexpr (std::is_same_v<T, double>) v = p[i];
    else v = float(p[i]);  // half and bfloat16 widen exactly through float
    if (std::isnan(v)) ++c.nan;
    else if (std::isinf(v)) ++c.inf;
    else c.max_abs = std::max(c.max_abs, std::abs(v));
  }
}

NonFiniteCount count_nonfinite(const Tensor& t) {
  NonFiniteCount c;
  if (!t.defined() || !t.is_floating_point() || is_storage_only(t.dtype())) return c;
  if (t.device().is_cpu() && t.is_contiguous()) {
    dispatch(t.dtype(), [&](auto tag) { count_values(t.data_ptr<typename decltype(tag)::type>(), t.numel(), c); });
    return c;
  }
  const std::vector<double> v = to_vector<double>(t);  // a GPU's values, or a strided view's
  count_values(v.data(), int64_t(v.size()), c);
  return c;
}

double dtype_max(DType dtype) {
  switch (dtype) {
    case DType::Float16: return 65504.0;
    case DType::BFloat16: return 3.3895313892515355e38;
    case DType::Float32: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

static std::string module_of(const std::string& parameter) {  // "model.3.weight" -> "model.3"
  const size_t dot = parameter.rfind('.');
  return dot == std::string::npos ? "" : parameter.substr(0, dot);
}

NonFiniteLocator::NonFiniteLocator(const NamedParameters& parameters, std::string prefix) : thread_(std::this_thread::get_id()) {
  for (const auto& [name, p] : parameters) names_[p.impl_ptr().get()] = prefix.empty() ? name : prefix + "." + name;
  add_observer(this);
}
NonFiniteLocator::~NonFiniteLocator() { remove_observer(this); }

std::string NonFiniteLocator::parameter_of(const Tensor& t) const {
  if (!t.defined()) return "";
  if (auto it = names_.find(t.impl_ptr().get()); it != names_.end()) return it->second;
  // one step from a weight: autocast's cast of it, or a view (a node with the weight as its one edge)
  const std::shared_ptr<autograd::Node>& fn = t.grad_fn();
  if (fn && fn->edges.size() == 1 && fn->edges[0].leaf)
    if (auto it = names_.find(fn->edges[0].leaf.get()); it != names_.end()) return it->second;
  return "";
}

// Inside a hook: reads made there announce nothing to us; cleared also when a read throws.
struct BusyGuard {
  bool& busy;
  explicit BusyGuard(bool& b) : busy(b) { busy = true; }
  ~BusyGuard() { busy = false; }
};

// The policy row of a recorded op, found by the name record() announces it with.
static std::optional<Op> op_named(const char* name) {
  for (size_t i = 0; i < kNumOps; ++i)
    if (std::strcmp(policy_row(Op(i)).name, name) == 0) return Op(i);
  return std::nullopt;
}

void NonFiniteLocator::on_op_output(const Tensor& out, const char* op, const std::vector<Tensor>& inputs) {
  if (!mine() || !out.defined() || out.impl().is_view) return;  // a view holds what its base held, checked already
  BusyGuard busy(busy_);
  const bool forward = backward_depth_ == 0;
  // autocast's own cast (of an input or a weight): its row is that of the op it casts for, the next one
  const char* maker = MadeBy::now();
  const bool autocast_cast = forward && maker && std::strncmp(maker, "autocast", 8) == 0;
  std::optional<Op> row;
  if (forward && !autocast_cast && is_enabled(out.device().type)) row = op_named(op);
  if (report_ && awaiting_consumer_ && forward && row) {  // the op autocast cast for
    report_->policy = cast_policy(*row, out.device().type);
    report_->policy_op = policy_row(*row).name;
    awaiting_consumer_ = false;
  }
  std::string module;
  for (const Tensor& x : inputs)
    if (module.empty()) module = module_of(parameter_of(x));
  if (forward && !module.empty()) last_module_ = module;
  const NonFiniteCount c = report_ ? NonFiniteCount{} : count_nonfinite(out);
  std::vector<NonFiniteCount> ins;
  bool inherited_inf = false, parameter_inf = false;
  if (c.total() > 0)
    for (const Tensor& x : inputs) {
      ins.push_back(count_nonfinite(x));
      if (ins.back().inf > 0) (parameter_of(x).empty() ? inherited_inf : parameter_inf) = true;
    }
  // An inf passed on from a tensor no op made (attention's -inf mask, a constant) is no news; a new
  // inf, any NaN, and a parameter's inf are.
  if (c.nan > 0 || (c.inf > 0 && (!inherited_inf || parameter_inf))) {
    NonFiniteReport r{.backward = !forward, .op = op, .node = nodes_.empty() ? "" : nodes_.back(), .module = module,
                      .after_module = module.empty() && forward ? last_module_ : "", .dtype = out.dtype(), .output = c};
    if (row) r.policy = cast_policy(*row, out.device().type), r.policy_op = policy_row(*row).name;
    awaiting_consumer_ = autocast_cast;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].defined() || !inputs[i].is_floating_point()) continue;
      const double biggest = ins[i].total() ? INFINITY : ins[i].max_abs;
      if (biggest <= r.max_abs_input) continue;
      r.max_abs_input = biggest;
      r.input_held = ins[i];
      const std::string name = parameter_of(inputs[i]);
      r.max_input = name.empty() ? "input " + std::to_string(i) : name;
    }
    report_ = std::move(r);
  }
}

void NonFiniteLocator::check_input(const Tensor& t, const std::string& name) {
  const NonFiniteCount c = count_nonfinite(t);
  if (!report_ && c.total() > 0) report_ = NonFiniteReport{.op = "", .module = name, .dtype = t.dtype(), .output = c};
}

void NonFiniteLocator::on_grad_accumulated(const Tensor& leaf) {
  if (!mine() || report_) return;
  BusyGuard busy(busy_);
  const Tensor g = leaf.grad();
  const NonFiniteCount c = count_nonfinite(g);
  if (c.total() > 0) {
    const std::string name = parameter_of(leaf);
    report_ = NonFiniteReport{.backward = true, .op = "AccumulateGrad", .module = module_of(name), .parameter = name.empty() ? "a leaf" : name,
                              .dtype = g.dtype(), .output = c};
  }
}

void NonFiniteLocator::on_span_begin(const char* name, SpanKind kind) {
  if (!mine()) return;
  if (kind == SpanKind::backward) ++backward_depth_;
  if (kind == SpanKind::node) nodes_.push_back(name);
}
void NonFiniteLocator::on_span_end(const char*, SpanKind kind) {
  if (!mine()) return;
  if (kind == SpanKind::backward) --backward_depth_;
  if (kind == SpanKind::node && !nodes_.empty()) nodes_.pop_back();
}

static std::string number(double v) {
  std::ostringstream os;
  os << std::setprecision(6) << v;
  return os.str();
}

std::string NonFiniteReport::str() const {
  std::ostringstream os;
  if (op.empty()) {  // check_input's: it came in from outside
    os << "first inf/NaN: " << module << " held " << output.inf << " inf and " << output.nan << " NaN before any op ran";
    return os.str();
  }
  os << "first inf/NaN: " << (backward ? "backward" : "forward") << ", op " << op;
  if (backward && !node.empty()) os << " in the backward of node " << node;
  if (!parameter.empty()) os << ", the gradient of " << parameter;
  else if (!module.empty()) os << ", module " << module;
  else if (!after_module.empty()) os << ", no module's parameter (it ran after module " << after_module << ")";
  else if (!backward) os << ", no module's parameter";
  os << ", ran in " << dtype_name(dtype);
  if (policy) os << " (policy row " << policy_op << ": " << policy_name(*policy) << ")";
  else if (!backward) os << " (autocast off)";
  os << "\n  its output held " << output.inf << " inf and " << output.nan << " NaN";
  if (input_held.total() > 0)
    os << "; its input " << max_input << " already held " << input_held.inf << " inf and " << input_held.nan << " NaN";
  else if (max_abs_input >= 0)
    os << "; largest |input| " << number(max_abs_input) << " (" << max_input << ") beside " << dtype_name(dtype) << "'s max "
       << number(dtype_max(dtype));
  return os.str();
}

}  // namespace ampgrad::amp
