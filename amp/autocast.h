// autocast.h — thread-local autocast state, the RAII guard, the weight-cast cache and the
// trace. This half of amp/ sits below autograd (every op consults it); the GradScaler half
// (grad_scaler.h) sits beside the optimizer. Casting itself is autograd's: autograd/cast.cpp.
//
//   {
//     amp::autocast ac(DeviceType::CPU, kFloat16);   // CPU default would be bfloat16
//     Tensor y = linear(x, w, b);                    // runs in float16 (policy: lower_precision)
//     Tensor loss = cross_entropy(y, t);             // runs in float32 (policy: fp32)
//   }                                                // cache of cast weights cleared here
#pragma once
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "amp/policy.h"
#include "tensor/tensor.h"

namespace ampgrad::amp {

class Trace;

bool is_enabled(DeviceType device);
DType get_dtype(DeviceType device);  // the dtype lower_precision ops cast to
bool any_enabled();                  // fast path: false means ops skip autocast entirely

class autocast {
 public:
  // dtype defaults: CUDA float16, CPU bfloat16. enabled=false runs the region in full precision.
  explicit autocast(DeviceType device, std::optional<DType> dtype = {}, bool enabled = true);
  ~autocast();
  autocast(const autocast&) = delete;
  autocast& operator=(const autocast&) = delete;

 private:
  DeviceType device_;
  bool prev_enabled_;
  DType prev_dtype_;
};

// ---- the dispatch hook: while a route_linear guard holds a route for a device type, linear
// (the op, so nn::Linear too) on that device calls the route instead of running itself. An
// edge reroutes linear this way (an 8-bit GEMM, say), at this one place; linear's own autocast
// step is then the route's to take or leave.
using LinearRoute = std::function<Tensor(const Tensor& x, const Tensor& weight, const Tensor& bias)>;
class route_linear {
 public:
  route_linear(DeviceType device, LinearRoute route);  // an empty route: linear runs as itself
  ~route_linear();
  route_linear(const route_linear&) = delete;
  route_linear& operator=(const route_linear&) = delete;

 private:
  DeviceType device_;
  LinearRoute prev_;
};
const LinearRoute& linear_route(DeviceType device);  // empty unless a route_linear holds one

// Backward runs inside this: autocast, the linear route and the trace off, so each gradient is
// computed in the dtype its forward ran in and the trace shows forward calls only.
class suspend {
 public:
  suspend();
  ~suspend();
  suspend(const suspend&) = delete;
  suspend& operator=(const suspend&) = delete;

 private:
  bool prev_enabled_[2];
  LinearRoute prev_route_[2];
  Trace* prev_trace_;
};

// ---- weight-cast cache: a float32 leaf that requires grad and is not a view, cast to the
// autocast dtype, is cast once per outermost autocast region (a weight used by several ops,
// or several micro-batches inside one region, is converted once).
using CastCache = std::map<std::pair<const TensorImpl*, DType>, std::pair<Tensor, Tensor>>;  // -> (source, cast)
bool cache_eligible(const Tensor& src, DType target);
// RAII: an empty cache for the scope, the outer one put back on exit. A checkpointed region runs
// in one, so its first run and its rerun in backward cast the same weights, and the first run's
// casts are freed with the rest of its graph.
class cache_scope {
 public:
  cache_scope();
  ~cache_scope();
  cache_scope(const cache_scope&) = delete;
  cache_scope& operator=(const cache_scope&) = delete;

 private:
  CastCache outer_;
};
std::optional<Tensor> cache_lookup(const Tensor& src, DType target);
void cache_store(const Tensor& src, DType target, const Tensor& cast);
size_t cache_size();

// ---- trace: per op call, what autocast decided ----
struct TraceEvent {
  Op op;
  std::vector<DType> input_dtypes;  // as the caller passed them (floating inputs only)
  std::optional<DType> run_dtype;   // what the op ran in (none if it has no floating input)
  Cast category;
  bool autocast_on;                 // autocast enabled for the inputs' device type
  int cache_hits = 0, casts = 0;
};

bool trace_active();
void trace_record(TraceEvent ev);

// RAII: records every op call on this thread while alive. AMPGRAD_AMP_TRACE=1 in the
// environment records the whole process and prints the summary at exit.
class Trace {
 public:
  Trace();
  ~Trace();
  const std::vector<TraceEvent>& events() const { return events_; }
  void print_summary(std::ostream& os) const;  // one row per (op, inputs, ran-in, row)
  void append(TraceEvent ev) { events_.push_back(std::move(ev)); }

 private:
  std::vector<TraceEvent> events_;
  Trace* prev_;
};

}  // namespace ampgrad::amp
