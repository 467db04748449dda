// ddp.h — DistributedDataParallel, PyTorch's DDP: one model replica per rank, each fed its own
// shard of the batch; gradients averaged over the ranks during backward, so every rank's optimizer
// takes the same step. No optimizer, no sampler (sampler.h), no AMP policy (rank_consistency.h).
//
// How: at construction the ranks' parameters and buffers are checked to be the same (names,
// dtypes, shapes; an Error on every rank names the first difference), then rank 0's are broadcast,
// so replicas start equal.
// Parameters are packed, in reverse registration order (roughly the order backward reaches them),
// into buckets of ~25 MB of one dtype and device. The engine announces each leaf whose gradient is
// complete (tensor/observer.h: once per leaf per pass, after its last gradient); when a bucket's
// last one arrives, its gradients are copied into the bucket and its all-reduce (avg) starts at
// once, while backward goes on with earlier layers. Buckets start in order (every rank must issue collectives in the same order). When the
// last parameter's gradient has arrived, every bucket is waited for and copied back into .grad:
// backward has then nothing left to do for these parameters.
// On the CPU the all-reduce is MPI_Iallreduce: started from the hook, moved along by MPI_Test at
// each later announcement, finished by MPI_Wait after the last one. On a GPU it is NCCL on its
// own stream, ordered after the gradients' kernels by an event: no host wait at all.
//
//   auto ddp = std::make_shared<distributed::DistributedDataParallel>(model, pg);
//   optim::SGD opt(ddp->parameters(), {.lr = 0.1});
//   loss = cross_entropy(ddp->forward(x_shard), y_shard);
//   scaler.scale(loss).backward();         // grads are the mean over ranks when this returns
//   { auto no_sync = ddp->no_sync(); ... backward(); }   // accumulation steps: no communication
//
// A parameter that gets no gradient in a backward pass that reaches others would leave its bucket
// waiting on one rank while others move on; as PyTorch, the next forward() refuses to run, naming
// the parameters.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "distributed/process_group.h"
#include "nn/module.h"
#include "tensor/observer.h"

namespace ampgrad::distributed {

struct DdpOptions {
  int64_t bucket_cap_bytes = 25 << 20;  // PyTorch's bucket_cap_mb = 25
  bool broadcast_buffers = true;        // rank 0's buffers (BatchNorm's running stats) before each training forward
  // Every N forward calls, check that all ranks' parameters are bit-identical (rank_consistency.h).
  // 0: never. Default: the environment variable AMPGRAD_DDP_CHECK=N, else 0.
  int64_t check_every = -1;
};

class DistributedDataParallel final : public nn::Module, private Observer {
 public:
  DistributedDataParallel(std::shared_ptr<nn::Module> module, ProcessGroup& pg, DdpOptions options = {});
  ~DistributedDataParallel() override;

  Tensor forward(const Tensor& x) override;
  nn::Module& module() const { return *module_; }

  // While a NoSync lives, backward passes accumulate .grad locally and reduce nothing; the first
  // backward after it reduces the whole accumulated gradient (PyTorch's no_sync()).
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp), outer_(std::exchange(ddp.no_sync_, true)) {}
    ~NoSync() { ddp_.no_sync_ = outer_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool outer_;
  };
  NoSync no_sync() { return NoSync(*this); }

  // The buckets' parameter names, in the order their all-reduces start.
  std::vector<std::vector<std::string>> buckets() const;

 private:
  struct Slot {
    std::string name;
    Tensor param;
    int64_t offset;  // in its bucket, in elements
    int bucket;
    bool ready = false;
  };
  struct Bucket {
    Tensor flat;  // (numel of its parameters) the gradients, packed
    std::vector<int> slots;
    int pending = 0;  // slots not ready yet this pass
    Work work;
  };
  void on_grad_accumulated(const Tensor& leaf) override;
  void launch_ready_buckets();
  void finish_pass();  // waits for every bucket, copies the means back into .grad, resets
  void reset_pass();
  void refuse_unfinished_pass();

  std::shared_ptr<nn::Module> module_;
  ProcessGroup& pg_;
  DdpOptions options_;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  std::unordered_map<const TensorImpl*, int> slot_of_;
  int next_bucket_ = 0;  // the next bucket to start, in order
  int ready_ = 0;        // slots ready this pass
  bool no_sync_ = false;
  int64_t forwards_ = 0;
};

}  // namespace ampgrad::distributed
