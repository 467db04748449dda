// autocast.cpp — the state behind autocast: per-thread, per-device-type flags, the cast cache
// and the trace. Nothing here casts a tensor; autograd/autocast.cpp does, reading this.
#include "amp/autocast.h"

#include <algorithm>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <map>

namespace ampgrad::amp {

namespace {
struct State {
  bool enabled[2] = {false, false};
  DType dtype[2] = {kBFloat16, kFloat16};  // [CPU, CUDA] defaults
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
  DType d = dtype.value_or(device == DeviceType::CUDA ? kFloat16 : kBFloat16);
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

static std::string dtypes_str(const std::vector<DType>& ds) {
  std::string s;
  for (DType d : ds) s += (s.empty() ? "" : ",") + std::string(dtype_name(d));
  return s.empty() ? "-" : s;
}

void Trace::print_summary(std::ostream& os) const {
  struct Row { int calls = 0, casts = 0, hits = 0; };
  std::map<std::tuple<std::string, std::string, std::string, std::string>, Row> rows;
  for (const TraceEvent& e : events_) {
    std::string cat = e.autocast_on ? cast_name(e.category) : "(autocast off)";
    Row& r = rows[{policy(e.op).name, dtypes_str(e.input_dtypes), e.run_dtype ? dtype_name(*e.run_dtype) : "-", cat}];
    r.calls++;
    r.casts += e.casts;
    r.hits += e.cache_hits;
  }
  int ran_in_width = 10;  // wider for a longer dtype name
  for (auto& [k, r] : rows) ran_in_width = std::max(ran_in_width, int(std::get<2>(k).size()) + 1);
  os << "autocast trace: " << events_.size() << " op calls\n"
     << std::left << std::setw(15) << "op" << std::setw(26) << "inputs" << std::setw(ran_in_width) << "ran in"
     << std::setw(17) << "policy" << std::right << std::setw(7) << "calls" << std::setw(7) << "casts" << std::setw(12) << "cache hits" << "\n";
  bool outside = false, untyped = false;
  for (auto& [k, r] : rows) {
    os << std::left << std::setw(15) << std::get<0>(k) << std::setw(26) << std::get<1>(k) << std::setw(ran_in_width) << std::get<2>(k)
       << std::setw(17) << std::get<3>(k) << std::right << std::setw(7) << r.calls << std::setw(7) << r.casts << std::setw(10) << r.hits << "\n";
    outside |= std::get<3>(k) == "(autocast off)";
    untyped |= std::get<1>(k) == "-";
  }
  // The rows a reader would otherwise puzzle over: calls autocast saw but had no say in.
  if (outside)
    os << "(autocast off): called outside every autocast region (a batch moved to the device, the GradScaler's scale, the\n"
          "  optimizer, the program's own sums), so autocast changed nothing; the dtype is the program's.\n";
  if (untyped) os << "inputs -: no floating-point input (int64 labels, a bool mask), which autocast never casts.\n";
}

}  // namespace ampgrad::amp
