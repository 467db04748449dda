// data_parallel.h — what `--ddp` changes in the trainers' loops, run under mpirun: the model
// wrapped in DistributedDataParallel, each rank's share of the data (MNIST: DistributedSampler's
// shard of every epoch; GPT: its rows of a global batch every rank draws alike), and a number
// averaged over ranks for the log. Per-rank batch = global batch / ranks. Only rank 0 prints and
// writes (the mains). A build without MPI refuses --ddp, naming why.
//
//   mpirun -np 2 build/examples/mnist --ddp --batch-size 128   # 64 samples per rank per step
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "data/loader.h"
#include "nn/module.h"

namespace ampgrad::examples::data_parallel {

// MPI for the rest of the process; true on rank 0, which alone prints and writes.
bool start(int& argc, char**& argv);
// Ends the process group (NCCL's communicator and stream first) and MPI: main calls it before
// it returns, while CUDA is still up (exit's teardown would end CUDA first).
void end();
// After an error on this rank, once MPI is up: ends every rank (MPI_Abort), which would otherwise
// wait in their next collective for this one forever.
void abort_all(int status);
int rank();
int ranks();
int cuda_device();  // the GPU of this rank, made current (distributed::set_local_device); 0 without --ddp
// Every rank's device, in rank order ("cuda:0,cuda:1"): rank 0 prints them all. Every rank calls it.
std::string devices(Device mine);
// Every rank's run settings (flag -> value) against rank 0's, before the first collective that
// depends on them: an Error on every rank names the first that differs and both values (ranks
// that disagree would otherwise hang in, or overrun, a collective of another size).
void check_same_settings(const std::map<std::string, std::string>& settings);
std::shared_ptr<nn::Module> wrap(std::shared_ptr<nn::Module> model);
data::Dataset shard(const data::Dataset& all, uint64_t seed, int64_t epoch);
Tensor local_rows(const Tensor& global);  // rows [r·B/N, (r+1)·B/N) of a (B, ...) batch, B a multiple of N
// Runs backward with the replica's reduction off (DDP's no_sync): an accumulation step's
// gradient stays local, and the step's last backward reduces the sum.
void without_sync(nn::Module& replica, const std::function<void()>& backward);
double mean(double value);                // over ranks
Tensor sum_over_ranks(const Tensor& t);  // on a copy, on t's device: no host read

}  // namespace ampgrad::examples::data_parallel
