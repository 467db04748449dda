// autocast_log.h — what autocast did to each op call of this thread while the log lives: a
// listener of the observer (tensor/observer.h, on_autocast), and its summary, one row per (op,
// input dtypes, dtype it ran in, policy) with the calls, casts and weight-cache hits of each.
// Programs print it with --autocast-log; docs/amp-walkthrough.md shows one.
//
//   amp::AutocastLog log;                 // hears the ops of this thread from here
//   { amp::autocast ac(DeviceType::CPU, kFloat16); loss = cross_entropy(model->forward(x), y); }
//   log.print(std::cout);                 // "linear  float32,float32,float32  float16  lower_precision ..."
#pragma once
#include <iosfwd>
#include <thread>
#include <vector>

#include "tensor/observer.h"

namespace ampgrad::amp {

class AutocastLog final : public Observer {
 public:
  AutocastLog() { add_observer(this); }
  ~AutocastLog() override { remove_observer(this); }
  AutocastLog(const AutocastLog&) = delete;
  AutocastLog& operator=(const AutocastLog&) = delete;

  void on_autocast(const AutocastCall& call) override {
    if (std::this_thread::get_id() == thread_) calls_.push_back(call);
  }
  const std::vector<AutocastCall>& calls() const { return calls_; }
  void print(std::ostream& os) const;

 private:
  std::thread::id thread_ = std::this_thread::get_id();
  std::vector<AutocastCall> calls_;
};

}  // namespace ampgrad::amp
