// observer.cpp — the listeners and the thread-local maker. An announcement copies the list under
// a lock and calls each listener outside it, so a hook may run ops (and announce again); each
// listener counts the calls in it, which is how remove_observer knows when it may return.
#include "tensor/observer.h"

#include <algorithm>
#include <mutex>
#include <thread>

#include "tensor/error.h"

namespace ampgrad {
namespace {
constexpr int kMaxObservers = 16;
struct Registry {
  std::mutex mu;
  Observer* observers[kMaxObservers] = {};
  int count = 0;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: static tensors free, and so announce, at exit
  return *r;
}
thread_local const char* current = nullptr;  // MadeBy's
}  // namespace

std::atomic<int> observer_count{0};

void add_observer(Observer* o) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  AMPGRAD_CHECK(r.count < kMaxObservers, "add_observer: " << kMaxObservers << " observers are listening already (the most at a time)");
  r.observers[r.count++] = o;
  observer_count = r.count;
}

void remove_observer(Observer* o) {
  Registry& r = registry();
  {
    std::lock_guard lock(r.mu);
    Observer** end = std::remove(r.observers, r.observers + r.count, o);
    r.count = int(end - r.observers);
    observer_count = r.count;
  }
  while (o->calls_in_flight_.load() > 0) std::this_thread::yield();
}

void for_each_observer(void (*call)(Observer&, const void* hook), const void* hook) {
  Observer* now[kMaxObservers];
  int n = 0;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    for (n = 0; n < r.count; ++n) {
      now[n] = r.observers[n];
      ++now[n]->calls_in_flight_;
    }
  }
  struct Done {  // each listener's count comes down even if a hook throws
    Observer** now;
    int n;
    ~Done() {
      for (int i = 0; i < n; ++i) --now[i]->calls_in_flight_;
    }
  } done{now, n};
  for (int i = 0; i < n; ++i) call(*now[i], hook);
}

MadeBy::MadeBy(const char* name) {
  if (current) return;  // the outermost holds
  current = name;
  set_ = true;
}

MadeBy::~MadeBy() {
  if (set_) current = nullptr;
}

const char* MadeBy::now() { return current; }

}  // namespace ampgrad
