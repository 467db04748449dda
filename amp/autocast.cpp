// autocast.cpp — the state behind autocast: per-thread, per-device-type flags, the cast cache
// and the trace's records. Nothing here casts a tensor; autograd/cast.cpp does, reading this.
// The trace's printing is amp/autocast_trace.cpp's.
#include "amp/autocast.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

namespace ampgrad::amp {

namespace {
constexpr DType kDefaultDType[2] = {kBFloat16, kFloat16};  // [CPU, CUDA], as PyTorch's
struct State {
  bool enabled[2] = {false, false};
  DType dtype[2] = {kDefaultDType[0], kDefaultDType[1]};
  LinearRoute route[2];                      // [CPU, CUDA], while a route_linear holds one
  int nesting = 0;                          // open autocast guards, enabled or not
  CastCache cache;
  Trace* trace = nullptr;
};
thread_local State state;
int idx(DeviceType d) { return d == DeviceType::CUDA ? 1 : 0; }
}  // namespace

bool is_enabled(DeviceType d) { return state.enabled[idx(d)]; }
DType get_dtype(DeviceType d) { return state.dtype[idx(d)]; }
bool any_enabled() { return state.enabled[0] || state.enabled[1]; }

autocast::autocast(DeviceType device, std::optional<DType> dtype, bool enabled)
    : device_(device), prev_enabled_(is_enabled(device)), prev_dtype_(get_dtype(device)) {
  DType d = dtype.value_or(kDefaultDType[idx(device)]);
  AMPGRAD_CHECK(!enabled || is_half(d), "autocast: dtype must be float16 or bfloat16, got " << dtype_name(d));
  if (!enabled && !is_half(d)) d = prev_dtype_;  // a disabled region keeps the outer dtype
  state.enabled[idx(device)] = enabled;
  state.dtype[idx(device)] = d;
  ++state.nesting;
}

autocast::~autocast() {
  state.enabled[idx(device_)] = prev_enabled_;
  state.dtype[idx(device_)] = prev_dtype_;
  if (--state.nesting == 0) state.cache.clear();  // leaving the outermost region
}

route_linear::route_linear(DeviceType device, LinearRoute route) : device_(device), prev_(std::move(state.route[idx(device)])) {
  state.route[idx(device)] = std::move(route);
}
route_linear::~route_linear() { state.route[idx(device_)] = std::move(prev_); }
const LinearRoute& linear_route(DeviceType d) { return state.route[idx(d)]; }

suspend::suspend()
    : prev_enabled_{state.enabled[0], state.enabled[1]}, prev_route_{std::move(state.route[0]), std::move(state.route[1])}, prev_trace_(state.trace) {
  state.enabled[0] = state.enabled[1] = false;
  state.route[0] = state.route[1] = nullptr;
  state.trace = nullptr;
}
suspend::~suspend() {
  state.enabled[0] = prev_enabled_[0];
  state.enabled[1] = prev_enabled_[1];
  state.route[0] = std::move(prev_route_[0]);
  state.route[1] = std::move(prev_route_[1]);
  state.trace = prev_trace_;
}

bool cache_eligible(const Tensor& src, DType target) {
  return src.dtype() == kFloat32 && src.is_leaf() && src.requires_grad() && !src.impl().is_view &&
         target == get_dtype(src.device().type);
}
cache_scope::cache_scope() { outer_.swap(state.cache); }
cache_scope::~cache_scope() { state.cache.swap(outer_); }

std::optional<Tensor> cache_lookup(const Tensor& src, DType target) {
  auto it = state.cache.find({src.impl_ptr().get(), target});
  if (it == state.cache.end()) return std::nullopt;
  return it->second.second;
}
void cache_store(const Tensor& src, DType target, const Tensor& cast) {
  // The source is held too, so its address cannot be reused by another tensor while cached.
  state.cache[{src.impl_ptr().get(), target}] = {src, cast};
}
size_t cache_size() { return state.cache.size(); }

// ---- trace ----
namespace {
// AMPGRAD_AMP_TRACE=1: one process-wide trace on the main thread, printed when it exits.
struct EnvTrace {
  Trace* trace = nullptr;  // never destroyed: at exit the thread's state it would reset is gone
  EnvTrace() {
    const char* v = std::getenv("AMPGRAD_AMP_TRACE");
    if (v && std::string(v) == "1") trace = new Trace;
  }
  ~EnvTrace() {
    if (trace) trace->print_summary(std::cerr);
  }
};
}  // namespace

bool trace_active() {
  static EnvTrace env;  // first op call starts it (on the thread that makes it)
  return state.trace != nullptr;
}
void trace_record(TraceEvent ev) {
  if (state.trace) state.trace->append(std::move(ev));
}

Trace::Trace() : prev_(state.trace) { state.trace = this; }
Trace::~Trace() { state.trace = prev_; }

}  // namespace ampgrad::amp
