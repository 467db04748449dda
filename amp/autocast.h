// autocast.h — thread-local autocast state, the RAII guard, the dispatch hook and the weight-cast
// cache. This half of amp/ sits below autograd (every op consults it); the GradScaler half
// (grad_scaler.h) sits above the optimizer. Casting itself is autograd's: autograd/cast.cpp.
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

// ---- the dispatch hook: while a LinearRouteGuard holds a route for a device type, linear
// (the op, so nn::Linear too) on that device calls the route instead of running itself. An
// edge reroutes linear this way (an 8-bit GEMM, say), at this one place; linear's own autocast
// step is then the route's to take or leave.
using LinearRoute = std::function<Tensor(const Tensor& x, const Tensor& weight, const Tensor& bias)>;
class LinearRouteGuard {
 public:
  LinearRouteGuard(DeviceType device, LinearRoute route);  // an empty route: linear runs as itself
  ~LinearRouteGuard();
  LinearRouteGuard(const LinearRouteGuard&) = delete;
  LinearRouteGuard& operator=(const LinearRouteGuard&) = delete;

 private:
  DeviceType device_;
  LinearRoute prev_;
};
const LinearRoute& linear_route(DeviceType device);  // empty unless a LinearRouteGuard holds one

// Backward runs inside this: autocast and the linear route off, so each gradient is computed in
// the dtype its forward ran in (and listeners hear the forward's calls only: suspended()).
class suspend {
 public:
  suspend();
  ~suspend();
  suspend(const suspend&) = delete;
  suspend& operator=(const suspend&) = delete;

 private:
  bool prev_enabled_[2];
  LinearRoute prev_route_[2];
  bool prev_suspended_;
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

// Whether this thread is inside an amp::suspend (a backward, an op's own steps): autograd/cast.cpp
// tells listeners what autocast did only outside one, so they hear the forward's op calls.
bool suspended();

}  // namespace ampgrad::amp
