// nonfinite_locator.h — where the first inf or NaN of a step appeared: a listener (observer.h)
// that, while it lives, checks each op's output, forward and backward, and each leaf's gradient
// made whole, and keeps a report of the first non-finite one. Nothing here decides what to do
// about it (skip_explainer.h does); with no locator alive nothing is checked and nothing costs.
//
//   NonFiniteLocator where(model->named_parameters(), "model");   // armed from here ...
//   (scaler.scale(loss_of(batch))).backward();
//   if (where.report()) log << where.report()->str();             // "forward: linear in model.3 ..."
//
// Each check reads the output on the host: free on the CPU, one device-to-host copy per op on a
// GPU, which is why it is armed for a replay or while debugging, never by default.
#pragma once
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "amp/policy.h"
#include "tensor/observer.h"
#include "tensor/tensor.h"

namespace ampgrad::amp {

using NamedParameters = std::vector<std::pair<std::string, Tensor>>;  // as Module::named_parameters gives them

// What one tensor holds that float arithmetic cannot: counted on the host.
struct NonFiniteCount {
  int64_t nan = 0, inf = 0;
  double max_abs = 0;  // the largest finite |value|
  int64_t total() const { return nan + inf; }
};
NonFiniteCount count_nonfinite(const Tensor& t);

struct NonFiniteReport {
  bool backward = false;          // found in a backward pass, not the forward
  std::string op{};               // the op whose output held it ("linear"), or "AccumulateGrad"
  std::string node{};             // backward: the node whose backward ran it ("linear")
  std::string module{};           // the module whose parameter the op read ("model.3"), or "" if none did
  std::string after_module{};     // no parameter read: the last module that ran before it
  std::string parameter{};        // AccumulateGrad: the parameter whose gradient it was
  DType dtype = kFloat32;         // the dtype the op ran in
  std::optional<CastPolicy> policy{};   // forward under autocast: the row of amp/policy.h that chose the dtype
  std::string policy_op{};        // that row's op (for autocast's own cast: the op it cast for)
  NonFiniteCount output{};        // what the output held
  double max_abs_input = -1;      // the largest |input| (-1: no floating input)
  std::string max_input{};        // which input that was ("model.3.weight", "input 0")
  NonFiniteCount input_held{};    // what that input held, if it was not finite already (a NaN batch, a NaN weight)
  std::string str() const;        // a few lines, each naming what it says
};

// The largest finite value of a floating dtype: 65504 for float16.
double dtype_max(DType dtype);

class NonFiniteLocator final : public Observer {
 public:
  // parameters name the module an op ran in; prefix is prepended as a saved state's keys read ("model").
  explicit NonFiniteLocator(const NamedParameters& parameters, std::string prefix = "");
  ~NonFiniteLocator() override;
  NonFiniteLocator(const NonFiniteLocator&) = delete;
  NonFiniteLocator& operator=(const NonFiniteLocator&) = delete;

  const std::optional<NonFiniteReport>& report() const { return report_; }
  void clear() { report_.reset(); }  // for the next step (--detect-anomaly)
  // A tensor that came from outside (the batch): its inf/NaN is reported as the first, named `name`.
  void check_input(const Tensor& t, const std::string& name);

  void on_op_output(const Tensor& out, const char* op, const std::vector<Tensor>& inputs) override;
  void on_grad_accumulated(const Tensor& leaf) override;
  void on_span_begin(const char* name, SpanKind kind) override;
  void on_span_end(const char* name, SpanKind kind) override;

 private:
  std::string parameter_of(const Tensor& t) const;  // t, or a cast or view of t, as a parameter's name; "" if neither
  bool mine() const { return std::this_thread::get_id() == thread_ && !busy_; }

  std::unordered_map<const TensorImpl*, std::string> names_;
  std::thread::id thread_;
  bool busy_ = false;            // inside a hook: reads made there announce nothing to us
  int backward_depth_ = 0;
  std::vector<const char*> nodes_;  // the backward nodes running now, innermost last
  std::string last_module_;
  bool awaiting_consumer_ = false;  // the report is autocast's cast: the next forward op names the row
  std::optional<NonFiniteReport> report_;
};

}  // namespace ampgrad::amp
