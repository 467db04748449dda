// autocast.h — thread-local autocast state, the RAII guard, the weight-cast cache and the
// trace. This half of amp/ sits below autograd (every op consults it); the GradScaler half
// (grad_scaler.h) sits beside the optimizer. Casting itself is autograd's: autograd/autocast.cpp.
//
//   {
//     amp::autocast ac(DeviceType::CPU, kFloat16);   // CPU default would be bfloat16
//     Tensor y = linear(x, w, b);                    // runs in float16 (policy: lower_precision)
//     Tensor loss = cross_entropy(y, t);             // runs in float32 (policy: fp32)
//   }                                                // cache of cast weights cleared here
#pragma once
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
bool any_enabled();                  // fast path: false means ops skip autocast entirely (float8 aside)

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

// ---- float8: which float8 dtype each GEMM operand of a linear is narrowed to. The default is
// Transformer Engine's HYBRID format: e4m3 (precision) for activations and weights, e5m2
// (range) for gradients. {kFloat8_e4m3fn, kFloat8_e4m3fn} is its E4M3 format; those two are
// the recipes there are (the forward multiplies two forward operands, and no FP8 GEMM takes
// e5m2 × e5m2).
struct Float8Recipe {
  DType forward = kFloat8_e4m3fn;   // x and W in y = x Wᵀ
  DType backward = kFloat8_e5m2;    // dL/dy in dx = dy W and dW = dyᵀ x
};

// RAII, as Transformer Engine's fp8_autocast: while on for a device type, every linear (the
// op, so nn::Linear too) on it runs as float8_linear (autograd/float8.h) with this recipe. It
// nests with autocast, which then picks the linear's output dtype and runs every other op.
class float8_autocast {
 public:
  explicit float8_autocast(DeviceType device, Float8Recipe recipe = {}, bool enabled = true);
  ~float8_autocast();
  float8_autocast(const float8_autocast&) = delete;
  float8_autocast& operator=(const float8_autocast&) = delete;

 private:
  DeviceType device_;
  std::optional<Float8Recipe> prev_;
};
std::optional<Float8Recipe> float8_recipe(DeviceType device);  // set while float8_autocast is on

// Backward runs inside this: autocast, float8_autocast and the trace off, so each gradient is
// computed in the dtype its forward ran in and the trace shows forward calls only.
class suspend {
 public:
  suspend();
  ~suspend();
  suspend(const suspend&) = delete;
  suspend& operator=(const suspend&) = delete;

 private:
  bool prev_enabled_[2];
  std::optional<Float8Recipe> prev_float8_[2];
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
