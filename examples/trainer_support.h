// trainer_support.h — what the MNIST and GPT trainers share: their --device and --amp flags
// turned into a Device and an autocast setting (with an error naming a bad value), and the two
// instruments a run can switch on for a stretch of its training, the autocast trace and the
// kernel profile.
//
//   const Device device = training_device(c.device);   // "cuda" without a GPU: an Error saying why
//   const AmpSetting precision = amp_setting(c.amp);    // .enabled and .dtype, for autocast
//   Instruments watch(c.amp_trace, c.profile, device);  // both record from here ...
//   watch.report(log);                                  // ... until this prints and stops them
#pragma once
#include <optional>
#include <ostream>
#include <string>

#include "amp/autocast.h"
#include "tensor/profile.h"

namespace ampgrad::examples {

inline Device training_device(const std::string& name) {
  AMPGRAD_CHECK(name == "cpu" || name == "cuda", "--device must be cpu or cuda, got '" << name << "'");
  AMPGRAD_CHECK(name == "cpu" || cuda::is_available(), "--device cuda: " << cuda::unavailable_reason());
  return name == "cuda" ? Device::cuda() : Device::cpu();
}

struct AmpSetting {
  bool enabled;
  DType dtype;  // the autocast dtype when enabled
};
inline AmpSetting amp_setting(const std::string& name) {
  AMPGRAD_CHECK(name == "off" || name == "fp16" || name == "bf16", "--amp must be off, fp16 or bf16, got '" << name << "'");
  return {name != "off", name == "bf16" ? kBFloat16 : kFloat16};
}

class Instruments {
 public:
  Instruments(bool amp_trace, bool profile, Device device) {
    if (amp_trace) trace_.emplace();
    if (profile) profile_.emplace(device.is_cuda());  // on a GPU, waits for each kernel
  }
  void report(std::ostream& log) {  // prints what was recorded, once; later calls print nothing
    if (profile_) profile_->print(log);
    if (trace_) trace_->print_summary(log);
    profile_.reset();
    trace_.reset();
  }

 private:
  std::optional<amp::Trace> trace_;
  std::optional<Profile> profile_;
};

}  // namespace ampgrad::examples
