// profile.cpp — the Profile's thread-local state, its timers and its table. No device timers
// (CUDA events): on a GPU the host waits instead, which is simpler and enough to rank kernels.
#include "diagnostics/profile.h"

#include <algorithm>
#include <exception>
#include <iomanip>
#include <ostream>
#include <sstream>

#ifdef AMPGRAD_WITH_CUDA
#include "tensor/cuda/runtime.h"
#endif

namespace ampgrad {
namespace {
thread_local Profile* active = nullptr;  // this thread's innermost
}  // namespace

Profile::Profile(bool sync_cuda) : start_(Clock::now()), sync_cuda_(sync_cuda), prev_(active) {
  active = this;
  add_observer(this);
}
Profile::~Profile() {
  remove_observer(this);
  active = prev_;
}

bool Profile::listening() const { return active == this; }

double Profile::wall_ms() const { return std::chrono::duration<double, std::milli>(Clock::now() - start_).count(); }

std::vector<ProfileRow> Profile::rows() const {
  std::vector<ProfileRow> out;
  for (const auto& [key, value] : totals_) out.push_back({key.first, key.second, value.first, value.second});
  std::stable_sort(out.begin(), out.end(), [](const ProfileRow& a, const ProfileRow& b) { return a.ms > b.ms; });
  return out;
}

void Profile::print(std::ostream& out) const {
  const double wall = wall_ms();
  double kernels = 0;
  std::ostringstream os;  // its formatting, not the caller's stream's
  int width = 16;           // the kernel column: its longest name and a space (cross_entropy_backward)
  for (const ProfileRow& r : rows()) width = std::max(width, int(r.kernel.size()) + 1);
  const auto line = [&](const std::string& what, const std::string& phase, const std::string& calls, double ms) {
    os << std::left << std::setw(width) << what << std::setw(10) << phase << std::right << std::setw(8) << calls << std::fixed
       << std::setprecision(2) << std::setw(12) << ms << std::setprecision(1) << std::setw(8) << 100 * ms / std::max(wall, 1e-9) << "%\n";
  };
  os << std::left << std::setw(width) << "kernel" << std::setw(10) << "phase" << std::right << std::setw(8) << "calls" << std::setw(12)
     << "total ms" << std::setw(9) << "share" << "\n";
  for (const ProfileRow& r : rows()) {
    line(r.kernel, r.backward ? "backward" : "other", std::to_string(r.calls), r.ms);
    kernels += r.ms;
  }
  line("(outside)", "", "", wall - kernels);
  line("(wall time)", "", "", wall);
  if (saw_cuda_ && !sync_cuda_) os << "(on the GPU a call's time is its launch: Profile(true) waits for each kernel)\n";
  out << os.str();
}

void Profile::on_kernel_begin(const char* kernel, Device device) {
  if (!listening() || depth_++ > 0) return;
  exceptions_ = std::uncaught_exceptions();
  wait_for_device(device);  // work queued earlier is not this call's
  call_start_ = Clock::now();
}

void Profile::on_kernel_end(const char* kernel, Device device) {
  if (!listening() || depth_ == 0 || --depth_ > 0 || std::uncaught_exceptions() > exceptions_) return;
  // exercise 3.1: kernel_time — this call's milliseconds since call_start_ and one call, added to its (kernel, in backward) total
  wait_for_device(device);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - call_start_).count();
  saw_cuda_ |= device.is_cuda();
  auto& [calls, total] = totals_[{kernel, backward_ > 0}];
  ++calls;
  total += ms;
  // end exercise 3.1
}

void Profile::on_span_begin(const char*, SpanKind kind) {
  if (kind == SpanKind::backward && listening()) ++backward_;
}
void Profile::on_span_end(const char*, SpanKind kind) {
  if (kind == SpanKind::backward && listening() && backward_ > 0) --backward_;
}

// With sync_cuda, a CUDA call's device (the current one: the dispatcher's guard) finishes first.
void Profile::wait_for_device(Device device) const {
#ifdef AMPGRAD_WITH_CUDA
  if (sync_cuda_ && device.is_cuda()) (void)cudaStreamSynchronize(cuda::stream());
#endif
}

}  // namespace ampgrad
