// trainer_support.h — what the MNIST and GPT trainers share: their --device, --amp and --float8
// flags turned into a Device and a precision setting (with an error naming a bad value), the
// forward's precision as one scope, and the three instruments a run can switch on for a stretch
// of its training: the autocast log, the kernel profile, the timeline and the memory history.
//
//   const Device device = training_device(c.device, c.ddp);      // "cuda" without a GPU: an Error saying why
//   const AmpSetting precision = amp_setting(c.amp, c.float8);    // .enabled, .dtype and .float8
//   { Autocast ac(device.type, precision); loss = ...; }          // autocast, and float8_autocast with --float8
//   Instruments watch(c.autocast_log, c.profile, c.profile_trace, c.memory_peak, device);  // each asked for records from here ...
//   watch.report(log);                                                 // ... until this prints and stops them
#pragma once
#include <optional>
#include <ostream>
#include <string>

#include "amp/autocast.h"
#include "diagnostics/autocast_log.h"
#include "autograd/float8.h"
#include "data_parallel.h"
#include "diagnostics/memory_history.h"
#include "diagnostics/profile.h"
#include "diagnostics/trace.h"

namespace ampgrad::examples {

// "cpu", "cuda" (under --ddp: this rank's GPU of its node, data_parallel::cuda_device) or "cuda:N".
inline Device training_device(const std::string& name, bool ddp = false) {
  const bool indexed = name.rfind("cuda:", 0) == 0 && name.size() > 5 && name.size() < 9 &&
                       name.find_first_not_of("0123456789", 5) == std::string::npos;
  AMPGRAD_CHECK(name == "cpu" || name == "cuda" || indexed, "--device must be cpu, cuda or cuda:N, got '" << name << "'");
  if (name == "cpu") return Device::cpu();
  AMPGRAD_CHECK(cuda::is_available(), "--device " << name << ": " << cuda::unavailable_reason());
  const int index = indexed ? std::stoi(name.substr(5)) : ddp ? data_parallel::cuda_device() : 0;
  AMPGRAD_CHECK(index < cuda::device_count(), "--device " << name << ": this node has " << cuda::device_count() << " CUDA devices");
  return Device::cuda(index);
}

struct AmpSetting {
  bool enabled;
  DType dtype;          // the autocast dtype when enabled
  bool float8 = false;  // every linear as an FP8 GEMM (float8_autocast, HYBRID recipe)
};
inline AmpSetting amp_setting(const std::string& name, bool float8 = false) {
  AMPGRAD_CHECK(name == "off" || name == "fp16" || name == "bf16", "--amp must be off, fp16 or bf16, got '" << name << "'");
  return {name != "off", name == "bf16" ? kBFloat16 : kFloat16, float8};
}

// The forward's precision: autocast as --amp says, and float8_autocast over it with --float8.
struct Autocast {
  amp::autocast ac;
  float8_autocast f8;
  Autocast(DeviceType device, const AmpSetting& s) : ac(device, s.dtype, s.enabled), f8(device, {}, s.float8) {}
};

class Instruments {
 public:
  // profile_trace: a file for the timeline (trace.h), or "" for none
  Instruments(bool autocast_log, bool profile, const std::string& profile_trace, bool memory_peak, Device device) {
    if (autocast_log) autocast_log_.emplace();
    if (profile) profile_.emplace(device.is_cuda());  // on a GPU, waits for each kernel
    if (!profile_trace.empty()) timeline_.emplace(profile_trace);
    if (memory_peak) history_.emplace(device);
  }
  void report(std::ostream& log) {  // prints what was recorded, once; later calls print nothing
    if (profile_) profile_->print(log);
    if (timeline_) timeline_->write();
    if (autocast_log_) autocast_log_->print(log);
    if (history_) history_->print(log);
    profile_.reset();
    timeline_.reset();
    autocast_log_.reset();
    history_.reset();
  }

 private:
  std::optional<amp::AutocastLog> autocast_log_;
  std::optional<Profile> profile_;
  std::optional<TraceWriter> timeline_;
  std::optional<MemoryHistory> history_;
};

}  // namespace ampgrad::examples
