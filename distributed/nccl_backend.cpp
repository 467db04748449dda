// nccl_backend.cpp — collectives on CUDA tensors through NCCL: one communicator per process, made
// by broadcasting rank 0's ncclUniqueId through MPI (as llm.c does), one device per rank, and a
// stream of its own. A collective starts after everything queued on the compute stream so far (an
// event it waits on) and the compute stream waits for its end (another event): ordered both ways,
// and the host never waits. A watchdog asks NCCL for a failed peer every 100 ms. Compiled only in
// a CUDA build that has NCCL.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "autograd/grad_mode.h"
#include "distributed/process_group.h"
#include "distributed/watchdog.h"
#include "tensor/cuda/runtime.h"

namespace ampgrad::distributed {
namespace {

void check_nccl(ncclResult_t status, const char* call) {
  AMPGRAD_CHECK(status == ncclSuccess, call << " failed: " << ncclGetErrorString(status));
}
#define AMPGRAD_NCCL_CHECK(call) check_nccl((call), #call)

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::Float64: return ncclFloat64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float32: return ncclFloat32;
    case DType::Int64: return ncclInt64;
    default: break;  // ProcessGroup refuses the rest
  }
  AMPGRAD_CHECK(false, "ProcessGroup: NCCL reduces no " << dtype_name(t) << " tensors");
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::max: return ncclMax;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::sum: return ncclSum;
  }
  AMPGRAD_CHECK(false, "ProcessGroup: unknown ReduceOp " << int(op));
  return ncclSum;
}

class NcclBackend final : public Backend {
 public:
  NcclBackend(MPI_Comm comm, int device) : device_(device) {
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    ncclUniqueId id;
    if (rank == 0) AMPGRAD_NCCL_CHECK(ncclGetUniqueId(&id));
    AMPGRAD_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm));
    // The rank's one device, current from here on: a guard restoring device 0 instead would open
    // a context there on every rank (runtime.h, set_device).
    cuda::set_device(device_);
    AMPGRAD_NCCL_CHECK(ncclCommInitRank(&comm_, size, id, rank));
    AMPGRAD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    watchdog_.emplace([this] { return failure(); });
  }
  ~NcclBackend() override {
    watchdog_.reset();  // first: it asks comm_
    if (comm_) ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }

  Work all_reduce(const Tensor& t, ReduceOp op, bool /*async: NCCL is always asynchronous to the host*/) override {
    NoGradGuard no_grad;
    Tensor target = checked(t);
    const Tensor buffer = target.contiguous();
    cuda::DeviceGuard on(device_);
    const std::shared_ptr<cuda::Event> done = enqueue([&] {
      AMPGRAD_NCCL_CHECK(ncclAllReduce(buffer.raw_data(), buffer.raw_data(), size_t(buffer.numel()), nccl_type(t.dtype()), nccl_op(op), comm_, stream_));
    });
    auto finish = [=, this]() mutable {
      cuda::DeviceGuard on(device_);
      join(*done);  // first: later work waits for the collective, whatever check_peers finds
      check_peers();
      if (!buffer.is_same(target)) target.copy_(buffer);  // queued on the compute stream, after the join
      else target.bump_version();
    };
    auto poll = [done, this] {
      check_peers();
      return done->query();
    };
    return Work(finish, poll);
  }

  void broadcast(const Tensor& t, int root) override {
    NoGradGuard no_grad;
    Tensor target = checked(t);
    const Tensor buffer = target.contiguous();
    cuda::DeviceGuard on(device_);
    join(*enqueue([&] {
      AMPGRAD_NCCL_CHECK(ncclBroadcast(buffer.raw_data(), buffer.raw_data(), bytes(buffer), ncclUint8, root, comm_, stream_));
    }));
    if (!buffer.is_same(target)) target.copy_(buffer);
    else target.bump_version();
  }

  Tensor all_gather(const Tensor& t) override {
    NoGradGuard no_grad;
    const Tensor local = checked(t).contiguous();
    int size = 1;
    AMPGRAD_NCCL_CHECK(ncclCommCount(comm_, &size));
    Shape shape{size};
    shape.insert(shape.end(), t.shape().begin(), t.shape().end());
    Tensor out = empty(shape, TensorOptions(t.dtype()).device(t.device()));
    cuda::DeviceGuard on(device_);
    join(*enqueue([&] { AMPGRAD_NCCL_CHECK(ncclAllGather(local.raw_data(), out.raw_data(), bytes(local), ncclUint8, comm_, stream_)); }));
    return out;
  }

 private:
  Tensor checked(const Tensor& t) {
    AMPGRAD_CHECK(t.device().index == device_, "ProcessGroup: this rank's NCCL communicator is on cuda:" << device_ << ", the tensor on "
                                                   << t.device().str() << " (one device per rank)");
    check_peers();
    return t.detach();
  }
  static size_t bytes(const Tensor& t) { return size_t(t.numel()) * t.element_size(); }

  // What failed, or "" while the communicator is well. A peer that died or a network that failed
  // shows here (NCCL reports it asynchronously), not in the collective, which would wait for ever.
  // Asked by this rank's waits and by the watchdog's thread, hence the lock.
  std::string failure() {
    std::lock_guard lock(mutex_);
    if (!comm_) return failure_;
    ncclResult_t async = ncclSuccess;
    const ncclResult_t asked = ncclCommGetAsyncError(comm_, &async);
    if (asked != ncclSuccess) async = asked;
    if (async == ncclSuccess || async == ncclInProgress) return "";
    return "NCCL: the communicator on cuda:" + std::to_string(device_) + " failed (" + ncclGetErrorString(async) + ": " +
           ncclGetLastError(comm_) + "): a peer rank died or the network failed";
  }
  // Checked wherever DDP polls or finishes a collective: the failure raised here, the communicator
  // aborted (its kernels still waiting end), and the watchdog ends every rank within its interval.
  void check_peers() {
    const std::string failed = failure();
    if (failed.empty()) return;
    {
      std::lock_guard lock(mutex_);
      if (comm_) ncclCommAbort(comm_);
      comm_ = nullptr;
      failure_ = failed;
    }
    AMPGRAD_CHECK(false, failed);
  }

  // Queues `collective` on the NCCL stream behind all work on the compute stream so far; returns
  // the event that marks its end (shared: a Work's finish and poll both hold it). The events are
  // released however this returns or throws.
  template <class F> std::shared_ptr<cuda::Event> enqueue(const F& collective) {
    cuda::Event ready(device_);
    auto done = std::make_shared<cuda::Event>(device_);
    ready.record(cuda::stream());
    ready.wait_in(stream_);
    collective();
    done->record(stream_);
    return done;
  }
  // The compute stream waits for the collective's end: later kernels (and a block the caching
  // allocator hands out again) come after it.
  static void join(const cuda::Event& done) { done.wait_in(cuda::stream()); }

  int device_;
  ncclComm_t comm_ = nullptr;  // set to null by check_peers alone, on the rank's thread
  cudaStream_t stream_ = nullptr;
  std::mutex mutex_;     // comm_ and failure_, between the rank's thread and the watchdog's
  std::string failure_;  // what aborted the communicator
  std::optional<Watchdog> watchdog_;  // last: made once the communicator is
};

}  // namespace

std::unique_ptr<Backend> make_nccl_backend(MPI_Comm comm, int device) { return std::make_unique<NcclBackend>(comm, device); }

}  // namespace ampgrad::distributed
