// loader.h — Dataset (all images and labels in memory) and DataLoader (mini-batches of it).
// Shuffling is reproducible: epoch e's order comes from a generator seeded with (seed, e), so a
// run resumed at epoch e sees the same batches. No worker threads, no transforms beyond
// normalisation, no devices: batches are CPU tensors (move them with .to(device)).
// Shape letters: N samples, B batch, C channels, H height, W width.
//
//   DataLoader loader(load_mnist_dir("data-cache/mnist", "train"),
//                     {.batch_size = 64, .shuffle = true, .seed = 0, .mean = 0.1307, .std = 0.3081});
//   for (int epoch = 0; epoch < 3; ++epoch)
//     for (auto [x, y] : loader) { ... }      // each loop over `loader` is the next epoch
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/tensor.h"

namespace ampgrad::data {

struct Dataset {
  Tensor images;  // (N, C, H, W) float32
  Tensor labels;  // (N) int64
  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

struct Batch {
  Tensor x;  // (B, C, H, W) float32, normalised
  Tensor y;  // (B) int64
};

struct DataLoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = false;
  uint64_t seed = 0;
  bool drop_last = false;  // drop a last batch smaller than batch_size
  double mean = 0.0, std = 1.0;  // x = (image - mean) / std
};

class DataLoader {
 public:
  DataLoader(Dataset dataset, DataLoaderOptions options);

  int64_t size() const;  // batches per epoch
  const Dataset& dataset() const { return dataset_; }
  // The sample indices of epoch e, in the order its batches visit them.
  std::vector<int64_t> order(int64_t epoch) const;
  // Batch i of a given order: rows order[i*B, (i+1)*B) gathered into fresh tensors.
  Batch batch(const std::vector<int64_t>& order, int64_t i) const;

  // The epoch the next loop over the loader will run; set it to resume a run.
  int64_t next_epoch() const { return next_epoch_; }
  void set_epoch(int64_t epoch) { next_epoch_ = epoch; }

  class Iterator {
   public:
    Batch operator*() const { return loader_->batch(*order_, index_); }
    Iterator& operator++() { ++index_; return *this; }
    bool operator!=(const Iterator& o) const { return index_ != o.index_; }

   private:
    friend class DataLoader;
    Iterator(const DataLoader* loader, std::shared_ptr<const std::vector<int64_t>> order, int64_t index)
        : loader_(loader), order_(std::move(order)), index_(index) {}
    const DataLoader* loader_;
    std::shared_ptr<const std::vector<int64_t>> order_;
    int64_t index_;
  };
  Iterator begin();  // starts epoch next_epoch() and advances it
  Iterator end() const { return Iterator(this, nullptr, size()); }

 private:
  Dataset dataset_;
  DataLoaderOptions options_;
  int64_t next_epoch_ = 0;
};

}  // namespace ampgrad::data
