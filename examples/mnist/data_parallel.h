// data_parallel.h — what `mnist --ddp` changes in the training loop, run under mpirun: the model
// wrapped in DistributedDataParallel, each rank's shard of every epoch (DistributedSampler: the
// per-rank batch is --batch-size / ranks), and a number averaged over ranks for the log. Only
// rank 0 prints and writes (main.cpp). A build without MPI refuses --ddp, naming why.
//
//   mpirun -np 2 build/examples/mnist --ddp --batch-size 128   # 64 samples per rank per step
#pragma once
#include <memory>

#include "data/loader.h"
#include "nn/module.h"

namespace mnist::data_parallel {

void init(int& argc, char**& argv);  // MPI for the rest of the process
int rank();
int ranks();
std::shared_ptr<ampgrad::nn::Module> wrap(std::shared_ptr<ampgrad::nn::Module> model);
ampgrad::data::Dataset shard(const ampgrad::data::Dataset& all, uint64_t seed, int64_t epoch);
double mean(double value);  // over ranks

}  // namespace mnist::data_parallel
