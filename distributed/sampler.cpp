// sampler.cpp — DistributedSampler's shard: one permutation for all ranks, padded or cut, strided.
#include "distributed/sampler.h"

#include "tensor/error.h"
#include "tensor/random.h"
#include "tensor/tensor.h"

namespace ampgrad::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank, DistributedSamplerOptions options)
    : size_(dataset_size), num_replicas_(num_replicas), rank_(rank), options_(options) {
  AMPGRAD_CHECK(num_replicas >= 1, "DistributedSampler: num_replicas must be >= 1, got " << num_replicas);
  AMPGRAD_CHECK(rank >= 0 && rank < num_replicas, "DistributedSampler: rank " << rank << " is not in [0, " << num_replicas << ")");
  AMPGRAD_CHECK(dataset_size >= 0, "DistributedSampler: dataset size " << dataset_size << " is negative");
  num_samples_ = options.drop_last ? dataset_size / num_replicas : (dataset_size + num_replicas - 1) / num_replicas;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> all;
  if (options_.shuffle) {
    Generator gen(options_.seed + uint64_t(epoch));
    all = to_vector<int64_t>(randperm(size_, &gen));
  } else {
    for (int64_t i = 0; i < size_; ++i) all.push_back(i);
  }
  const int64_t total = total_size();
  for (int64_t i = 0; int64_t(all.size()) < total; ++i) all.push_back(all[i]);  // pad from the head (repeats if needed)
  std::vector<int64_t> mine;
  for (int64_t i = rank_; i < total; i += num_replicas_) mine.push_back(all[i]);
  return mine;
}

}  // namespace ampgrad::data
