// autocast.cpp — the state behind autocast: per-thread, per-device-type flags, the linear route
// and the cast cache. Nothing here casts a tensor; autograd/cast.cpp does, reading this.
#include "amp/autocast.h"

#include <algorithm>

namespace ampgrad::amp {

namespace {
constexpr DType kDefaultDType[2] = {kBFloat16, kFloat16};  // [CPU, CUDA], as PyTorch's
struct State {
  bool enabled[2] = {false, false};
  DType dtype[2] = {kDefaultDType[0], kDefaultDType[1]};
  LinearRoute route[2];                      // [CPU, CUDA], while a LinearRouteGuard holds one
  std::vector<autocast*> open;              // open autocast guards, enabled or not, oldest first
  CastCache cache;
  bool suspended = false;
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
  state.open.push_back(this);
}

// A guard closed before one opened after it on the same device hands that one what to put back,
// so the state ends as if they had closed in order (else the later guard would restore "on").
autocast::~autocast() {
  const auto self = std::find(state.open.begin(), state.open.end(), this);
  const auto inner = std::find_if(self + 1, state.open.end(), [&](autocast* g) { return g->device_ == device_; });
  if (inner != state.open.end()) {
    (*inner)->prev_enabled_ = prev_enabled_;
    (*inner)->prev_dtype_ = prev_dtype_;
  } else {
    state.enabled[idx(device_)] = prev_enabled_;
    state.dtype[idx(device_)] = prev_dtype_;
  }
  state.open.erase(self);
  if (state.open.empty()) state.cache.clear();  // leaving the outermost region
}

LinearRouteGuard::LinearRouteGuard(DeviceType device, LinearRoute route) : device_(device), prev_(std::move(state.route[idx(device)])) {
  state.route[idx(device)] = std::move(route);
}
LinearRouteGuard::~LinearRouteGuard() { state.route[idx(device_)] = std::move(prev_); }
const LinearRoute& linear_route(DeviceType d) { return state.route[idx(d)]; }

suspend::suspend()
    : prev_enabled_{state.enabled[0], state.enabled[1]}, prev_route_{std::move(state.route[0]), std::move(state.route[1])}, prev_suspended_(state.suspended) {
  state.enabled[0] = state.enabled[1] = false;
  state.route[0] = state.route[1] = nullptr;
  state.suspended = true;
}
suspend::~suspend() {
  state.enabled[0] = prev_enabled_[0];
  state.enabled[1] = prev_enabled_[1];
  state.route[0] = std::move(prev_route_[0]);
  state.route[1] = std::move(prev_route_[1]);
  state.suspended = prev_suspended_;
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
bool suspended() { return state.suspended; }

}  // namespace ampgrad::amp
