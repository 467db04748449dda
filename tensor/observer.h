// observer.h — how the core tells whoever listens what it is doing: each primitive call, each
// block allocated and freed, what autocast did to each op's inputs, each op's output, each
// backward pass, each leaf's gradient made whole. Instruments (a Profile, a MemoryHistory, a
// trace writer, an autocast log) and data-parallel training listen while they live; with no
// listener an announcement costs one load and a branch.
//
//   struct Counter : Observer { int calls = 0; void on_kernel_begin(const char*, Device) override { ++calls; } };
//   Counter c;  add_observer(&c);  train_step();  remove_observer(&c);
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype_enum.h"

namespace ampgrad {

class Tensor;
// A named stretch of work: a phase the library knows (the optimizer's step, the GradScaler's own
// work), a whole backward pass (passes nest: a checkpoint's rerun), or one backward node's run
// (a leaf's AccumulateGrad among them).
enum class SpanKind { phase, backward, node };

// What autocast did at one op call (autograd/cast.cpp), in a forward: the op (its ops.def name),
// its cast policy on the inputs' device type, the dtypes of its floating inputs as passed and the
// dtype it ran in, and the casts it made and took from the weight cache.
struct AutocastCall {
  const char* op;
  const char* policy;  // amp::policy_name of its row, or "(autocast off)": autocast had no say
  std::vector<DType> input_dtypes = {};
  std::optional<DType> run_dtype = {};  // none without a floating input
  int casts = 0, cache_hits = 0;
};

// Every hook may be called from any thread that runs ops or allocates: a listener that keeps
// state per thread filters itself. Hooks must not throw, except on_grad_accumulated (its error
// ends the backward, as an op's would).
struct Observer {
  virtual ~Observer() = default;
  virtual void on_kernel_begin(const char* kernel, Device device) {}  // a primitive, as kernels.cpp dispatches it
  virtual void on_kernel_end(const char* kernel, Device device) {}    // also when it throws
  virtual void on_alloc(Device device, const void* block, int64_t bytes) {}  // bytes as memory_stats counts them
  virtual void on_free(Device device, const void* block, int64_t bytes) {}
  virtual void on_autocast(const AutocastCall& call) {}
  virtual void on_op_output(const Tensor& out, const char* op, const std::vector<Tensor>& inputs) {}  // record(): op made out of inputs, as cast
  // After the last gradient one backward pass sends a leaf is added into its .grad: PyTorch's
  // post-accumulate-grad hook, where data-parallel training starts reducing that gradient.
  virtual void on_grad_accumulated(const Tensor& leaf) {}
  // A Span on this thread: timelines draw them (a TraceWriter), a Profile counts backward passes,
  // a MemoryHistory names what a backward node allocates by it.
  virtual void on_span_begin(const char* name, SpanKind kind) {}
  virtual void on_span_end(const char* name, SpanKind kind) {}

 private:
  friend void remove_observer(Observer*);
  friend void for_each_observer(void (*)(Observer&, const void*), const void*);
  std::atomic<int> calls_in_flight_{0};
};

// o hears every announcement from add to remove (at most 16 listeners at a time). remove waits
// for calls into o on other threads to return, so o may be destroyed after it; never call it
// from inside one of o's own hooks.
void add_observer(Observer* o);
void remove_observer(Observer* o);

extern std::atomic<int> observer_count;
inline bool observed() { return observer_count.load(std::memory_order_relaxed) > 0; }
void for_each_observer(void (*call)(Observer&, const void* hook), const void* hook);

// Calls hook(observer) for each listener: `announce([&](Observer& o) { o.on_free(d, p, n); });`
template <class Hook> void announce(const Hook& hook) {
  if (!observed()) return;
  for_each_observer([](Observer& o, const void* h) { (*static_cast<const Hook*>(h))(o); }, &hook);
}

// What made the blocks this thread allocates, where no kernel or backward node says it, for
// listeners that name memory: the outermost scope alive holds. Autocast opens one per cast, an
// optimizer one around its state. The name must be static (a literal).
class MadeBy {
 public:
  explicit MadeBy(const char* name);
  ~MadeBy();
  MadeBy(const MadeBy&) = delete;
  MadeBy& operator=(const MadeBy&) = delete;
  static const char* now();  // this thread's, or null: no scope is open

 private:
  bool set_ = false;
};

// The dispatcher's scope around one primitive call: its begin and end announced.
class KernelCall {
 public:
  KernelCall(const char* kernel, Device device) : kernel_(kernel), device_(device) {
    if ((announced_ = observed())) announce([&](Observer& o) { o.on_kernel_begin(kernel_, device_); });
  }
  ~KernelCall() {
    if (announced_) announce([&](Observer& o) { o.on_kernel_end(kernel_, device_); });
  }
  KernelCall(const KernelCall&) = delete;
  KernelCall& operator=(const KernelCall&) = delete;

 private:
  const char* kernel_;
  Device device_;
  bool announced_;
};

// A Span's scope, announced: `Span phase("optimizer", SpanKind::phase);`. The name must be static.
class Span {
 public:
  Span(const char* name, SpanKind kind) : name_(name), kind_(kind), announced_(observed()) {
    if (announced_) announce([&](Observer& o) { o.on_span_begin(name_, kind_); });
  }
  ~Span() {
    if (announced_) announce([&](Observer& o) { o.on_span_end(name_, kind_); });
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  const char* name_;
  SpanKind kind_;
  bool announced_;
};

// A post-accumulate-grad hook for every leaf, registered while it lives:
//   PostAccumulateGradHook ready([&](const Tensor& p) { start_all_reduce(p.grad()); });
// It runs on the backward's thread as soon as a leaf's .grad holds all of that pass's gradient,
// once per leaf per pass that adds into .grad (grad() does not; a checkpointed region's rerun is
// a pass of its own), the leaves nearest the loss first, with grad mode as the pass has it.
class PostAccumulateGradHook final : public Observer {
 public:
  explicit PostAccumulateGradHook(std::function<void(const Tensor& leaf)> hook) : hook_(std::move(hook)) { add_observer(this); }
  ~PostAccumulateGradHook() override { remove_observer(this); }
  void on_grad_accumulated(const Tensor& leaf) override { hook_(leaf); }

 private:
  std::function<void(const Tensor& leaf)> hook_;
};

}  // namespace ampgrad
