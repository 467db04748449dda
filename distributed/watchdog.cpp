// watchdog.cpp — the watchdog's thread: asleep between probes, woken early only to stop.
#include "distributed/watchdog.h"

#include <cstdio>
#include <exception>
#include <utility>

#include "distributed/environment.h"

namespace ampgrad::distributed {

Watchdog::Watchdog(std::function<std::string()> probe, std::chrono::milliseconds interval)
    : probe_(std::move(probe)), interval_(interval), rank_(rank()), thread_([this] { run(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void Watchdog::run() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, interval_, [this] { return stopping_; })) {
    lock.unlock();
    std::string failure;
    try {
      failure = probe_();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (!failure.empty()) {
      std::fprintf(stderr, "ampgrad: rank %d ends every rank: %s\n", rank_, failure.c_str());
      std::fflush(stderr);
      // An MPI call beside the rank's own thread, which MPI_THREAD_SERIALIZED does not promise to
      // allow; the process ends in it (Open MPI's abort leaves by _exit, no destructor runs), and
      // mpirun ends the other ranks, wherever they wait.
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    lock.lock();
  }
}

}  // namespace ampgrad::distributed
