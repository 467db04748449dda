// process_group.h — collectives over every rank: all_reduce (sum, max, avg), broadcast,
// all_gather and barrier, on tensors of every floating dtype and int64. A CPU tensor travels by
// MPI, a CUDA tensor by NCCL (one communicator per process, one device per rank). Collectives are
// in place where they can be, and every rank must call the same ones in the same order, as MPI and
// NCCL require. Nothing about models (ddp.h) or AMP (rank_consistency.h).
//
//   distributed::Environment env(argc, argv);
//   distributed::ProcessGroup pg;                 // all ranks of MPI_COMM_WORLD
//   Tensor g = ones({4});
//   pg.all_reduce(g, ReduceOp::avg);              // the mean over ranks, the same bits on each
//   distributed::Work w = pg.all_reduce_async(g); // started; ... other work ...; w.wait();
//
// 16-bit tensors on the CPU are widened to float32, reduced in float32 and rounded once (a sum of
// float16 values rounded after every add would depend on the order MPI adds in); NCCL reduces
// float16 and bfloat16 itself.
// A failed NCCL communicator (a peer rank died, the network failed) ends every rank within 0.1 s,
// naming the failure (watchdog.h): its collectives, and any host wait behind them, would wait for ever.
#pragma once
#include <functional>
#include <memory>
#include <utility>

#include "distributed/environment.h"
#include "tensor/tensor.h"

namespace ampgrad::distributed {

enum class ReduceOp { sum, max, avg };  // avg: the sum divided by the number of ranks (floating only)

// A collective in flight. wait() completes it: the tensor holds the result afterwards (for a
// CUDA tensor: later work on the compute stream runs after it, with no host wait). A Work that
// was never waited for waits when destroyed, so its buffers never outlive their use.
class Work {
 public:
  Work() = default;
  explicit Work(std::function<void()> finish, std::function<bool()> poll = {}) : finish_(std::move(finish)), poll_(std::move(poll)) {}
  Work(Work&& o) noexcept : finish_(std::exchange(o.finish_, nullptr)), poll_(std::exchange(o.poll_, nullptr)) {}
  Work& operator=(Work&& o) noexcept;
  ~Work();
  void wait();
  // Lets the transport move the collective along (MPI progresses nonblocking collectives inside
  // MPI calls); true once it has completed. Optional: wait() alone is enough.
  bool poll();

 private:
  std::function<void()> finish_;
  std::function<bool()> poll_;
};

// What one transport implements; ProcessGroup picks MPI or NCCL by the tensor's device.
struct Backend {
  virtual ~Backend() = default;
  // async: start it and return (MPI_Iallreduce); else done on return (MPI_Allreduce: Open MPI's
  // blocking algorithms are up to 2.5x faster here than its nonblocking ones, bench/allreduce.cpp)
  virtual Work all_reduce(const Tensor& t, ReduceOp op, bool async) = 0;
  virtual void broadcast(const Tensor& t, int root) = 0;
  virtual Tensor all_gather(const Tensor& t) = 0;  // (ranks, *t.shape)
};

class ProcessGroup {
 public:
  ProcessGroup();  // every rank of MPI_COMM_WORLD (a duplicate: its messages meet no one else's)
  // The same, its CPU tensors carried by the Backend `host` makes on the group's communicator
  // rather than by MPI's own (a test's transport that fails when told to).
  explicit ProcessGroup(const std::function<std::unique_ptr<Backend>(MPI_Comm)>& host);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::sum);
  Work all_reduce_async(const Tensor& t, ReduceOp op = ReduceOp::sum);
  void broadcast(const Tensor& t, int root = 0);  // root's values into t on every rank
  Tensor all_gather(const Tensor& t);             // (size(), *t.shape): row r is rank r's t
  void barrier();

 private:
  Backend& backend_for(const char* op, const Tensor& t);
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::unique_ptr<Backend> host_, nccl_;  // CPU tensors (MPI), CUDA tensors (NCCL: made on the first)
};

std::unique_ptr<Backend> make_mpi_backend(MPI_Comm comm);
// A CUDA build with NCCL only: every rank calls it together (it bootstraps through comm).
std::unique_ptr<Backend> make_nccl_backend(MPI_Comm comm, int device);

}  // namespace ampgrad::distributed
