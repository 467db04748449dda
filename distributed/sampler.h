// sampler.h — data::DistributedSampler, PyTorch's torch.utils.data.DistributedSampler: each of N
// ranks draws a disjoint shard of the data set's indices, reshuffled every epoch from a seed all
// ranks share. It decides indices only; batches come from a DataLoader's batch(indices, i).
//
// Padding (PyTorch's rule): with drop_last false, the shuffled list is extended by repeating its
// head until its length is a multiple of N, so every rank gets ceil(size / N) samples (a few
// samples are seen twice per epoch); with drop_last true its tail is cut to floor(size / N) per
// rank instead. Rank r takes positions r, r + N, r + 2N, ... of that list.
//
//   data::DistributedSampler sampler(loader.dataset().size(), pg.size(), pg.rank(), {.seed = 0});
//   std::vector<int64_t> mine = sampler.indices(epoch);   // the same permutation on every rank
//   for (int64_t i = 0; i < (int64_t)mine.size() / B; ++i) { data::Batch b = loader.batch(mine, i); ... }
#pragma once
#include <cstdint>
#include <vector>

namespace ampgrad::data {

struct DistributedSamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;  // epoch e shuffles with seed + e, as PyTorch
  bool drop_last = false;
};

class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, int num_replicas, int rank, DistributedSamplerOptions options = {});
  int64_t num_samples() const { return num_samples_; }  // per rank, every epoch
  int64_t total_size() const { return num_samples_ * num_replicas_; }
  std::vector<int64_t> indices(int64_t epoch) const;   // this rank's, in visiting order

 private:
  int64_t size_, num_samples_;
  int num_replicas_, rank_;
  DistributedSamplerOptions options_;
};

}  // namespace ampgrad::data
