// watchdog.h — a thread that asks, every interval, whether this rank's transport has failed and,
// once it has, ends every rank: the failure on stderr, then MPI_Abort. NCCL tells of a peer that
// died or a network that failed only when asked (ncclCommGetAsyncError), and a host blocked in a
// wait that no error reaches (cudaStreamSynchronize behind a collective that never ends, an MPI
// call) never asks: the watchdog asks for it, as PyTorch's ProcessGroupNCCL's does. Nothing about
// which transport (nccl_backend.cpp gives it its probe).
//
//   Watchdog watch([&] { return failure(); });   // "" while all is well; asked every 100 ms
#pragma once
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace ampgrad::distributed {

class Watchdog {
 public:
  // probe runs on the watchdog's thread: "" while the transport is well, else what failed (an
  // exception it throws counts as a failure, its message as what failed).
  explicit Watchdog(std::function<std::string()> probe, std::chrono::milliseconds interval = std::chrono::milliseconds(100));
  ~Watchdog();  // wakes the thread at once (no wait for the interval) and joins it
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void run();
  std::function<std::string()> probe_;
  std::chrono::milliseconds interval_;
  int rank_;  // asked on the constructing thread: the watchdog's own makes one MPI call, its last
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the members it reads are made
};

}  // namespace ampgrad::distributed
